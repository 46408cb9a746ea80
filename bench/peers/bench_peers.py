"""bench_peers: comfy-orch, comfy-env 0.4.46 and pyisolate 0.10.2 side by side, in one run, from
their PyPI packages (docs/performance.md, "Peers side by side"). Run it with
./scripts/bench-peers, which builds comfy-orch and makes the venv the peers are installed in.

Every latency is measured in interleaved blocks (the floors, then each peer, the order rotating
from block to block) and given beside a floor from the same blocks:
  warm empty call       against a one-byte round trip to another Python process (socketpair),
                        the lower of blocking reads and both sides polling
  64 MiB IMAGE echo     against one copy of the same 64 MiB, from a new tensor each time
  cold start            spawn to the first answered call, against the interpreter's own start
                        (and `import torch` for the torch variant)
  8 workers together    all eight answered once, against one worker's cold start
with what load cannot move much: each worker's RSS and PSS, per empty call the context switches
and system calls of the caller and its worker, and with --instructions the instructions of the
caller (instructions.py)."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHAPE = (1, 2048, 2048, 4)  # float32: 64 MiB


def p50(samples):
    return statistics.median(samples)


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"),
                        help="comfy-orch's build directory (default: build/)")
    parser.add_argument("--blocks", type=int, default=10, help="interleaved blocks (10)")
    parser.add_argument("--calls", type=int, default=200, help="empty calls per block (200)")
    parser.add_argument("--echoes", type=int, default=2, help="64 MiB echoes per block (2)")
    parser.add_argument("--starts", type=int, default=3,
                        help="cold starts per peer and variant, interleaved (3)")
    parser.add_argument("--json", metavar="FILE", help="also write every figure to FILE")
    parser.add_argument("--instructions", action="store_true",
                        help="also count instructions per empty call in the caller under "
                             "valgrind's callgrind (minutes: each peer's caller starts twice "
                             "under it)")
    parser.add_argument("--count-calls", nargs=2, metavar=("PEER", "CALLS"),
                        help=argparse.SUPPRESS)  # one run for --instructions, under callgrind
    return parser.parse_args()


def interleaved(runners, blocks, measure):
    """measure(runner) for each runner, `blocks` times, the order rotating by one per block;
    the first block only warms up. Returns {name: [samples...]}."""
    samples = {r.name: [] for r in runners}
    for block in range(blocks + 1):
        order = runners[block % len(runners):] + runners[:block % len(runners)]
        for r in order:
            got = measure(r)
            if block > 0:
                samples[r.name].extend(got)
    return samples


def interpreter_start(module):
    """The interpreter's start (and `module`'s import), without its teardown: a worker's first
    answer has none either (torch's teardown alone is a few hundred ms)."""
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import os%s; os._exit(0)" %
                    (", " + module if module else "")], check=True)
    return time.perf_counter() - t


def cold_starts(peers, starts, module, floor_module):
    """Each peer's spawn-to-first-call of one worker running `module`, and the interpreter's
    start with `floor_module`, interleaved."""
    figures = {p.name: [] for p in peers}
    figures["floor"] = []
    for round_ in range(starts):
        order = peers[round_ % len(peers):] + peers[:round_ % len(peers)]
        figures["floor"].append(interpreter_start(floor_module))
        for p in order:
            t = time.perf_counter()
            started = p.start(module, 1)
            p.first_calls(started, 1)
            figures[p.name].append(time.perf_counter() - t)
            p.stop(started)
    return figures


def together(peers, count):
    figures = {}
    for p in peers:
        t = time.perf_counter()
        started = p.start("bench_nodes", count)
        p.first_calls(started, count)
        figures[p.name] = time.perf_counter() - t
        p.stop(started)
    return figures


