#include "orch/orchestrator/prompt.hpp"

#include <fstream>
#include <sstream>

namespace orch::orchestrator {
namespace {

error invalid(std::string message) {
  return error{"invalid_prompt", std::move(message)};
}

// ComfyUI writes links as [id, slot] with a string id; some exporters write the id as a number.
std::optional<node_link> as_link(const nlohmann::json& value) {
  if (!looks_like_link(value)) return std::nullopt;
  const auto& id = value[0];
  const auto& slot = value[1];
  if (!slot.is_number_integer() || slot.get<std::int64_t>() < 0) return std::nullopt;
  if (id.is_string()) return node_link{id.get<std::string>(), slot.get<std::int64_t>()};
  if (id.is_number_integer()) {
    return node_link{std::to_string(id.get<std::int64_t>()), slot.get<std::int64_t>()};
  }
  return std::nullopt;
}

}  // namespace

bool looks_like_link(const nlohmann::json& value) {
  return value.is_array() && value.size() == 2;
}

result<prompt> parse_prompt(const std::string& text) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    return invalid("not valid JSON at byte " + std::to_string(e.byte) + ": " + e.what());
  }
  if (doc.is_object() && doc.contains("prompt") && doc["prompt"].is_object()) doc = doc["prompt"];
  if (!doc.is_object()) return invalid("a prompt must be a JSON object of node id -> node");
  prompt out;
  for (const auto& [id, node] : doc.items()) {
    if (!node.is_object()) return invalid("node '" + id + "' is not an object");
    if (!node.contains("class_type") || !node["class_type"].is_string()) {
      return invalid("node '" + id + "' has no class_type string");
    }
    prompt_node pn;
    pn.id = id;
    pn.class_type = node["class_type"].get<std::string>();
    if (node.contains("_meta") && node["_meta"].is_object() && node["_meta"].contains("title") &&
        node["_meta"]["title"].is_string()) {
      pn.title = node["_meta"]["title"].get<std::string>();
    }
    if (node.contains("inputs")) {
      if (!node["inputs"].is_object()) return invalid("node '" + id + "': inputs is not an object");
      for (const auto& [name, value] : node["inputs"].items()) {
        if (auto link = as_link(value)) {
          pn.inputs.emplace(name, *link);
        } else {
          pn.inputs.emplace(name, value);
        }
      }
    }
    out.nodes.emplace(id, std::move(pn));
  }
  return out;
}

result<prompt> parse_prompt_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return error{"not_found", file.string() + ": cannot be read"};
  std::ostringstream text;
  text << in.rdbuf();
  auto parsed = parse_prompt(text.str());
  if (!parsed) return error{parsed.err().code, file.string() + ": " + parsed.err().message};
  return parsed;
}

}  // namespace orch::orchestrator
