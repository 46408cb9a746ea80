#include "orch/plugins/names.hpp"

#include <array>
#include <utility>

namespace orch::plugins {

const char* status_name(orch_status status) noexcept { return orch_status_name(status); }

const char* kind_name(orch_plugin_kind kind) noexcept {
  switch (kind) {
    case ORCH_KIND_PAGER: return "pager";
    case ORCH_KIND_ALLOCATOR: return "allocator";
    case ORCH_KIND_BACKEND: return "backend";
    default: return "unknown";
  }
}

const char* backend_name(orch_backend_kind backend) noexcept {
  switch (backend) {
    case ORCH_BACKEND_CPU: return "cpu";
    case ORCH_BACKEND_SIM: return "sim";
    case ORCH_BACKEND_CUDA: return "cuda";
    case ORCH_BACKEND_HIP: return "hip";
    default: return "unknown";
  }
}

std::vector<std::string> capability_names(uint64_t capabilities) {
  static constexpr std::array<std::pair<uint64_t, const char*>, 12> known{{
      {ORCH_CAP_SIGNATURES, "signatures"},
      {ORCH_CAP_WATERMARK_LIMIT, "watermark_limit"},
      {ORCH_CAP_SET_WATERMARK, "set_watermark"},
      {ORCH_CAP_RESIDENCY, "residency"},
      {ORCH_CAP_BUDGET_CAP, "budget_cap"},
      {ORCH_CAP_LEDGER, "ledger"},
      {ORCH_CAP_CAST_BUFFERS, "cast_buffers"},
      {ORCH_CAP_TORCH_ALLOC, "torch_alloc"},
      {ORCH_CAP_VMM, "vmm"},
      {ORCH_CAP_HOST_REGISTER, "host_register"},
      {ORCH_CAP_SIM_CONTROL, "sim_control"},
      {ORCH_CAP_PRESSURE_SOURCE, "pressure_source"},
  }};
  std::vector<std::string> names;
  uint64_t rest = capabilities;
  for (const auto& [bit, name] : known) {
    if ((capabilities & bit) != 0) names.emplace_back(name);
    rest &= ~bit;
  }
  for (int i = 0; i < 64; ++i)
    if ((rest >> i) & 1u) names.push_back("bit" + std::to_string(i));
  return names;
}

}  // namespace orch::plugins
