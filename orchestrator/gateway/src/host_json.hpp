// A host's JSON, read as untrusted (gateway_prompts.cpp, gateway_in_doubt.cpp).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "orch/executor/prompt.hpp"
#include "orch/gateway/host_link.hpp"

namespace orch::gateway {

// A host's text, parsed as a client's is (nested at most executor::max_prompt_depth, never a
// throw): a host is another machine, and JSON nested deep enough would overflow the stack of
// whatever copies or frees it.
inline std::optional<nlohmann::json> parsed_from_host(const std::string& text) {
  auto parsed = executor::parse_bounded_json(text);
  if (!parsed) return std::nullopt;
  return std::move(*parsed);
}

// A host's 200 answer as JSON; nullopt for any other answer or one that is no JSON.
inline std::optional<nlohmann::json> json_of(const result<host_answer>& a) {
  if (!a || a->status != 200) return std::nullopt;
  return parsed_from_host(a->body);
}

}  // namespace orch::gateway
