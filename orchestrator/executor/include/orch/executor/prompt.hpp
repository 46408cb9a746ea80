// A ComfyUI API-format prompt (docs/runtime.md): {id: {class_type, inputs: {name: literal |
// [src_id, slot]}, _meta: {title}}}. Parsing checks only the shape; what the nodes accept is
// checked by prompt_validation against the node catalogue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/support/result.hpp"

namespace orch::executor {

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
  // False for a node the document gives no class_type (ComfyUI refuses the prompt with
  // missing_node_type, class_type null: validation does).
  bool has_class_type = true;
  std::string title;  // _meta.title, or empty
  std::map<std::string, input_value> inputs;
};

struct prompt {
  std::map<std::string, prompt_node> nodes;
  // The node ids in the order the document lists them (ComfyUI iterates the prompt in that
  // order: the first missing class is the first in it).
  std::vector<std::string> order;
  // A /prompt body's extra_data.extra_pnginfo (the UI workflow a client embeds in saved images):
  // ComfyUI's EXTRA_PNGINFO hidden value. Null when the document is the prompt alone.
  nlohmann::json extra_pnginfo;
  // A /prompt body's partial_execution_targets (ComfyUI's partial_execution_list): only the
  // output nodes it names run. nullopt: every output node (absent or null in the body).
  std::optional<std::set<std::string>> execution_targets;
  // The client that queued it (a /prompt body's client_id, ComfyUI's extra_data["client_id"]):
  // PromptServer.instance.client_id in a worker while its nodes run. Empty: none.
  std::string client_id;
};

// The deepest nesting of arrays and objects a prompt document may have. Real prompts nest a few
// levels (a /prompt body with a UI workflow in extra_data about ten); the limit keeps the
// recursive copy and compare of a literal value far from the stack's end.
inline constexpr std::size_t max_prompt_depth = 256;
// The arrays and objects a document may hold. Parsed, each takes some 70 bytes, so a body of
// "[[[...]]]" takes 70 times its size (8 MiB had taken 530 MiB and 1.8 s); the densest prompt of
// the corpus holds 17,000 per MB, some 140,000 in an 8 MiB body.
inline constexpr std::size_t max_json_containers = std::size_t{1} << 20;
// The largest prompt file read: ComfyUI's default --max-upload-size (its server's request cap).
inline constexpr std::size_t max_prompt_file_bytes = std::size_t{100} << 20;

// Parses the prompt object itself, or a /prompt request body ({"prompt": {...}, ...}).
// Errors, all with code "invalid_prompt" (ComfyUI's type for a prompt it cannot execute), name
// the node id and what is wrong: JSON that does not parse (with the byte offset), a number out
// of range, nesting deeper than max_prompt_depth, a document that is not an object, a node that
// is not an object. Never throws but bad_alloc.
result<prompt> parse_prompt(const std::string& text);
// The first half of parse_prompt, for any request body: JSON nested at most max_prompt_depth,
// parsed without a throw. Errors: "invalid_prompt", as parse_prompt's. `node_order`, when given,
// gets the prompt's node ids in document order (the keys of "prompt" in a /prompt body, else the
// top-level keys), which the parsed object (sorted by key) no longer has.
result<nlohmann::json> parse_bounded_json(const std::string& text,
                                          std::vector<std::string>* node_order = nullptr);
// The second half: the prompt of a parsed document (the prompt itself or a /prompt body), its
// order from `node_order` (parse_bounded_json's; empty: by id).
result<prompt> prompt_from_document(const nlohmann::json& body,
                                    const std::vector<std::string>& node_order = {});
// As parse_prompt, for a file: a path that is not a regular file (a FIFO, /dev/zero) or is larger
// than max_prompt_file_bytes is refused before it is read, also as invalid_prompt.
result<prompt> parse_prompt_file(const std::filesystem::path& file);

// True for a JSON value ComfyUI treats as a link: a two-element array.
bool looks_like_link(const nlohmann::json& value);

// How many arrays and objects deep `value` goes (a scalar: 0). Iterative: it is the check that
// keeps deep values out of call bodies, so it must not recurse on them itself.
std::size_t nesting_depth(const nlohmann::json& value);

// The prompt as ComfyUI's API document ({id: {class_type, inputs, _meta}}): the PROMPT hidden
// value a node may ask for.
nlohmann::json prompt_document(const prompt& p);

}  // namespace orch::executor
