"""The three peers bench_peers drives, each through the API its users call (docs/performance.md,
"Peers"): comfy-orch's Python host (comfy_orch.host.Host over liborch_host.so, as ComfyUI's
process uses it), comfy-env's SubprocessWorker and pyisolate's ExtensionManager; and the floor of
a call, a socket round trip. Each runs in its own process (peer_process.py): one peer's settings
of the process (pyisolate sets torch's sharing strategy) never reach another's.

Every runner has the same steps, and only `start` and `together` are timed as starts:
  prepare(module, count)   untimed: what a peer's user has on disk before starting, built here
                           (comfy-orch's deployment and packs, pyisolate's venvs and its
                           dependency lock): no timed start builds an environment
  start(prepared)          create the workers (no call yet)
  first_call(started, i)   worker i's first answered call
  together(prepared)       all the prepared workers created and answering once, each creation
                           and first call issued from its own thread, at once (in_threads)
  empty / echo / add_one   one call of bench_nodes' function on worker 0, returning the answer
  stop(started)
The same function bodies (bench_nodes) run in all three."""

import asyncio
import contextlib
import os
import socket as socket_flags
import subprocess
import sys
import threading
import time

clock = time.perf_counter


def in_threads(work, count):
    """work(i) for i in range(count), each in its own thread, released together by a barrier;
    re-raises the first failure."""
    barrier = threading.Barrier(count)
    failures = []

    def run(i):
        try:
            barrier.wait()
            work(i)
        except BaseException as e:  # noqa: B902  (reported by the caller's thread)
            failures.append(e)
    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]


class ComfyOrch:
    name = "comfy-orch"
    empty_answer = []  # the node's outputs: none

    def __init__(self, scratch, python, build_dir):
        self.scratch, self.python, self.build_dir = scratch, python, build_dir
        self.runs = 0

    def prepare(self, module, count):
        """A deployment of `count` packs, each one env and one worker running `module`'s nodes."""
        import comfy_orch.host  # noqa: F401  (imported before any clock, as ComfyUI's is)
        self.runs += 1
        run = os.path.join(self.scratch, "orch-%d" % self.runs)
        packs, pythons = [], []
        for i in range(count):
            nodes = os.path.join(run, "packs", "PeerBench%d" % i, "nodes")
            os.makedirs(nodes)
            with open(os.path.join(nodes, "__init__.py"), "w") as f:
                f.write("import sys\nsys.path.insert(0, %r)\nfrom %s import node_classes\n"
                        "NODE_CLASS_MAPPINGS = node_classes(%r)\n"
                        % (os.path.join(self.scratch, "code"), module, str(i)))
            with open(os.path.join(nodes, "comfy-env.toml"), "w") as f:
                f.write('python = "3.11"\n')
            packs.append('"packs/PeerBench%d"' % i)
            pythons.append('"peerbench%d-nodes" = "%s"' % (i, self.python))
        deployment = os.path.join(run, "deployment.toml")
        with open(deployment, "w") as f:
            f.write('[host]\ndevice = "sim"\n[host.sim]\ncapacity = "4GiB"\n'
                    '[plugins]\nsearch_paths = ["%s"]\n[packs]\npaths = [%s]\n[packs.python]\n%s\n'
                    '[workers]\nhandshake_timeout = "120s"\n[shm]\npinned_pool_size = "512MiB"\n'
                    % (os.path.join(self.build_dir, "plugins", "lib"), ", ".join(packs),
                       "\n".join(pythons)))
        return deployment, count

    def start(self, prepared):
        from comfy_orch.host import Host
        return Host(prepared[0])

    def first_call(self, host, i):
        return host.call("PeerEmpty%d" % i, {})

    def together(self, prepared):
        # Its API creates a host's workers from one deployment (the host starts them itself):
        # one creation, then each worker's first call from its own thread.
        host = self.start(prepared)
        in_threads(lambda i: self.first_call(host, i), prepared[1])
        return host

    def empty(self, host):
        return host.call("PeerEmpty0", {})

    def echo(self, host, image):
        return host.call("PeerEcho0", {"image": image})[0]

    def add_one(self, host, image):
        return host.call("PeerAddOne0", {"image": image})[0]

    def stop(self, host):
        host.stop()


