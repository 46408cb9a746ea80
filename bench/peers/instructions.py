"""Instructions per empty call in the caller's process (bench_peers --instructions;
docs/performance.md, "Peers side by side"), counted where the machine has no hardware counters.

The caller runs under `valgrind --tool=callgrind` and its worker does not (no --trace-children):
the count is what the host side of a call executes (the process ComfyUI's would be), which load
cannot move, while the worker runs at full speed. It is the difference between a run of `many`
calls and one of `few`, divided by the calls between them, so that start-up and teardown cancel.
Each run is peer_process.py in --count-calls mode (the caller's process of one runner, as in
bench_peers' own runs), with PYTHONHASHSEED fixed.

The worker is left out on purpose: comfy-orch's worker polls for its next call for a bounded
time, and under valgrind (which runs one thread at a time, tens of times slower) the instructions
of that poll would measure valgrind's scheduling, not the code."""

import os
import re
import shutil
import subprocess
import sys
import tempfile

FEW, MANY = 20, 220


def available():
    return shutil.which("valgrind") is not None


def _run(script, build, peer, calls, scratch):
    out = os.path.join(scratch, "callgrind.%s.%d" % (peer.replace(" ", "_"), calls))
    env = dict(os.environ, PYTHONHASHSEED="0")
    subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
                    sys.executable, script, "--build", build, "--count-calls", peer, str(calls)],
                   check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        for line in f:
            match = re.match(r"(?:summary|totals):\s+(\d+)", line)
            if match:
                return int(match.group(1))
    raise RuntimeError("callgrind wrote no total for %s" % peer)


def per_call(script, build, names, progress):
    """{name: instructions per empty call in the caller} for each runner name."""
    counts = {}
    scratch = tempfile.mkdtemp(prefix="callgrind-")
    for name in names:
        progress("instructions of %s's caller under callgrind (two runs)" % name)
        few = _run(script, build, name, FEW, scratch)
        many = _run(script, build, name, MANY, scratch)
        counts[name] = (many - few) / (MANY - FEW)
    shutil.rmtree(scratch, ignore_errors=True)
    return counts

