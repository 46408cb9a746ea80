#include "orch/plugins/memory_manager.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <utility>

#include "orch/support/ascii_lower.hpp"
#include "orch/support/untrusted_text.hpp"

namespace orch::plugins {

const char* to_string(memory_manager m) noexcept {
  return m == memory_manager::pager ? "pager" : "ledger";
}

manager_choice resolve_host_manager(const host_manager_inputs& in) {
  if (in.init_error) {
    return {memory_manager::ledger, "pager init failed: " + *in.init_error};
  }
  if (in.flags.enable_dynamic_vram) {
    return {memory_manager::pager, "forced by --enable-dynamic-vram"};
  }
  for (const auto& flag : comfyui_flag_table) {
    if (flag.selects_ledger && in.flags.*flag.field) {
      return {memory_manager::ledger, std::string("disabled by ") + flag.argument};
    }
  }
  if (!in.device_supports_pager) {
    return {memory_manager::ledger, "device " + in.device + " has no pager"};
  }
  if (in.below_floor) return {memory_manager::ledger, *in.below_floor};
  return {memory_manager::pager, "default"};
}

std::string manager_log_line(const manager_choice& choice) {
  return std::string("memory manager: ") + to_string(choice.manager) + " (" + choice.reason + ")";
}

pager_signal read_pager_signal(
    const std::function<std::optional<std::string>(const char*)>& getenv) {
  for (const char* name : {worker_pager_variable, worker_pager_alias}) {
    auto value = getenv(name);
    if (value && !value->empty()) return {std::move(value), name};
  }
  return {std::nullopt, worker_pager_variable};
}

flag_reading read_flag(std::string_view value) {
  std::string flag(value);
  flag.erase(flag.begin(), std::find_if(flag.begin(), flag.end(),
                                        [](unsigned char c) { return !std::isspace(c); }));
  flag.erase(
      std::find_if(flag.rbegin(), flag.rend(), [](unsigned char c) { return !std::isspace(c); })
          .base(),
      flag.end());
  flag = ascii_lower(flag);
  if (flag.empty()) return flag_reading::blank;
  if (flag == "0" || flag == "false" || flag == "no" || flag == "off") return flag_reading::falsy;
  if (flag == "1" || flag == "true" || flag == "yes" || flag == "on") return flag_reading::set;
  return flag_reading::unrecognised;
}

std::optional<std::string> unrecognised_flag_warning(std::string_view variable,
                                                     std::string_view value,
                                                     std::string_view read_as) {
  if (read_flag(value) != flag_reading::unrecognised) return std::nullopt;
  return std::string(variable) + " = \"" + printable(value) +
         "\" is neither true nor false; read as " + std::string(read_as) + " (use 1 or 0)";
}

manager_choice resolve_worker_manager(const worker_manager_inputs& in) {
  const auto flag = in.signal.value ? read_flag(*in.signal.value) : flag_reading::blank;
  if (flag == flag_reading::blank) return {memory_manager::ledger, "no parent signal"};
  if (flag == flag_reading::falsy) {
    return {memory_manager::ledger, "disabled by " + in.signal.variable};
  }
  const std::string enabled_by =
      flag == flag_reading::unrecognised
          ? "enabled by " + *unrecognised_flag_warning(in.signal.variable, *in.signal.value, "true")
          : "enabled by " + in.signal.variable;
  if (!in.gpu_device) return {memory_manager::ledger, "no GPU device in this process"};
  if (in.init_error) return {memory_manager::ledger, "pager init failed: " + *in.init_error};
  return {memory_manager::pager, enabled_by};
}

const char* worker_pager_value(memory_manager host) noexcept {
  return host == memory_manager::pager ? "1" : "0";
}

}  // namespace orch::plugins