class ComfyEnv:
    name = "comfy-env"
    empty_answer = None

    def __init__(self, scratch, python):
        self.code, self.python = os.path.join(scratch, "code"), python

    def prepare(self, module, count):
        # Its workers run this interpreter on the code directory: nothing to build.
        from comfy_env.isolation.workers.subprocess import SubprocessWorker  # noqa: F401
        return module, count

    def _worker(self, i):
        from comfy_env.isolation.workers.subprocess import SubprocessWorker
        # comfy-env prints its setup on stdout: peer_process sends its stdout to stderr.
        return SubprocessWorker(python=self.python, working_dir=self.code,
                                sys_path=[self.code], name="peer%d" % i)

    def start(self, prepared):
        module, count = prepared
        return module, [self._worker(i) for i in range(count)]

    def first_call(self, started, i):
        # A worker starts at its first call.
        return started[1][i].call_module(started[0], "empty")

    def together(self, prepared):
        module, count = prepared
        workers = [None] * count

        def create_and_call(i):
            workers[i] = self._worker(i)
            workers[i].call_module(module, "empty")
        in_threads(create_and_call, count)
        return module, workers

    def empty(self, started):
        return started[1][0].call_module(started[0], "empty")

    def echo(self, started, image):
        return started[1][0].call_module(started[0], "echo", image=image)

    def add_one(self, started, image):
        return started[1][0].call_module(started[0], "add_one", image=image)

    def stop(self, started):
        for w in started[1]:
            w.shutdown()


class UvTripwire:
    """A `uv` first on PATH while pyisolate's start is timed: it records its arguments and fails.
    pyisolate runs `uv venv` and `uv pip install` from PATH when a venv or its dependency lock is
    missing (pyisolate/_internal/environment.py: create_venv, install_dependencies); with them
    prepared, its start must never run uv, and `armed` fails the run if it did."""

    def __init__(self, scratch):
        self.directory = os.path.join(scratch, "uv-tripwire")
        self.log = os.path.join(self.directory, "calls")
        os.makedirs(self.directory, exist_ok=True)
        script = os.path.join(self.directory, "uv")
        with open(script, "w") as f:
            f.write('#!/bin/sh\necho "uv $*" >> %r\nexit 97\n' % self.log)
        os.chmod(script, 0o755)

    @contextlib.contextmanager
    def armed(self):
        """PATH leads to the tripwire inside; on the way out, fails if it was run (before any
        failure of pyisolate's own that it caused)."""
        path = os.environ["PATH"]
        os.environ["PATH"] = self.directory + os.pathsep + path
        try:
            yield
        finally:
            os.environ["PATH"] = path
            if os.path.exists(self.log):
                with open(self.log) as f:
                    raise RuntimeError("pyisolate's timed start ran uv: " + f.read().strip())


