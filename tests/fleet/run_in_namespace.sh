#!/bin/sh
# Runs the fleet test files given, with the Ray venv's Python and pytest, in a network namespace
# of their own with only lo up (Ray advertises and listens on every address it has: there it has
# 127.0.0.1 alone). Exits 77, which ctest reports as skipped, saying why, when the venv is missing
# or the namespace cannot be made (unshare -n needs root or CAP_SYS_ADMIN). With --script, runs
# the Python script given instead of pytest (scripts/bench-fleet).
# Usage: run_in_namespace.sh [--script] RAY_PYTHON ARGS...
set -eu
run="-m pytest"
if [ "$1" = "--script" ]; then
  run=""
  shift
fi
ray_python="$1"
shift
if [ ! -x "$ray_python" ]; then
  echo "skipped: no Ray venv at $ray_python; run ./scripts/install-deps"
  exit 77
fi
if ! unshare -n true 2>/dev/null; then
  echo "skipped: a network namespace (unshare -n) needs root or CAP_SYS_ADMIN"
  exit 77
fi
# $run is one word or none: unquoted on purpose.
exec unshare -n -- sh -c 'ip link set lo up && exec "$0" '"$run"' "$@"' "$ray_python" "$@"
