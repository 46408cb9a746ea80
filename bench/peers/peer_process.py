"""One runner of bench_peers (a peer, a socket floor, or the interpreter's start) in its own
process (docs/performance.md, "Peers side by side"): bench_peers is the parent, and each peer's
caller is a child of it, so that what one peer sets for its whole process (pyisolate sets torch's
sharing strategy to file_system) never moves another's path. The parent's side is `Child`; the
child's side is `serve`, which reads one JSON command a line from one pipe and answers one JSON
line on another (stdout stays free for the peers, which print there: it goes to stderr).

Commands (peers.py's steps, timed here):
  cold MODULE            prepare untimed, then start and the first answered call: seconds
  together MODULE COUNT  prepare untimed, then every worker created and answering once: seconds
  warm MODULE            prepare, start and the first call, untimed; the workers stay up
  empty CALLS            that many empty calls: each one's seconds
  echo CALLS, add_one CALLS
                         that many 64 MiB images sent and answered (each a new tensor made
                         before its clock): each one's seconds; the floors copy it once (and
                         add one into a new tensor, as the node does)
  counts CALLS, stop
  memory                 the workers' (RSS, PSS) in KiB once started, and now
Every answer's content is checked (the empty call's value, every element of every image); a
wrong one fails the child, and the parent with it, saying which.

Run as `peer_process.py --build DIR --count-calls NAME CALLS` it only starts NAME's worker without
torch and makes CALLS empty calls (instructions.py runs it under callgrind)."""

import argparse
import json
import os
import select
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHAPE = (1, 2048, 2048, 4)  # float32: 64 MiB
INTERPRETER = "interpreter"  # the cold starts' floor
ANSWER_TIMEOUT = 900  # seconds: a child silent longer than any step has hung

clock = time.perf_counter


class Child:
    """The parent's handle on one runner's process."""

    def __init__(self, name, build):
        self.name = name
        commands_read, self._commands = os.pipe()
        self._replies, replies_write = os.pipe()
        self.process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--build", build, "--runner", name,
             "--commands", str(commands_read), "--replies", str(replies_write)],
            pass_fds=(commands_read, replies_write), stdin=subprocess.DEVNULL, stdout=sys.stderr)
        os.close(commands_read)
        os.close(replies_write)
        self._pending = b""

    def ask(self, command, **arguments):
        os.write(self._commands, (json.dumps(dict(arguments, do=command)) + "\n").encode())
        while b"\n" not in self._pending:
            ready, _, _ = select.select([self._replies], [], [], ANSWER_TIMEOUT)
            chunk = os.read(self._replies, 1 << 16) if ready else b""
            if not chunk:
                self.process.kill()
                raise SystemExit("bench_peers: %s's process %s at '%s'" % (
                    self.name, "did not answer" if not ready else "ended", command))
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        reply = json.loads(line)
        if "error" in reply:
            self.process.wait()
            raise SystemExit("bench_peers: %s failed at '%s':\n%s" % (self.name, command,
                                                                     reply["error"]))
        return reply["result"]

    def close(self):
        """Stops the runner's workers and waits for its process."""
        self.ask("stop")
        os.close(self._commands)
        os.close(self._replies)
        self.process.wait()


def once(name, build, command, **arguments):
    """`command` in a fresh process of `name`'s, which then ends: a cold start's sample."""
    child = Child(name, build)
    result = child.ask(command, **arguments)
    child.close()
    return result


# -- the child's side -------------------------------------------------------------------------

def interpreter_start(module):
    """The interpreter's start (and `module`'s import), without its teardown: a worker's first
    answer has none either (torch's teardown alone is a few hundred ms)."""
    t = clock()
    subprocess.run([sys.executable, "-c", "import os%s; os._exit(0)" %
                    (", " + module if module else "")], check=True)
    return clock() - t


def make_runner(name, build):
    """The runner `name` of peers.py, over a scratch directory with bench_nodes' code. The
    scratch directory is in TMPDIR, which scripts/bench-peers makes and removes after the run:
    comfy-env logs every call there, and torch's shared-memory manager keeps its socket there
    until the interpreter's very end."""
    scratch = tempfile.mkdtemp(prefix="%s-" % name.replace(" ", "-").replace(",", ""))
    code = os.path.join(scratch, "code")
    os.makedirs(code)
    for source in ("bench_nodes.py", "bench_nodes_torch.py"):
        with open(os.path.join(HERE, source)) as src, open(os.path.join(code, source), "w") as dst:
            dst.write(src.read())
    sys.path.insert(0, HERE)
    # After the venv's site-packages: the project's own comfy_env (its drop-in) must not hide
    # comfy-env's PyPI package.
    sys.path.append(os.path.join(ROOT, "python"))
    import peers
    python = sys.executable
    runners = {"comfy-orch": lambda: peers.ComfyOrch(scratch, python, build),
               "comfy-env": lambda: peers.ComfyEnv(scratch, python),
               "pyisolate": lambda: peers.PyIsolate(scratch, python),
               "socket floor": lambda: peers.SocketFloor(),
               "socket floor, polling": lambda: peers.SocketFloor(polling=True)}
    return runners[name]()


