#include "orch/plugins/status_error.hpp"

#include <array>
#include <string_view>
#include <utility>

#include "orch/plugins/errc.hpp"

namespace orch::plugins {

namespace {

constexpr std::array<std::pair<orch_status, const char*>, 9> status_codes{{
    {ORCH_OOM_RETRYABLE, plugin_errc::out_of_memory},
    {ORCH_DEVICE_ERROR, plugin_errc::device_error},
    {ORCH_INVALID, plugin_errc::invalid_argument},
    {ORCH_UNSUPPORTED, plugin_errc::unsupported},
    {ORCH_NOT_INITIALISED, plugin_errc::not_initialised},
    {ORCH_ALREADY_INITIALISED, plugin_errc::already_initialised},
    {ORCH_BUSY, plugin_errc::busy},
    {ORCH_NO_SLOT, plugin_errc::no_slot},
    {ORCH_HOST_OOM, plugin_errc::host_out_of_memory},
}};

}  // namespace

error status_error(orch_status status, const std::string& what) {
  const char* code = plugin_errc::unknown_status;
  for (const auto& [st, name] : status_codes) {
    if (st == status) code = name;
  }
  std::string message = what + " answered " + orch_status_name(status);
  if (code == plugin_errc::unknown_status) message += " (" + std::to_string(status) + ")";
  return error{code, std::move(message)};
}

orch_status error_status(const error& err) noexcept {
  for (const auto& [st, name] : status_codes) {
    if (err.code == std::string_view(name)) return st;
  }
  return ORCH_DEVICE_ERROR;
}

}  // namespace orch::plugins
