// Which manager a process runs, pager or ledger, and why (docs/memory-semantics.md). The host
// decides from its flags and device; each worker follows the host through ORCH_WORKER_PAGER.
// Both are pure functions of their readings so every rule is a unit test; the host and the
// worker runtime call them with what they observed.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "orch/support/comfyui_flags.hpp"

namespace orch::plugins {

enum class memory_manager { pager, ledger };

const char* to_string(memory_manager m) noexcept;

struct manager_choice {
  memory_manager manager = memory_manager::ledger;
  std::string reason;  // complete on its own: "default", "disabled by --highvram", ...
};

// ComfyUI's flags that select the memory manager, as the host received them.
using host_memory_flags = comfyui_memory_flags;

struct host_manager_inputs {
  host_memory_flags flags;
  std::string device;                      // "sim", "cuda:0", "cpu", ...
  bool device_supports_pager = true;       // false on cpu and unknown devices
  std::optional<std::string> below_floor;  // "runtime X is below the floor Y", when it is
  std::optional<std::string> init_error;   // the pager plugin's init failed with this
};

// The pager is the default. The ledger is chosen by a flag, an unsupported device, a runtime
// below the floor, or a failed init; enable_dynamic_vram forces the pager past the first three.
manager_choice resolve_host_manager(const host_manager_inputs& in);

// The stable line the host logs once: "memory manager: pager (default)" or
// "memory manager: ledger (disabled by --highvram)".
std::string manager_log_line(const manager_choice& choice);

// The worker's signal from its host: ORCH_WORKER_PAGER, or comfy-env's COMFY_ENV_WORKER_AIMDO.
struct pager_signal {
  std::optional<std::string> value;  // nullopt when neither variable is set (or both are empty)
  std::string variable;              // which variable the value came from
};

// How a flag variable reads: blank, falsy (0|false|no|off, any case, surrounding white space
// ignored), set (1|true|yes|on), or unrecognised (anything else: "maybe", control bytes).
// Shared by every on/off variable so they all agree. An unrecognised value keeps comfy-env's
// meaning where it has one (not falsy, so the pager signal reads as on), but is never silent:
// unrecognised_flag_warning says so.
enum class flag_reading { blank, falsy, set, unrecognised };
flag_reading read_flag(std::string_view value);
// Whether a reading means "on": set, or unrecognised (comfy-env reads every non-falsy value as
// true). Every on/off variable goes through this, so "Y" means the same for all of them.
inline bool reads_as_on(flag_reading r) noexcept {
  return r == flag_reading::set || r == flag_reading::unrecognised;
}
// "ORCH_WORKER_PAGER = \"maybe\" is neither true nor false; read as true (use 1 or 0)", with
// the value's control bytes escaped; nothing when the value reads as blank, falsy or set.
std::optional<std::string> unrecognised_flag_warning(std::string_view variable,
                                                     std::string_view value,
                                                     std::string_view read_as);

// Reads ORCH_WORKER_PAGER first, then COMFY_ENV_WORKER_AIMDO, through `getenv` (injectable).
pager_signal read_pager_signal(
    const std::function<std::optional<std::string>(const char*)>& getenv);

struct worker_manager_inputs {
  pager_signal signal;
  bool gpu_device = true;                 // false when the worker's device is the CPU
  std::optional<std::string> init_error;  // the pager plugin's init failed with this
};

// Unset: ledger, no parent signal. Falsy (0|false|no|off, any case, trimmed): ledger, disabled
// by the variable. CPU device: ledger, no GPU device. Failed init: ledger with the error.
// Otherwise the pager.
manager_choice resolve_worker_manager(const worker_manager_inputs& in);

// The value the host exports to a worker where the variable is not already set.
const char* worker_pager_value(memory_manager host) noexcept;

inline constexpr const char* worker_pager_variable = "ORCH_WORKER_PAGER";
inline constexpr const char* worker_pager_alias = "COMFY_ENV_WORKER_AIMDO";

}  // namespace orch::plugins
