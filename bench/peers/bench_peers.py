"""bench_peers: comfy-orch, comfy-env 0.4.46 and pyisolate 0.10.2 side by side, in one run, from
their PyPI packages (docs/performance.md, "Peers side by side"). Run it with
./scripts/bench-peers, which builds comfy-orch and makes the venv the peers are installed in.

This process is the parent: every peer's caller, and every floor, runs in a process of its own
(peer_process.py), so that what one peer sets for its whole process never reaches another.
Every figure is measured in interleaved blocks, each block running every runner once in a
random order of its own (seeded: --seed), beside a floor from the same blocks:
  warm empty call       against a one-byte round trip to another Python process (socketpair),
                        the lower of blocking reads and both sides polling
  64 MiB IMAGE echo     against one copy of the same 64 MiB, from a new tensor each time
  64 MiB new IMAGE      the node answers a new tensor (the image plus one): against one copy
                        and that add
  cold start            spawn to the first answered call, against the interpreter's own start
                        (and `import torch` for the torch variant); each in a fresh process
  8 workers together    all eight created and answered once, each from its own thread, against
                        one worker's cold start
with what load cannot move much: each worker's RSS and PSS (once started, and after the calls),
per empty call the context switches and system calls of the caller and its worker, and with
--instructions the instructions of the caller (instructions.py). Every answer's content is
checked: a wrong one fails the run."""

import argparse
import json
import os
import random
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PEERS = ["comfy-orch", "comfy-env", "pyisolate"]


def p50(samples):
    return statistics.median(samples)


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"),
                        help="comfy-orch's build directory (default: build/)")
    parser.add_argument("--blocks", type=int, default=10, help="interleaved blocks (10)")
    parser.add_argument("--calls", type=int, default=200, help="empty calls per block (200)")
    parser.add_argument("--echoes", type=int, default=2,
                        help="64 MiB images per block, echoed and new each (2)")
    parser.add_argument("--starts", type=int, default=3,
                        help="cold starts per peer and variant, interleaved (3)")
    parser.add_argument("--seed", type=int,
                        help="the seed of the blocks' orders (default: a new one, printed)")
    parser.add_argument("--json", metavar="FILE", help="also write every figure to FILE")
    parser.add_argument("--instructions", action="store_true",
                        help="also count instructions per empty call in the caller under "
                             "valgrind's callgrind (minutes: each peer's caller starts twice "
                             "under it)")
    return parser.parse_args()


class Blocks:
    """The order of every block: a permutation of its runners drawn from one seeded generator,
    each block's its own (a fixed rotation let one runner follow another in most blocks). The
    orders are kept for the JSON."""

    def __init__(self, seed):
        self.random = random.Random(seed)
        self.orders = {}

    def order(self, what, names):
        order = self.random.sample(names, len(names))
        self.orders.setdefault(what, []).append(order)
        return order


def interleaved(children, blocks, order, what, **command):
    """children[name].ask(what, **command) for each runner, `blocks` times, each block in its
    own random order; a first block only warms up. Returns {name: [samples...]}."""
    samples = {name: [] for name in children}
    for block in range(blocks + 1):
        for name in order.order(what, list(children)):
            got = children[name].ask(what, **command)
            if block > 0:
                samples[name].extend(got)
    return samples


def cold_starts(build, starts, module, order):
    """Each peer's spawn-to-first-call of one worker running `module`, and the interpreter's
    start with the module's imports, each in a fresh process, interleaved."""
    from peer_process import INTERPRETER, once
    figures = {name: [] for name in PEERS + [INTERPRETER]}
    for _ in range(starts):
        for name in order.order("cold " + module, list(figures)):
            figures[name].append(once(name, build, "cold", module=module))
    figures["floor"] = figures.pop(INTERPRETER)
    return figures


def together(build, count, order):
    from peer_process import once
    return {name: once(name, build, "together", module="bench_nodes", count=count)
            for name in order.order("together", PEERS)}