def counts(peer, started, workers, calls, syscalls):
    """Per empty call: the context switches and system calls of this process and the worker."""
    from process_counts import SyscallCount, switches
    pids = {os.getpid()} | workers
    perf = SyscallCount(pids) if syscalls else None
    before = switches(pids)
    if perf:
        perf.enable()
    peer.time_empty(started, calls)
    if perf:
        perf.disable()
    after = switches(pids)
    counted = perf.finish() if perf else None
    return {"voluntary_switches": (after[0] - before[0]) / calls,
            "involuntary_switches": (after[1] - before[1]) / calls,
            "syscalls": counted / calls if counted is not None else None}


def main():
    args = arguments()
    # The scratch directory is TMPDIR, which scripts/bench-peers makes and removes after this
    # process has exited: comfy-env logs every call there, and torch's shared-memory manager
    # keeps its socket there until the interpreter's very end.
    scratch = tempfile.mkdtemp(prefix="run-")
    os.environ.setdefault("ORCH_HOST_LIBRARY", os.path.join(args.build, "lib", "liborch_host.so"))
    code = os.path.join(scratch, "code")
    os.makedirs(code)
    for name in ("bench_nodes.py", "bench_nodes_torch.py"):
        with open(os.path.join(HERE, name)) as src, open(os.path.join(code, name), "w") as dst:
            dst.write(src.read())
    sys.path.insert(0, HERE)
    # After the venv's site-packages: the project's own comfy_env (its drop-in) must not hide
    # comfy-env's PyPI package.
    sys.path.append(os.path.join(ROOT, "python"))
    import peers as peer_kinds

    python = sys.executable
    # The polling floor needs two CPUs: on one, a poll only takes the echo's turn.
    floors = [peer_kinds.SocketFloor()] + (
        [peer_kinds.SocketFloor(polling=True)] if len(os.sched_getaffinity(0)) > 1 else [])
    floor = floors[0]
    peers = [peer_kinds.ComfyOrch(scratch, python, args.build),
             peer_kinds.ComfyEnv(scratch, python), peer_kinds.PyIsolate(scratch, python)]
    if args.count_calls:
        import instructions
        runner = {r.name: r for r in [floor] + peers}[args.count_calls[0]]
        return instructions.count_calls(runner, int(args.count_calls[1]))
    import torch

    from process_counts import SyscallCount, descendants, memory_kib
    results = {"blocks": args.blocks, "calls_per_block": args.calls}
    progress = lambda text: print("bench_peers: " + text, file=sys.stderr, flush=True)  # noqa
    if args.instructions:
        import instructions
        if instructions.available():
            results["instructions"] = instructions.per_call(
                os.path.abspath(__file__), args.build, [r.name for r in [floor] + peers], progress)
        else:
            progress("no valgrind: instructions are not counted")

    progress("cold starts without torch")
    results["cold"] = cold_starts(peers, args.starts, "bench_nodes", None)
    progress("cold starts with torch")
    results["cold_torch"] = cold_starts(peers, args.starts, "bench_nodes_torch", "torch")
    progress("8 workers started together")
    results["together"] = together(peers, 8)

    progress("warm workers (torch variant, as the image needs)")
    started, workers = {}, {}
    for r in floors + peers:
        before = descendants()
        started[r.name] = r.start("bench_nodes_torch", 1)
        r.first_calls(started[r.name], 1)
        workers[r.name] = descendants() - before
    runners = floors + peers

    progress("empty calls, %d blocks of %d" % (args.blocks, args.calls))
    results["empty"] = interleaved(runners, args.blocks,
                                   lambda r: r.time_empty(started[r.name], args.calls))

    progress("64 MiB IMAGE echoes, %d blocks of %d" % (args.blocks, args.echoes))
    target = torch.empty(SHAPE)

    def echo_block(r):
        times = []
        for _ in range(args.echoes):
            image = torch.full(SHAPE, 0.5)
            t = time.perf_counter()
            if r in floors:
                target.copy_(image)
            else:
                out = r.echo(started[r.name], image)
            times.append(time.perf_counter() - t)
            if r not in floors and tuple(out.shape) != SHAPE:
                raise SystemExit("%s echoed a %s tensor" % (r.name, tuple(out.shape)))
        return times
    results["echo"] = interleaved(runners, args.blocks, echo_block)

    progress("memory and counts")
    syscalls = SyscallCount.available()
    results["memory_kib"] = {r.name: memory_kib(workers[r.name]) for r in peers}
    results["counts"] = {r.name: counts(r, started[r.name], workers[r.name], args.calls,
                                        syscalls) for r in runners}
    for r in runners:
        r.stop(started[r.name])
    report(results, [p.name for p in peers])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


