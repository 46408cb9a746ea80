#include "orch/plugins/abi_adapters.hpp"

#include <array>
#include <string>

namespace orch::plugins {
namespace {

// Major 1 is the host's own: its table is read as it is.
const orch_plugin_table* adapt_v1(const void* table) noexcept {
  return static_cast<const orch_plugin_table_v1*>(table);
}

// A host of major 2 would put {2, minor, identity} first and keep the v1 entry, its adapter then
// building an orch_plugin_table_v2 (and v2 kind tables) whose entries forward to the v1 plugin's,
// with every entry v1 has no counterpart for left NULL ("unsupported"). The built tables live
// for the process, one per v1 table adapted.
constexpr std::array<abi_adapter, 1> adapters{{
    {.major = 1, .minor = ORCH_PLUGIN_ABI_MINOR, .adapt = adapt_v1},
}};
static_assert(ORCH_PLUGIN_ABI_MAJOR == 1, "a new major needs its adapter entry above");

}  // namespace

std::span<const abi_adapter> abi_adapters() noexcept { return adapters; }

const abi_adapter* adapter_for(uint32_t major) noexcept {
  for (const abi_adapter& a : adapters)
    if (a.major == major) return &a;
  return nullptr;
}

std::string loaded_abi_majors() {
  std::string out;
  for (const abi_adapter& a : adapters) out += (out.empty() ? "" : ", ") + std::to_string(a.major);
  return out;
}

}  // namespace orch::plugins