class Serving:
    """The child's state: its runner, and its warm workers once `warm` has started them."""

    def __init__(self, name, build):
        self.name = name
        self.runner = None if name == INTERPRETER else make_runner(name, build)
        self.started = self.workers = None
        self.images = 0
        if self.runner is not None:
            import torch  # before any clock: ComfyUI's process has torch imported
            self.torch = torch
        self.base = self.target = None

    def expect(self, got, wanted, what):
        if got != wanted:
            raise RuntimeError("%s: %s answered %r, not %r" % (self.name, what, got, wanted))

    def cold(self, module):
        if self.runner is None:
            return interpreter_start("torch" if module.endswith("_torch") else None)
        prepared = self.runner.prepare(module, 1)
        t = clock()
        started = self.runner.start(prepared)
        answer = self.runner.first_call(started, 0)
        seconds = clock() - t
        self.expect(answer, self.runner.empty_answer, "the first call")
        self.runner.stop(started)
        return seconds

    def together(self, module, count):
        prepared = self.runner.prepare(module, count)
        t = clock()
        started = self.runner.together(prepared)
        seconds = clock() - t
        self.runner.stop(started)
        return seconds

    def warm(self, module):
        from process_counts import descendants, memory_kib
        before = descendants()
        self.started = self.runner.start(self.runner.prepare(module, 1))
        self.expect(self.runner.first_call(self.started, 0), self.runner.empty_answer,
                    "the first call")
        self.workers = descendants() - before
        self.started_memory = memory_kib(self.workers)

    def empty(self, calls):
        times, answers = [], []
        for _ in range(calls):
            t = clock()
            answers.append(self.runner.empty(self.started))
            times.append(clock() - t)
        for answer in answers:
            self.expect(answer, self.runner.empty_answer, "an empty call")
        return times

    def images_through(self, node, calls):
        """`calls` images through `node` (echo or add_one), each checked in full."""
        torch = self.torch
        floor = not hasattr(self.runner, node)
        if self.base is None:
            # Each image is this random base plus a number new to the call: a stale, partial
            # or misplaced answer cannot match it.
            self.base = torch.rand(SHAPE, generator=torch.Generator().manual_seed(60))
        times = []
        for _ in range(calls):
            self.images += 1
            image = self.base + self.images
            t = clock()
            if floor:
                if self.target is None:
                    self.target = torch.empty(SHAPE)
                self.target.copy_(image)
                out = self.target + 1 if node == "add_one" else self.target
            else:
                out = getattr(self.runner, node)(self.started, image)
            times.append(clock() - t)
            self.check_image(node, out, image + 1 if node == "add_one" else image)
            del out
        return times

    def check_image(self, node, out, wanted):
        torch = self.torch
        if not isinstance(out, torch.Tensor):
            wrong = "a %s" % type(out).__name__
        elif tuple(out.shape) != SHAPE or out.dtype != wanted.dtype:
            wrong = "a %s %s tensor" % (tuple(out.shape), out.dtype)
        elif not torch.equal(out, wanted):
            wrong = "%d of its %d elements wrong" % (int((out != wanted).sum()), out.numel())
        else:
            return
        raise RuntimeError("%s: %s answered %s, not %s" % (
            self.name, node, wrong, "the image plus one" if node == "add_one" else "the image"))

    def counts(self, calls, syscalls):
        """Per empty call: the context switches and system calls of this process and the
        worker."""
        from process_counts import SyscallCount, switches
        pids = {os.getpid()} | self.workers
        perf = SyscallCount(pids) if syscalls else None
        before = switches(pids)
        if perf:
            perf.enable()
        self.empty(calls)
        if perf:
            perf.disable()
        after = switches(pids)
        counted = perf.finish() if perf else None
        return {"voluntary_switches": (after[0] - before[0]) / calls,
                "involuntary_switches": (after[1] - before[1]) / calls,
                "syscalls": counted / calls if counted is not None else None}

    def handle(self, command):
        do = command["do"]
        if do == "cold":
            return self.cold(command["module"])
        if do == "together":
            return self.together(command["module"], command["count"])
        if do == "warm":
            return self.warm(command["module"])
        if do == "empty":
            return self.empty(command["calls"])
        if do in ("echo", "add_one"):
            return self.images_through(do, command["calls"])
        if do == "counts":
            return self.counts(command["calls"], command["syscalls"])
        if do == "memory":
            from process_counts import memory_kib
            return {"started": self.started_memory, "after_calls": memory_kib(self.workers)}
        if do == "stop":
            if self.started is not None:
                self.runner.stop(self.started)
                self.started = None
            return None
        raise ValueError("unknown command %r" % do)


def serve(name, build, commands, replies):
    os.set_inheritable(commands, False)  # the peers' workers must not hold the pipes
    os.set_inheritable(replies, False)
    reader = os.fdopen(commands)
    try:
        serving = Serving(name, build)
    except BaseException:
        os.write(replies, (json.dumps({"error": traceback.format_exc()}) + "\n").encode())
        return 1
    for line in reader:
        command = json.loads(line)
        try:
            reply = {"result": serving.handle(command)}
        except BaseException:
            reply = {"error": traceback.format_exc()}
        os.write(replies, (json.dumps(reply) + "\n").encode())
        if "error" in reply:
            return 1
        if command["do"] == "stop":
            break
    return 0


def count_calls(name, build, calls):
    """--count-calls: start one worker without torch, make `calls` empty calls, stop."""
    runner = make_runner(name, build)
    started = runner.start(runner.prepare("bench_nodes", 1))
    runner.first_call(started, 0)
    for _ in range(calls):
        runner.empty(started)
    runner.stop(started)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", required=True)
    parser.add_argument("--runner")
    parser.add_argument("--commands", type=int)
    parser.add_argument("--replies", type=int)
    parser.add_argument("--count-calls", nargs=2, metavar=("NAME", "CALLS"))
    args = parser.parse_args()
    os.environ.setdefault("ORCH_HOST_LIBRARY", os.path.join(args.build, "lib", "liborch_host.so"))
    if args.count_calls:
        return count_calls(args.count_calls[0], args.build, int(args.count_calls[1]))
    return serve(args.runner, args.build, args.commands, args.replies)


if __name__ == "__main__":
    sys.exit(main())