def main():
    args = arguments()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    progress = lambda text: print("bench_peers: " + text, file=sys.stderr, flush=True)  # noqa
    progress("the blocks' orders from seed %d (--seed %d repeats them)" % (seed, seed))
    sys.path.insert(0, HERE)
    from peer_process import Child
    from process_counts import SyscallCount
    os.environ.setdefault("ORCH_HOST_LIBRARY", os.path.join(args.build, "lib", "liborch_host.so"))
    order = Blocks(seed)
    # The polling floor needs two CPUs: on one, a poll only takes the echo's turn.
    floors = ["socket floor"] + (
        ["socket floor, polling"] if len(os.sched_getaffinity(0)) > 1 else [])
    results = {"blocks": args.blocks, "calls_per_block": args.calls,
               "images_per_block": args.echoes, "seed": seed}
    if args.instructions:
        import instructions
        if instructions.available():
            results["instructions"] = instructions.per_call(
                os.path.join(HERE, "peer_process.py"), args.build, floors[:1] + PEERS,
                progress)
        else:
            progress("no valgrind: instructions are not counted")

    progress("cold starts without torch")
    results["cold"] = cold_starts(args.build, args.starts, "bench_nodes", order)
    progress("cold starts with torch")
    results["cold_torch"] = cold_starts(args.build, args.starts, "bench_nodes_torch", order)
    progress("8 workers started together")
    results["together"] = together(args.build, 8, order)

    progress("warm workers (torch variant, as the image needs), each runner in its process")
    children = {}
    for name in floors + PEERS:
        children[name] = Child(name, args.build)
        children[name].ask("warm", module="bench_nodes_torch")

    progress("empty calls, %d blocks of %d" % (args.blocks, args.calls))
    results["empty"] = interleaved(children, args.blocks, order, "empty", calls=args.calls)
    progress("64 MiB IMAGE echoes, %d blocks of %d" % (args.blocks, args.echoes))
    results["echo"] = interleaved(children, args.blocks, order, "echo", calls=args.echoes)
    progress("64 MiB new IMAGEs (the image plus one), %d blocks of %d" % (args.blocks,
                                                                        args.echoes))
    results["add_one"] = interleaved(children, args.blocks, order, "add_one", calls=args.echoes)

    progress("memory and counts")
    syscalls = SyscallCount.available()
    memory = {name: children[name].ask("memory") for name in PEERS}
    results["memory_kib_started"] = {name: memory[name]["started"] for name in PEERS}
    results["memory_kib"] = {name: memory[name]["after_calls"] for name in PEERS}
    results["counts"] = {name: children[name].ask("counts", calls=args.calls, syscalls=syscalls)
                         for name in order.order("counts", list(children))}
    for child in children.values():
        child.close()
    results["orders"] = order.orders
    report(results, PEERS)
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

    print("comfy-orch, comfy-env 0.4.46 and pyisolate 0.10.2 side by side, each caller in its own"
          " process (p50; in brackets, the ratio to the floor of the same blocks)")
    print("%-30s %-18s" % ("", "floor") + "".join("%-22s" % n for n in names))
    # The floor of a row is the lowest of the floors measured in its blocks.
    empty = {n: p50(results["empty"][n]) for n in results["empty"]}
    empty_floor = min(v for n, v in empty.items() if n.startswith("socket floor"))
    row("warm empty call", "%.1f us socket" % (empty_floor * 1e6), empty, empty_floor, "us", 1e6)
    echo = {n: p50(results["echo"][n]) for n in results["echo"]}
    echo_floor = min(v for n, v in echo.items() if n.startswith("socket floor"))
    row("64 MiB IMAGE in and out", "%.1f ms copy" % (echo_floor * 1e3), echo, echo_floor, "ms",
        1e3)
    new = {n: p50(results["add_one"][n]) for n in results["add_one"]}
    new_floor = min(v for n, v in new.items() if n.startswith("socket floor"))
    row("64 MiB in, a new one out", "%.1f ms copy+add" % (new_floor * 1e3), new, new_floor, "ms",
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
        print("%-30s %-18s" % (label, "started; after") + "".join(
            "%-22s" % ("%.0f; %.0f MiB" % (results["memory_kib_started"][n][index] / 1024,
                                           results["memory_kib"][n][index] / 1024))
            for n in names))
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
    for peer in names[1:]:
        print("%s / comfy-orch: empty call %.1fx, image echoed %.1fx, new image %.1fx" % (
            peer, empty[peer] / empty["comfy-orch"], echo[peer] / echo["comfy-orch"],
            new[peer] / new["comfy-orch"]))
    print("the blocks' orders came from --seed %d" % results["seed"])


if __name__ == "__main__":
    main()