class PyIsolate:
    name = "pyisolate"
    empty_answer = None

    def __init__(self, scratch, python):
        self.scratch, self.python = scratch, python
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        self.runs = 0
        self.tripwire = UvTripwire(scratch)

    def _venv(self, venv):
        """The venv pyisolate makes with `uv venv --seed` for an extension (create_venv), made
        the way this machine can: Debian's packages (numpy, torch) through
        --system-site-packages, and the parent's site-packages by the .pth pyisolate writes
        itself for share_torch."""
        import site
        subprocess.run([self.python, "-m", "venv", "--system-site-packages", "--without-pip",
                        venv], check=True)
        lib = os.path.join(venv, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
        with open(os.path.join(lib, "_pyisolate_parent.pth"), "w") as f:
            f.write("import site; site.addsitedir(r'%s')\n" % site.getsitepackages()[0])

    def prepare(self, module, count):
        """Each extension's package and venv, untimed, and pyisolate's own install_dependencies
        on it, as its start runs it (with no dependencies it returns without running uv). Its
        start (Extension's launch) then finds the venv, skips `uv venv`, and runs no uv at all:
        the tripwire says so at every start."""
        import pyisolate
        import pyisolate_extension  # noqa: F401  (imported before any clock)
        from pyisolate._internal.environment import install_dependencies
        from pathlib import Path
        self.runs += 1
        root = os.path.join(self.scratch, "pyisolate-%d" % self.runs)
        configs = []
        for i in range(count):
            name = "peer%d" % i
            self._venv(os.path.join(root, name))
            package = os.path.join(root, "extensions", name)
            os.makedirs(package)
            with open(os.path.join(package, "__init__.py"), "w") as f:
                f.write("import sys\nsys.path.insert(0, %r)\nNODE_MODULE = %r\n"
                        % (os.path.join(self.scratch, "code"), module))
            config = pyisolate.ExtensionConfig(
                name=name, module_path=package, isolated=True, dependencies=[], apis=[],
                share_torch=module.endswith("_torch"), share_cuda_ipc=False,
                sandbox_mode=pyisolate.SandboxMode.DISABLED)
            # The venv's name is the extension's, as pyisolate's Extension derives it.
            install_dependencies(Path(root) / name, config, name)
            configs.append(config)
        return root, configs

    def _manager(self, root):
        import pyisolate
        from pyisolate_extension import PeerExtension
        return pyisolate.ExtensionManager(
            PeerExtension, pyisolate.ExtensionManagerConfig(venv_root_path=root))

    def start(self, prepared):
        root, configs = prepared
        with self.tripwire.armed():
            manager = self._manager(root)
            extensions = [manager.load_extension(c) for c in configs]
        return manager, extensions

    def first_call(self, started, i):
        # An extension's process starts at the first use of its proxy.
        with self.tripwire.armed():
            return self.loop.run_until_complete(started[1][i].empty())

    def together(self, prepared):
        # Each thread loads its extension and awaits its first call on the thread's own event
        # loop (pyisolate's RPC answers on the loop of the caller that made it).
        root, configs = prepared
        manager, extensions, loops = self._manager(root), [None] * len(configs), []

        def create_and_call(i):
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            loops.append(loop)
            extensions[i] = manager.load_extension(configs[i])
            loop.run_until_complete(extensions[i].empty())
        with self.tripwire.armed():
            in_threads(create_and_call, len(configs))
        return manager, extensions

    def empty(self, started):
        return self.loop.run_until_complete(started[1][0].empty())

    def echo(self, started, image):
        return self.loop.run_until_complete(started[1][0].echo(image))

    def add_one(self, started, image):
        return self.loop.run_until_complete(started[1][0].add_one(image))

    def stop(self, started):
        started[0].stop_all_extensions()


class SocketFloor:
    """The floor of a call from Python: one byte to a Python process that sends it back, over a
    socketpair (what any peer's call needs at least: a round trip to another interpreter). With
    blocking reads, or with both sides polling (no wake-up at all: on a VM a blocking read's
    wake-up is 3 or 60 us depending on where the scheduler put the two, docs/performance.md,
    "Floors"); the report takes the lower. Its tensor floors are in peer_process.py (a copy,
    and a copy and the node's own add)."""

    # The echo process: recv(1) and send it back, until the socket closes. Polling, it sleeps in
    # select() once no byte came for 50 ms: between its blocks it must not hold a CPU.
    ECHO = ("import select, socket, sys, time\n"
            "s = socket.socket(fileno=int(sys.argv[1]))\n"
            "s.setblocking(sys.argv[2] == 'block')\n"
            "last = time.monotonic()\n"
            "while True:\n"
            "    try:\n        b = s.recv(1)\n"
            "    except BlockingIOError:\n"
            "        if time.monotonic() - last > 0.05:\n"
            "            select.select([s], [], [])\n"
            "        continue\n"
            "    if not b:\n        break\n"
            "    s.sendall(b)\n"
            "    last = time.monotonic()\n")
    empty_answer = b"x"

    def __init__(self, polling=False):
        self.polling = polling
        self.name = "socket floor, polling" if polling else "socket floor"

    def prepare(self, module, count):
        return None

    def start(self, prepared):
        import socket
        ours, theirs = socket.socketpair()
        child = subprocess.Popen(
            [sys.executable, "-S", "-c", self.ECHO, str(theirs.fileno()),
             "poll" if self.polling else "block"], pass_fds=[theirs.fileno()])
        theirs.close()
        return ours, child

    def empty(self, started):
        s = started[0]
        s.sendall(b"x")
        if not self.polling:
            return s.recv(1)
        while True:
            try:
                got = s.recv(1, socket_flags.MSG_DONTWAIT)
                if got:
                    return got
            except BlockingIOError:
                pass

    def first_call(self, started, i):
        return self.empty(started)

    def stop(self, started):
        started[0].close()
        started[1].wait()
