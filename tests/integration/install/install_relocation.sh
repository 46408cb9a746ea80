#!/usr/bin/env bash
# cmake --install into a temporary prefix, the prefix moved, and everything run from where it
# landed (docs/deployment.md, "Install and relocation"):
#   1. install into <tmp>/staged;
#   2. move it to <tmp>/moved (nothing is left at the first path);
#   3. run the installed example deployment with the installed comfy-orch;
#   4. build a one-node pack (pack/) against the installed CMake package and run it through the
#      installed comfy-orch; its node names the worker executable it runs in.
# The variables come from CMakeLists.txt beside this file: ORCH_TEST_CMAKE, ORCH_TEST_BUILD_DIR,
# ORCH_TEST_GENERATOR, ORCH_TEST_MAKE_PROGRAM, ORCH_TEST_C_COMPILER and ORCH_INSTALL_* (paths
# relative to the prefix, cmake/InstallLayout.cmake).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# The defaults under test, not the caller's overrides.
unset ORCH_PLUGIN_PATH ORCH_WORKER_EXECUTABLE CMAKE_PREFIX_PATH

work="$(mktemp -d "${TMPDIR:-/tmp}/comfy-orch-install.XXXXXX")"
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# run <log> <command>...: the command's stdout and stderr in <log>, shown when it fails.
run() {
  local log="$1"
  shift
  local rc=0
  "$@" >"$log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    cat "$log" >&2
    fail "exit $rc from: $*"
  fi
}
expect() {  # expect <file> <fixed string>
  grep -qF -- "$2" "$1" || { cat "$1" >&2; fail "$1 does not say: $2"; }
}

echo "== 1. cmake --install $ORCH_TEST_BUILD_DIR --prefix $work/staged"
run "$work/install.log" "$ORCH_TEST_CMAKE" --install "$ORCH_TEST_BUILD_DIR" --prefix "$work/staged"

echo "== 2. mv $work/staged $work/moved"
mv "$work/staged" "$work/moved"
prefix="$work/moved"
[ ! -e "$work/staged" ] || fail "$work/staged still exists"
bin="$prefix/$ORCH_INSTALL_BINDIR"
examples="$prefix/$ORCH_INSTALL_EXAMPLES_DIR"
for f in "$bin/comfy-orch" "$bin/comfy-orch-worker" \
    "$prefix/$ORCH_INSTALL_PLUGIN_DIR/orch-backend-sim.so" \
    "$prefix/$ORCH_INSTALL_PLUGIN_DIR/orch-pager-sim.so" \
    "$prefix/$ORCH_INSTALL_NODE_DIR/liborch_pack_image_ops.so" \
    "$prefix/$ORCH_INSTALL_INCLUDEDIR/orch/plugin/plugin.h" \
    "$prefix/$ORCH_INSTALL_INCLUDEDIR/orch/worker/nodes.h" \
    "$prefix/$ORCH_INSTALL_CMAKE_DIR/comfy_orchConfig.cmake" \
    "$examples/sim-deployment.toml" "$examples/prompts/sim-sampler.json"; do
  [ -f "$f" ] || fail "not installed: $f"
done

echo "== 3. the installed example deployment, from the moved prefix"
cd "$work"  # no relative path may lean on the caller's directory
run "$work/plugins.json" "$bin/comfy-orch" plugins --json
expect "$work/plugins.json" "\"$prefix/$ORCH_INSTALL_PLUGIN_DIR\""
run "$work/envs.json" "$bin/comfy-orch" envs --json "$examples/sim-deployment.toml"
expect "$work/envs.json" "\"$prefix/$ORCH_INSTALL_NODE_DIR/liborch_pack_image_ops.so\""
run "$work/example.log" "$bin/comfy-orch" run "$examples/sim-deployment.toml" \
  --prompt "$examples/prompts/sim-sampler.json"
expect "$work/example.log" "execution_success"
expect "$work/example.log" "worker simsampler-nodes: ready"

echo "== 3b. launch hands ComfyUI the installed host library and Python package"
mkdir -p "$work/ComfyUI"
: > "$work/ComfyUI/main.py"
run "$work/launch.json" "$bin/comfy-orch" launch "$work/ComfyUI" --python /usr/bin/python3 \
  --dry-run
expect "$work/launch.json" "\"$prefix/$ORCH_INSTALL_WORKER_LIBRARY_DIR/liborch_host.so\""
expect "$work/launch.json" "\"$prefix/$ORCH_INSTALL_PYTHON_DIR\""
[ -f "$prefix/$ORCH_INSTALL_WORKER_LIBRARY_DIR/liborch_host.so" ] ||
  fail "not installed: liborch_host.so"
[ -f "$prefix/$ORCH_INSTALL_PYTHON_DIR/comfy_env/__init__.py" ] ||
  fail "not installed: the comfy_env compatibility module"

echo "== 4. a pack built against the installed package, run by the installed comfy-orch"
configure=("$ORCH_TEST_CMAKE" -S "$here/pack" -B "$work/pack-build" -G "$ORCH_TEST_GENERATOR"
  "-DCMAKE_PREFIX_PATH=$prefix" "-DCMAKE_C_COMPILER=$ORCH_TEST_C_COMPILER"
  -DCMAKE_BUILD_TYPE=Release)
if [ -n "${ORCH_TEST_MAKE_PROGRAM:-}" ]; then
  configure+=("-DCMAKE_MAKE_PROGRAM=$ORCH_TEST_MAKE_PROGRAM")
fi
run "$work/pack-configure.log" "${configure[@]}"
expect "$work/pack-configure.log" "comfy_orch_DIR=$prefix/$ORCH_INSTALL_CMAKE_DIR"
expect "$work/pack-configure.log" "comfy_orch_PLUGIN_DIR=$prefix/$ORCH_INSTALL_PLUGIN_DIR"
run "$work/pack-build.log" "$ORCH_TEST_CMAKE" --build "$work/pack-build"
[ -f "$work/pack-build/liborch_pack_greeting.so" ] || fail "the pack was not built"

mkdir -p "$work/deployment/packs/ComfyUI-Greeting/nodes"
cat >"$work/deployment/packs/ComfyUI-Greeting/nodes/comfy-env.toml" <<'TOML'
[worker]
library = "liborch_pack_greeting.so"
TOML
cat >"$work/deployment/comfy-orch.toml" <<TOML
[host]
device = "sim"

[host.sim]
capacity = "1GiB"

[packs]
paths = ["packs/ComfyUI-Greeting"]
library_paths = ["$work/pack-build"]

[shm]
pinned_pool_size = "64MiB"
TOML
echo '{"1": {"class_type": "Greeting", "inputs": {}}}' >"$work/deployment/greeting.json"
run "$work/greeting.log" "$bin/comfy-orch" run "$work/deployment/comfy-orch.toml" \
  --prompt "$work/deployment/greeting.json"
expect "$work/greeting.log" "execution_success"
# The host spawned the worker installed beside it, at the moved path.
expect "$work/greeting.log" "hello from $bin/comfy-orch-worker"
echo "ok: $prefix ran the example and a pack built against it"
