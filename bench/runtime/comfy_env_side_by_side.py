"""comfy-env's own worker, measured in the same run as bench_python (docs/performance.md).

Runs the unmodified comfy-env snapshot's SubprocessWorker (persistent subprocess, socket IPC,
tensors through shared memory) with its defaults, over a module with an empty function and an
echo, and prints one JSON object:
  cold_ms       spawn, its worker's imports and the first (empty) call
  warm_us       p50 of `calls` empty calls
  echo_ms       p50 of `reps` echoes of a 64 MiB float32 numpy image [1, 2048, 2048, 4]

Usage: python3 comfy_env_side_by_side.py <snapshot dir> <calls> <reps>
The snapshot needs tomli and tomli_w (Debian: python3-tomli, python3-tomli-w)."""

import json
import os
import shutil
import sys
import tempfile
import time


def p50(samples):
    samples = sorted(samples)
    return samples[len(samples) // 2]


def main():
    snapshot, calls, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    sys.path.insert(0, snapshot)
    # The worker is a child: it finds the snapshot the way an installed comfy-env is found.
    os.environ["PYTHONPATH"] = snapshot
    import numpy as np
    from comfy_env.isolation.workers.subprocess import SubprocessWorker

    module_dir = tempfile.mkdtemp(prefix="orch-bench-comfy-env-")
    with open(os.path.join(module_dir, "bench_nodes.py"), "w") as f:
        f.write("def empty():\n    return None\n\n\ndef echo(image):\n    return image\n")
    worker = SubprocessWorker(python=sys.executable, working_dir=module_dir,
                              sys_path=[module_dir], name="bench")
    t0 = time.perf_counter()
    worker.call_module("bench_nodes", "empty")
    cold = time.perf_counter() - t0
    warm = []
    for _ in range(calls):
        t = time.perf_counter()
        worker.call_module("bench_nodes", "empty")
        warm.append(time.perf_counter() - t)
    image = np.full((1, 2048, 2048, 4), 0.5, np.float32)
    echo = []
    for _ in range(reps):
        t = time.perf_counter()
        out = worker.call_module("bench_nodes", "echo", image=image)
        echo.append(time.perf_counter() - t)
        if out.shape != image.shape:
            raise SystemExit("comfy-env echoed a %s array" % (out.shape,))
    worker.shutdown()
    shutil.rmtree(module_dir, ignore_errors=True)
    # comfy-env prints on stdout too: the result is the last line.
    print(json.dumps({"cold_ms": cold * 1e3, "warm_us": p50(warm) * 1e6,
                      "echo_ms": p50(echo) * 1e3}))


if __name__ == "__main__":
    main()