def report(results, names):
    def row(label, floor_text, values, floor_value, unit, scale):
        cells = []
        for name in names:
            value = values[name]
            ratio = " (%.1fx)" % (value / floor_value) if floor_value else ""
            cells.append("%.*f %s%s" % (1 if value * scale < 100 else 0, value * scale, unit,
                                        ratio))
        print("%-30s %-18s" % (label, floor_text) + "".join("%-22s" % c for c in cells))

    print("comfy-orch, comfy-env 0.4.46 and pyisolate 0.10.2 side by side (p50; in brackets,"
          " the ratio to the floor of the same blocks)")
    print("%-30s %-18s" % ("", "floor") + "".join("%-22s" % n for n in names))
    # The floor of a row is the lowest of the floors measured in its blocks.
    empty = {n: p50(results["empty"][n]) for n in results["empty"]}
    empty_floor = min(v for n, v in empty.items() if n.startswith("socket floor"))
    row("warm empty call", "%.1f us socket" % (empty_floor * 1e6), empty, empty_floor, "us", 1e6)
    echo = {n: p50(results["echo"][n]) for n in results["echo"]}
    echo_floor = min(v for n, v in echo.items() if n.startswith("socket floor"))
    row("64 MiB IMAGE in and out", "%.1f ms copy" % (echo_floor * 1e3), echo, echo_floor, "ms",
        1e3)
    for key, label, floor_label in (("cold", "cold start to first call", "python"),
                                    ("cold_torch", "the same, importing torch", "+torch")):
        cold = {n: p50(v) for n, v in results[key].items()}
        row(label, "%.0f ms %s" % (cold["floor"] * 1e3, floor_label), cold, cold["floor"],
            "ms", 1e3)
    single = {n: p50(results["cold"][n]) for n in names}
    print("%-30s %-18s" % ("8 workers started together", "1 worker's start") + "".join(
        "%-22s" % ("%.0f ms (%.1fx)" % (results["together"][n] * 1e3,
                                        results["together"][n] / single[n])) for n in names))
    for index, label in ((0, "RSS per warm worker"), (1, "PSS per warm worker")):
        print("%-30s %-18s" % (label, "") + "".join(
            "%-22s" % ("%.1f MiB" % (results["memory_kib"][n][index] / 1024)) for n in names))
    counts = results["counts"]
    for key, label in (("voluntary_switches", "voluntary switches per call"),
                       ("involuntary_switches", "involuntary switches per call"),
                       ("syscalls", "syscalls per call")):
        def text(value):
            return "n/a (no perf)" if value is None else "%.1f" % value
        print("%-30s %-18s" % (label, text(counts["socket floor"][key])) + "".join(
            "%-22s" % text(counts[n][key]) for n in names))
    if "instructions" in results:
        ins = results["instructions"]
        print("%-30s %-18s" % ("caller instructions per call", "%.0f" % ins["socket floor"]) +
              "".join("%-22s" % ("%.0f" % ins[n]) for n in names))
    print("comfy-env / comfy-orch: empty call %.1fx, image %.1fx;  pyisolate / comfy-orch: "
          "empty call %.1fx, image %.1fx" % (
              empty["comfy-env"] / empty["comfy-orch"], echo["comfy-env"] / echo["comfy-orch"],
              empty["pyisolate"] / empty["comfy-orch"], echo["pyisolate"] / echo["comfy-orch"]))


if __name__ == "__main__":
    main()
