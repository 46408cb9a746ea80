#include "orch/executor/prompt.hpp"

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "orch/executor/errc.hpp"
#include "orch/support/regular_file.hpp"
#include "orch/support/untrusted_text.hpp"

namespace orch::executor {
namespace {

// The message goes into JSON (--json's validation_error line), and it can quote the input: a
// parse error's "last read" token holds the raw bytes, a file name any. Made valid UTF-8 here.
error invalid(std::string_view message) {
  return error{executor_errc::invalid_prompt, valid_utf8(message)};
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

// The stock DOM builder with a nesting limit and no exceptions. nlohmann's parser is iterative,
// but copying and comparing a value recurse: a literal nested 100,000 arrays deep overflowed the
// stack in the first copy. Stopping at max_prompt_depth means no deeper tree is ever built, so
// none can be copied or destroyed either; stopping at max_json_containers bounds its memory.
// Every parse error (syntax, a number out of range such
// as 1e999, which nlohmann reports as out_of_range) ends here as a message, never a throw.
class bounded_prompt_sax : public nlohmann::detail::json_sax_dom_parser<nlohmann::json> {
 public:
  using base = nlohmann::detail::json_sax_dom_parser<nlohmann::json>;
  explicit bounded_prompt_sax(nlohmann::json& out) : base(out, /*allow_exceptions=*/false) {}
  bool start_object(std::size_t n) {
    if (!deeper()) return false;
    if (depth_ == 2) {
      in_prompt_ = last_top_key_ == "prompt";
      if (in_prompt_) prompt_keys_.clear();  // a second "prompt" wins, as its value does
    }
    return base::start_object(n);
  }
  bool end_object() {
    if (depth_ == 2) in_prompt_ = false;
    return --depth_, base::end_object();
  }
  bool key(std::string& k) {
    if (depth_ == 1) {
      top_keys_.push_back(k);
      last_top_key_ = k;
    } else if (depth_ == 2 && in_prompt_) {
      prompt_keys_.push_back(k);
    }
    return base::key(k);
  }
  // The node ids in document order: a /prompt body's "prompt" keys, else the top-level keys.
  std::vector<std::string> node_order(bool wrapped) {
    return std::move(wrapped ? prompt_keys_ : top_keys_);
  }
  bool start_array(std::size_t n) { return deeper() && base::start_array(n); }
  bool end_array() { return --depth_, base::end_array(); }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string&, const Exception& e) {
    failure_ = "not valid JSON at byte " + std::to_string(position) + ": " + e.what();
    return false;
  }
  const std::string& failure() const noexcept { return failure_; }

 private:
  bool deeper() {
    if (++containers_ > max_json_containers) {
      failure_ = "the document holds more than " + std::to_string(max_json_containers) +
                 " arrays and objects";
      return false;
    }
    if (++depth_ <= max_prompt_depth) return true;
    failure_ = "the prompt nests deeper than " + std::to_string(max_prompt_depth) +
               " levels of arrays and objects";
    return false;
  }
  std::size_t depth_ = 0;
  std::size_t containers_ = 0;
  std::string failure_;
  std::vector<std::string> top_keys_;
  std::vector<std::string> prompt_keys_;
  std::string last_top_key_;
  bool in_prompt_ = false;  // inside the object under the top-level key "prompt"
};

// A /prompt request body holds the prompt under "prompt".
bool is_wrapped(const nlohmann::json& body) {
  return body.is_object() && body.contains("prompt") && body["prompt"].is_object();
}

}  // namespace

bool looks_like_link(const nlohmann::json& value) {
  return value.is_array() && value.size() == 2;
}

result<nlohmann::json> parse_bounded_json(const std::string& text,
                                          std::vector<std::string>* node_order) {
  nlohmann::json body;
  bounded_prompt_sax sax(body);
  bool parsed = false;
  try {
    parsed = nlohmann::json::sax_parse(text, &sax, nlohmann::json::input_format_t::json,
                                       /*strict=*/true);
  } catch (const nlohmann::json::exception& e) {  // a backstop: the handler reports, never throws
    return invalid(std::string("not valid JSON: ") + e.what());
  }
  if (!parsed || sax.is_errored()) {
    return invalid(sax.failure().empty() ? "not valid JSON" : sax.failure());
  }
  if (node_order != nullptr) *node_order = sax.node_order(is_wrapped(body));
  return body;
}

result<prompt> parse_prompt(const std::string& text) {
  std::vector<std::string> order;
  auto body = parse_bounded_json(text, &order);
  if (!body) return body.err();
  return prompt_from_document(*body, order);
}

result<prompt> prompt_from_document(const nlohmann::json& body,
                                    const std::vector<std::string>& node_order) {
  // A reference to the prompt of a /prompt body avoids a deep copy.
  const nlohmann::json& doc = is_wrapped(body) ? body["prompt"] : body;
  if (!doc.is_object()) {
    return invalid(std::string("a prompt must be a JSON object of node id -> node, not ") +
                   doc.type_name());
  }
  prompt out;
  for (const auto& [id, node] : doc.items()) {
    if (!node.is_object()) return invalid("node '" + id + "' is not an object");
    prompt_node pn;
    pn.id = id;
    // Without one, validation refuses the prompt as ComfyUI does (missing_node_type).
    pn.has_class_type = node.contains("class_type") && node["class_type"].is_string();
    if (pn.has_class_type) pn.class_type = node["class_type"].get<std::string>();
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
  // Document order where known; an id the order lacks (none, unless it was not given) by id.
  std::set<std::string> placed;
  for (const auto& id : node_order) {
    if (out.nodes.count(id) && placed.insert(id).second) out.order.push_back(id);
  }
  for (const auto& [id, node] : out.nodes) {
    if (placed.insert(id).second) out.order.push_back(id);
  }
  if (auto it = is_wrapped(body) ? body.find("partial_execution_targets") : body.end();
      it != body.end() && !it->is_null()) {
    if (!it->is_array())
      return invalid("partial_execution_targets must be a list of node ids, not " +
                     std::string(it->type_name()));
    out.execution_targets.emplace();
    for (const auto& target : *it) {
      if (!target.is_string())
        return invalid("partial_execution_targets must be a list of node ids (strings)");
      out.execution_targets->insert(target.get<std::string>());
    }
  }
  if (is_wrapped(body) && body.contains("extra_data") && body["extra_data"].is_object()) {
    const auto& extra = body["extra_data"];
    if (auto it = extra.find("extra_pnginfo"); it != extra.end()) out.extra_pnginfo = *it;
    if (auto it = extra.find("client_id"); it != extra.end() && it->is_string())
      out.client_id = it->get<std::string>();
  }
  // ComfyUI copies the body's own client_id into extra_data, over one already there.
  if (is_wrapped(body))
    if (auto it = body.find("client_id"); it != body.end() && it->is_string())
      out.client_id = it->get<std::string>();
  if (out.client_id.size() > 256) out.client_id.clear();  // no client's id: a sid is 32 hex
  return out;
}

result<prompt> parse_prompt_file(const std::filesystem::path& file) {
  auto text = read_regular_file(file, max_prompt_file_bytes);
  if (!text) return invalid(text.err().message);
  auto parsed = parse_prompt(*text);
  if (!parsed) return invalid(file.string() + ": " + parsed.err().message);
  return parsed;
}

std::size_t nesting_depth(const nlohmann::json& value) {
  std::size_t deepest = 0;
  std::vector<std::pair<const nlohmann::json*, std::size_t>> stack{{&value, 0}};
  while (!stack.empty()) {
    const auto [v, depth] = stack.back();
    stack.pop_back();
    if (!v->is_structured()) continue;
    deepest = std::max(deepest, depth + 1);
    for (const auto& child : *v) stack.emplace_back(&child, depth + 1);
  }
  return deepest;
}

nlohmann::json prompt_document(const prompt& p) {
  nlohmann::json doc = nlohmann::json::object();
  for (const auto& [id, node] : p.nodes) {
    nlohmann::json inputs = nlohmann::json::object();
    for (const auto& [name, value] : node.inputs) {
      if (const auto* link = std::get_if<node_link>(&value)) {
        inputs[name] = nlohmann::json::array({link->node_id, link->slot});
      } else {
        inputs[name] = std::get<nlohmann::json>(value);
      }
    }
    doc[id] = {{"class_type", node.class_type}, {"inputs", std::move(inputs)}};
    if (!node.title.empty()) doc[id]["_meta"] = {{"title", node.title}};
  }
  return doc;
}

}  // namespace orch::executor
