"""One comfy-orch host as a Ray actor (docs/fleet.md, "The Ray side"): `host_actor` starts
`comfy-orch serve DEPLOYMENT --listen <this node's IP> --port 0` on the node Ray placed it on,
reads the URL from serve's 'listening on' line, and keeps serve's log (the last lines, and every
line on this actor's stderr, which Ray forwards to the driver's stderr).

Its life is serve's: when serve exits without stop() having been asked, the actor process exits
too (os._exit, a failure to Ray), so that Ray restarts it (max_restarts=-1), on this node or any
other that has the resource. When the actor's process dies (its worker or its whole node killed),
serve gets SIGTERM from the kernel (PR_SET_PDEATHSIG), so no serve outlives its actor."""

from __future__ import annotations

import collections
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import ray

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# serve's own line once it accepts connections (docs/serve.md), from its first character: a
# log line that quotes a client's request path can hold the words too, and the fleet's secret
# goes to the URL taken from it.
LISTENING = "comfy-orch serve: listening on "
STOP_GRACE_S = 10.0  # serve's graceful stop ends its workers' calls; past this, SIGKILL
EXIT_DELAY_S = 1.0  # time for wait()'s answer to leave before the actor exits
LOG_TAIL = 40


def _die_with(parent: int) -> Any:
    """A preexec_fn that asks the kernel to send the child SIGTERM when the thread that forked it
    ends (the actor's process dying ends it), and that ends the child at once if the parent is
    already gone. Bound before the fork: the child only calls into libc."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


class host_actor:
    """`comfy-orch serve` on this actor's node. Ray creates it with max_concurrency > 1 so that
    url(), describe() and stop() answer while a wait() blocks."""

    def __init__(self, comfy_orch: str, deployment: str, secret_file: str | None = None,
                 start_timeout_s: float = 120.0) -> None:
        self._node_ip: str = ray.util.get_node_ip_address()
        self._node_id: str = ray.get_runtime_context().get_node_id()
        command = [comfy_orch, "serve", deployment, "--listen", self._node_ip, "--port", "0"]
        if secret_file is not None:
            command += ["--fleet-secret-file", secret_file]
        self._command = command
        self._start_timeout_s = start_timeout_s
        self._lock = threading.Condition()
        self._url: str | None = None
        self._pid: int | None = None
        self._code: int | None = None
        self._stopping = False
        self._start_error: str | None = None
        self._log: collections.deque[str] = collections.deque(maxlen=LOG_TAIL)
        # serve is started by the thread that watches it, and that thread lives exactly as long as
        # serve: PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, so forking
        # from one of Ray's task threads could end serve when Ray retires that thread.
        threading.Thread(target=self._run, name="serve", daemon=True).start()

    def _run(self) -> None:
        try:
            process = subprocess.Popen(
                self._command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True,
                preexec_fn=_die_with(os.getpid()))
        except OSError as e:
            with self._lock:
                self._start_error = "cannot start %s: %s" % (self._command[0], e)
                self._code = 127
                self._lock.notify_all()
            self._exit_for_restart()
            return
        with self._lock:
            self._pid = process.pid
        assert process.stdout is not None
        for line in process.stdout:
            line = line.rstrip("\n")
            print("[%s] %s" % (socket.gethostname(), line), file=sys.stderr, flush=True)
            with self._lock:
                self._log.append(line)
                if self._url is None and line.startswith(LISTENING):
                    self._url = line[len(LISTENING):].strip()
                    self._lock.notify_all()
        code = process.wait()
        with self._lock:
            self._code = code
            stopping = self._stopping
            self._lock.notify_all()
        if not stopping:
            print("host_actor: serve (pid %d) exited with code %d; this actor exits so that Ray "
                  "restarts it" % (process.pid, code), file=sys.stderr, flush=True)
            self._exit_for_restart()

    def _exit_for_restart(self) -> None:
        # An unexpected exit, which Ray answers with a restart; exit_actor() would be an
        # intentional one, which it does not restart.
        time.sleep(EXIT_DELAY_S)
        os._exit(1)

    def _exited(self) -> str:
        why = self._start_error or "serve exited with code %s" % self._code
        tail = "\n".join(list(self._log)[-10:])
        return why + (" before listening; its last lines:\n" + tail if self._url is None else "")

    def url(self) -> str:
        """The URL serve answers at, once it listens. Raises RuntimeError when serve has exited
        (this actor is then exiting, for Ray to restart it) or did not listen in time."""
        deadline = time.monotonic() + self._start_timeout_s
        with self._lock:
            while self._url is None and self._code is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError("serve did not say 'listening on' in %.0f s: %s" % (
                        self._start_timeout_s, " ".join(self._command)))
                self._lock.wait(left)
            if self._code is not None:
                raise RuntimeError(self._exited())
            assert self._url is not None
            return self._url

    def describe(self) -> dict[str, Any]:
        """Where this host is: host name, Ray node id, node IP, serve's URL and pid, and the
        CUDA_VISIBLE_DEVICES serve inherited ("" when Ray gave it no GPU) (url()'s errors)."""
        url = self.url()
        return {"host_name": socket.gethostname(), "node_id": self._node_id,
                "node_ip": self._node_ip, "url": url, "pid": self._pid,
                "gpus": os.environ.get("CUDA_VISIBLE_DEVICES", "")}

    def wait(self) -> int:
        """Blocks until serve exits; its exit code (negative: the signal that ended it)."""
        code = self._exit_code(None)
        assert code is not None
        return code

    def log_tail(self) -> list[str]:
        """serve's last lines."""
        with self._lock:
            return list(self._log)

    def stop(self, grace_s: float = STOP_GRACE_S) -> int | None:
        """Stops serve: SIGTERM, then SIGKILL to its process group after `grace_s`. Returns its
        exit code (None if it never started). The actor stays, without serve, until the driver
        kills it."""
        with self._lock:
            self._stopping = True
            pid = self._pid
            if pid is None or self._code is not None:
                return self._code
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        if self._exit_code(grace_s) is None:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return self._exit_code(None)

    def _exit_code(self, timeout_s: float | None) -> int | None:
        """serve's exit code once it has one, or None after `timeout_s` (None: no limit)."""
        with self._lock:
            self._lock.wait_for(lambda: self._code is not None, timeout_s)
            return self._code


def start_host(name: str, comfy_orch: str, deployment: str, secret_file: str | None,
               resource: str, gpus: int = 0) -> Any:
    """Creates the actor `name` (its ActorHandle): one per node that has one unit of `resource`
    (num_cpus=0, so it takes no CPU from the node's tasks), spread over the nodes, restarted by
    Ray without end when its process or node dies; its calls are not retried (a wait() or stop()
    that an actor's death interrupted is answered by the driver, not replayed). With `gpus`, it
    also takes that many of its node's GPUs: Ray sets the actor's CUDA_VISIBLE_DEVICES to them,
    and serve, started from it, inherits it."""
    options = ray.remote(host_actor).options(
        name=name, num_cpus=0, num_gpus=gpus, resources={resource: 1}, max_restarts=-1,
        max_task_retries=0,
        max_concurrency=4, scheduling_strategy="SPREAD")
    return options.remote(comfy_orch, deployment, secret_file)
