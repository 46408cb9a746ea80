// live_text: the status and diverge documents (process_status.hpp, divergence_check.hpp) as the
// terminal text of `comfy-orch status` and `comfy-orch diverge` (docs/cli.md).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace orch::live {

// 1536 -> "1.5K", 3 GiB -> "3.0G"; a non-number -> "-".
std::string human_bytes(const nlohmann::json& bytes);

// One row per process, then each process's plugins, dropped settings and reasons.
std::string format_status(const nlohmann::json& status);
// Every difference with both values, its explanation and its fix; or "no divergence".
std::string format_divergences(const nlohmann::json& divergences);

}  // namespace orch::live
