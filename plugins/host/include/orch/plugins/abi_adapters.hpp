// The plugin ABI majors this host loads, and for each the adapter that turns a plugin's table of
// that major into the table the host reads (docs/plugin-abi.md, "Versions"; NCCL keeps one
// adapter per old ncclNet_vN the same way). Major 1 is the only one so far, and its adapter is the
// identity.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "orch/plugin/plugin.h"

namespace orch::plugins {

struct abi_adapter {
  uint32_t major;
  uint32_t minor;  // the newest minor of that major this host knows: what it asks for
  // The host's table for `table`, a plugin's table of `major` whose header (struct_size,
  // abi_major, abi_minor) the loader has already checked; NULL when it cannot be adapted. The
  // result must stay valid as long as `table` does (the library stays loaded).
  const orch_plugin_table* (*adapt)(const void* table) noexcept;
};

// Newest major first: the loader asks a plugin for each in turn and adapts the first table it
// gets.
std::span<const abi_adapter> abi_adapters() noexcept;

// The adapter for plugins of `major`, or nullptr when this host cannot load them.
const abi_adapter* adapter_for(uint32_t major) noexcept;

// The majors this host loads, for messages: "1" today, "2, 1" once there is a second.
std::string loaded_abi_majors();

}  // namespace orch::plugins
