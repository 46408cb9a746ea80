// A ComfyUI API-format prompt (DESIGN.md §4.10): {id: {class_type, inputs: {name: literal |
// [src_id, slot]}, _meta: {title}}}. Parsing checks only the shape; what the nodes accept is
// checked by prompt_validation against the node catalogue.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/support/result.hpp"

namespace orch::orchestrator {

// An input wired to another node's output.
struct node_link {
  std::string node_id;
  std::int64_t slot = 0;
};

// A literal value, or a link. A JSON array that is not a valid [id, slot] pair is kept as a
// literal and reported by validation as bad_linked_input, as ComfyUI does.
using input_value = std::variant<nlohmann::json, node_link>;

struct prompt_node {
  std::string id;
  std::string class_type;
  std::string title;  // _meta.title, or empty
  std::map<std::string, input_value> inputs;
};

struct prompt {
  std::map<std::string, prompt_node> nodes;
};

// Parses the prompt object itself, or a /prompt request body ({"prompt": {...}, ...}).
// Errors (code "invalid_prompt") name the node id and what is wrong; JSON syntax errors give the
// byte offset.
result<prompt> parse_prompt(const std::string& text);
result<prompt> parse_prompt_file(const std::filesystem::path& file);

// True for a JSON value ComfyUI treats as a link: a two-element array.
bool looks_like_link(const nlohmann::json& value);

}  // namespace orch::orchestrator
