#include "orch/live/live_views.hpp"

#include <cctype>

#include "orch/live/divergence_check.hpp"
#include "orch/live/errc.hpp"
#include "orch/live/metrics_text.hpp"
#include "orch/live/process_status.hpp"

namespace orch::live {
namespace {

using nlohmann::json;

json error_of(const std::string& code, const std::string& message) {
  return {{"error", {{"code", code}, {"message", message}}}};
}

}  // namespace

result<std::chrono::milliseconds> parse_since(const std::string& text) {
  std::size_t digits = 0;
  while (digits < text.size() && digits < 12 &&
         std::isdigit(static_cast<unsigned char>(text[digits])))
    ++digits;
  const std::string unit = text.substr(digits);
  long long scale = 0;
  if (unit.empty() || unit == "s") scale = 1000;
  if (unit == "ms") scale = 1;
  if (unit == "m") scale = 60 * 1000;
  if (unit == "h") scale = 3600 * 1000;
  if (digits == 0 || scale == 0) {
    return error{live_errc::invalid_request,
                 "'" + text + "' is no duration: write a number with ms, s, m or h (10m)"};
  }
  return std::chrono::milliseconds(std::stoll(text.substr(0, digits)) * scale);
}

live_views::live_views(runtime::host_runtime& host, memory_sampler& sampler, json identity)
    : host_(host), sampler_(sampler), identity_(std::move(identity)) {}

json live_views::status() {
  return read_process_status(host_);
}

json live_views::diverge() {
  return find_divergences(read_process_status(host_));
}

std::string live_views::metrics() {
  metrics_inputs in;
  in.status = read_process_status(host_);
  in.divergences = find_divergences(in.status);
  in.call_durations = host_.workers().call_durations();
  in.evictions = sampler_.marker_counts("eviction");
  in.frees = sampler_.marker_counts("free");
  return prometheus_metrics(in);
}

json live_views::answer(const json& request) {
  const auto it = request.find("get");
  const std::string what = it != request.end() && it->is_string() ? it->get<std::string>() : "";
  if (what == "hello") return identity_;
  if (what == "status") return status();
  if (what == "diverge") return diverge();
  if (what == "metrics") return {{"text", metrics()}};
  if (what == "timeline") {
    std::optional<std::chrono::milliseconds> since;
    if (const auto s = request.find("since"); s != request.end() && s->is_string()) {
      auto parsed = parse_since(s->get<std::string>());
      if (!parsed) return error_of(parsed.err().code, parsed.err().message);
      since = *parsed;
    }
    return sampler_.timeline(since);
  }
  return error_of(live_errc::invalid_request,
                  "unknown request: ask {\"get\": one of hello, status, diverge, timeline, "
                  "metrics}");
}

}  // namespace orch::live
