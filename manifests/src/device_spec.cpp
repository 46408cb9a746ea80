#include "orch/manifests/device_spec.hpp"

#include <charconv>

namespace orch::manifests {

const char* to_string(device_kind kind) noexcept {
  switch (kind) {
    case device_kind::cpu:
      return "cpu";
    case device_kind::sim:
      return "sim";
    case device_kind::cuda:
      return "cuda";
    case device_kind::hip:
      return "hip";
  }
  return "cpu";
}

std::string device_spec::to_string() const {
  std::string out = manifests::to_string(kind);
  if (kind == device_kind::cuda || kind == device_kind::hip) out += ":" + std::to_string(index);
  return out;
}

std::optional<device_spec> parse_device_spec(std::string_view text) {
  if (text == "cpu") return device_spec{device_kind::cpu, 0};
  if (text == "sim") return device_spec{device_kind::sim, 0};
  for (auto kind : {device_kind::cuda, device_kind::hip}) {
    const std::string_view name = to_string(kind);
    if (text.substr(0, name.size()) != name) continue;
    const auto rest = text.substr(name.size());
    if (rest.empty()) return device_spec{kind, 0};
    if (rest.front() != ':' || rest.size() < 2 || rest.size() > 4) return std::nullopt;
    int index = -1;
    const auto [ptr, ec] = std::from_chars(rest.data() + 1, rest.data() + rest.size(), index);
    if (ec != std::errc{} || ptr != rest.data() + rest.size() || index < 0) return std::nullopt;
    return device_spec{kind, index};
  }
  return std::nullopt;
}

}  // namespace orch::manifests
