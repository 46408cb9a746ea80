"""The three peers bench_peers drives, each through the API its users call (docs/performance.md,
"Peers"): comfy-orch's Python host (comfy_orch.host.Host over liborch_host.so, as ComfyUI's
process uses it), comfy-env's SubprocessWorker and pyisolate's ExtensionManager. Each peer starts
`count` workers running bench_nodes (or bench_nodes_torch), times blocks of empty calls and
echoes, and stops them; the same function bodies run in all three."""

import asyncio
import contextlib
import os
import socket as socket_flags
import subprocess
import sys
import threading
import time

clock = time.perf_counter


class ComfyOrch:
    name = "comfy-orch"

    def __init__(self, scratch, python, build_dir):
        self.scratch, self.python, self.build_dir = scratch, python, build_dir
        self.runs = 0

    def start(self, module, count):
        """One host over `count` packs, each one env and one worker running `module`'s nodes."""
        from comfy_orch.host import Host
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
        return Host(deployment)

    def first_calls(self, host, count):
        for i in range(count):
            host.call("PeerEmpty%d" % i, {})

    def time_empty(self, host, calls):
        times = []
        for _ in range(calls):
            t = clock()
            host.call("PeerEmpty0", {})
            times.append(clock() - t)
        return times

    def echo(self, host, image):
        return host.call("PeerEcho0", {"image": image})[0]

    def stop(self, host):
        host.stop()


class ComfyEnv:
    name = "comfy-env"

    def __init__(self, scratch, python):
        self.code, self.python = os.path.join(scratch, "code"), python
        self.module = None

    def start(self, module, count):
        from comfy_env.isolation.workers.subprocess import SubprocessWorker
        self.module = module
        # comfy-env prints its setup on stdout: kept off the table.
        with contextlib.redirect_stdout(sys.stderr):
            return [SubprocessWorker(python=self.python, working_dir=self.code,
                                     sys_path=[self.code], name="peer%d" % i)
                    for i in range(count)]

    def first_calls(self, workers, count):
        # Each worker starts at its first call: all of them at once, from one thread each.
        with contextlib.redirect_stdout(sys.stderr):
            threads = [threading.Thread(target=w.call_module, args=(self.module, "empty"))
                       for w in workers[:count]]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

    def time_empty(self, workers, calls):
        times = []
        for _ in range(calls):
            t = clock()
            workers[0].call_module(self.module, "empty")
            times.append(clock() - t)
        return times

    def echo(self, workers, image):
        return workers[0].call_module(self.module, "echo", image=image)

    def stop(self, workers):
        with contextlib.redirect_stdout(sys.stderr):
            for w in workers:
                w.shutdown()


class PyIsolate:
    name = "pyisolate"

    def __init__(self, scratch, python):
        self.scratch, self.python = scratch, python
        self.loop = asyncio.new_event_loop()
        self.runs = 0

    def _venv(self, root, name):
        """The venv pyisolate makes with `uv venv --seed` for an extension, made beforehand (no
        peer's start here includes building its environment): Debian's packages (numpy, torch)
        through --system-site-packages, and the parent's site-packages by the .pth pyisolate
        writes itself for share_torch."""
        import site
        venv = os.path.join(root, name)
        subprocess.run([self.python, "-m", "venv", "--system-site-packages", "--without-pip",
                        venv], check=True)
        lib = os.path.join(venv, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
        with open(os.path.join(lib, "_pyisolate_parent.pth"), "w") as f:
            f.write("import site; site.addsitedir(r'%s')\n" % site.getsitepackages()[0])

    def start(self, module, count):
        import pyisolate
        from pyisolate_extension import PeerExtension
        self.runs += 1
        root = os.path.join(self.scratch, "pyisolate-%d" % self.runs)
        manager = pyisolate.ExtensionManager(
            PeerExtension, pyisolate.ExtensionManagerConfig(venv_root_path=root))
        extensions = []
        for i in range(count):
            name = "peer%d" % i
            self._venv(root, name)
            package = os.path.join(root, "extensions", name)
            os.makedirs(package)
            with open(os.path.join(package, "__init__.py"), "w") as f:
                f.write("import sys\nsys.path.insert(0, %r)\nNODE_MODULE = %r\n"
                        % (os.path.join(self.scratch, "code"), module))
            extensions.append(manager.load_extension(pyisolate.ExtensionConfig(
                name=name, module_path=package, isolated=True, dependencies=[], apis=[],
                share_torch=module.endswith("_torch"), share_cuda_ipc=False,
                sandbox_mode=pyisolate.SandboxMode.DISABLED)))
        return manager, extensions

    def first_calls(self, started, count):
        async def first():
            await asyncio.gather(*(e.empty() for e in started[1][:count]))
        self.loop.run_until_complete(first())

    def time_empty(self, started, calls):
        extension = started[1][0]

        async def block():
            times = []
            for _ in range(calls):
                t = clock()
                await extension.empty()
                times.append(clock() - t)
            return times
        return self.loop.run_until_complete(block())

    def echo(self, started, image):
        return self.loop.run_until_complete(started[1][0].echo(image))

    def stop(self, started):
        started[0].stop_all_extensions()


class SocketFloor:
    """The floor of a call from Python: one byte to a Python process that sends it back, over a
    socketpair (what any peer's call needs at least: a round trip to another interpreter). With
    blocking reads, or with both sides polling (no wake-up at all: on a VM a blocking read's
    wake-up is 3 or 60 us depending on where the scheduler put the two, docs/performance.md,
    "Floors"); the report takes the lower."""

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

    def __init__(self, polling=False):
        self.polling = polling
        self.name = "socket floor, polling" if polling else "socket floor"

    def start(self, module, count):
        import socket
        ours, theirs = socket.socketpair()
        child = subprocess.Popen(
            [sys.executable, "-S", "-c", self.ECHO, str(theirs.fileno()),
             "poll" if self.polling else "block"], pass_fds=[theirs.fileno()])
        theirs.close()
        return ours, child

    def _round_trip(self, s):
        s.sendall(b"x")
        if not self.polling:
            s.recv(1)
            return
        while True:
            try:
                if s.recv(1, socket_flags.MSG_DONTWAIT):
                    return
            except BlockingIOError:
                pass

    def first_calls(self, started, count):
        self._round_trip(started[0])

    def time_empty(self, started, calls):
        s, times = started[0], []
        for _ in range(calls):
            t = clock()
            self._round_trip(s)
            times.append(clock() - t)
        return times

    def stop(self, started):
        started[0].close()
        started[1].wait()
