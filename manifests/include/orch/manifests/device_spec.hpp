// The device a host or worker runs on: "cpu", "sim", "cuda:N" or "hip:N" ("cuda" means cuda:0).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace orch::manifests {

enum class device_kind { cpu, sim, cuda, hip };

struct device_spec {
  device_kind kind = device_kind::cpu;
  int index = 0;

  std::string to_string() const;  // "cpu", "sim", "cuda:0", "hip:1"
  bool is_gpu() const { return kind != device_kind::cpu; }
  friend bool operator==(const device_spec&, const device_spec&) = default;
};

std::optional<device_spec> parse_device_spec(std::string_view text);

const char* to_string(device_kind kind) noexcept;

}  // namespace orch::manifests
