#!/bin/sh
# Every plugin exports only its entry points and links neither Boost nor spdlog/fmt
# (docs/plugin-abi.md). Usage: check_plugin_exports.sh PLUGIN.so...
status=0
for plugin in "$@"; do
  extra=$(nm -D --defined-only "$plugin" | awk '{print $3}' |
          grep -v -x -e orch_plugin_query -e orch_torch_malloc -e orch_torch_free)
  if [ -n "$extra" ]; then
    echo "$plugin exports more than its entry points: $extra"
    status=1
  fi
  if ldd "$plugin" | grep -E 'spdlog|libfmt|boost'; then
    echo "$plugin links a library plugins must not link"
    status=1
  fi
done
exit $status
