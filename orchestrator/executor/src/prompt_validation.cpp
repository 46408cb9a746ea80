#include "orch/executor/prompt_validation.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "orch/executor/errc.hpp"
#include "orch/ipc/message.hpp"
#include "python_text.hpp"

namespace orch::executor {
namespace {

std::optional<double> as_number(const nlohmann::json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(d)) return d;
  }
  return std::nullopt;
}

// A literal travels in a call body as {inputs: {name: value}}, two levels above the value.
constexpr std::size_t max_literal_depth = ipc::max_body_depth - 2;

// A value_not_in_list error lists the choices up to this many (ComfyUI's rule).
constexpr std::size_t max_listed_choices = 20;

// The nodes of one cycle that a dependency_cycle report names (and marks).
constexpr std::size_t max_cycle_nodes_reported = 100;

// ComfyUI's input_config of an error: [type, options], the options {} where the class gives
// none. A list of more than max_listed_choices choices is not sent back (null), as ComfyUI does
// for value_not_in_list; here for every error, so that a refusal stays small.
nlohmann::json error_input_config(const runtime::node_input& input) {
  if (input.type == "COMBO" && input.options.size() > max_listed_choices) return nullptr;
  nlohmann::json config = runtime::input_config(input);
  if (config.size() == 1) config.push_back(nlohmann::json::object());
  return config;
}

class validator {
 public:
  validator(const prompt& p, const runtime::node_catalogue& c, const custom_validation& custom)
      : prompt_(p), catalogue_(c), custom_(custom) {}

  validation_report run() {
    if (report_missing_classes()) return std::move(report_);
    std::vector<std::string> outputs;
    for (const auto& [id, node] : prompt_.nodes) {
      if (catalogue_.find(node.class_type)->output_node &&
          (!prompt_.execution_targets || prompt_.execution_targets->count(id) > 0))
        outputs.push_back(id);
    }
    if (outputs.empty()) {
      report_.error = validation_error{"prompt_no_outputs", "Prompt has no outputs", "",
                                       nlohmann::json::object()};
      return std::move(report_);
    }
    std::vector<std::string> failed;
    for (const auto& out : outputs) {
      if (validate_node(out)) {
        report_.outputs.push_back(out);
      } else {
        mark_dependents(out);
        failed.push_back(out);
      }
    }
    if (report_.outputs.empty()) {
      // As ComfyUI's: every reason of each failed output, "message: details", one per line.
      std::string details;
      for (const auto& out : failed) {
        const auto it = report_.node_errors.find(out);
        if (it == report_.node_errors.end()) continue;
        for (const auto& e : it->second.errors)
          details += (details.empty() ? "" : "\n") + e.message + ": " + e.details;
      }
      report_.error = validation_error{"prompt_outputs_failed_validation",
                                       "Prompt outputs failed validation", details,
                                       nlohmann::json::object()};
    }
    return std::move(report_);
  }

 private:
  void add(const std::string& id, validation_error e) {
    auto& entry = report_.node_errors[id];
    entry.class_type = prompt_.nodes.at(id).class_type;
    entry.errors.push_back(std::move(e));
  }

  // ComfyUI's first check, in the prompt's order: a node without class_type, or of a class no
  // pack provides, refuses the prompt, naming that node (by its title, as ComfyUI's message
  // does). comfy-orch names every such node in orch_missing_nodes.
  bool report_missing_classes() {
    nlohmann::json missing = nlohmann::json::array();
    // The document's order; by id for a prompt built without one (every node is checked).
    std::vector<std::string> order = prompt_.order;
    if (order.size() != prompt_.nodes.size()) {
      order.clear();
      for (const auto& [id, node] : prompt_.nodes) order.push_back(id);
    }
    for (const auto& id : order) {
      const prompt_node& node = prompt_.nodes.at(id);
      if (node.has_class_type && catalogue_.find(node.class_type) != nullptr) continue;
      const nlohmann::json class_type =
          node.has_class_type ? nlohmann::json(node.class_type) : nlohmann::json();
      const std::string title = node.title.empty() ? node.class_type : node.title;
      missing.push_back({{"node_id", id}, {"class_type", class_type}, {"node_title", title}});
      if (node.has_class_type) report_.missing_classes.insert(node.class_type);
      if (report_.error) continue;
      report_.error = validation_error{
          ipc::node_error_type::missing_node_type,
          node.has_class_type
              ? "Node '" + title + "' not found. The custom node may not be installed."
              : "Cannot execute because a node is missing the class_type property.",
          "Node ID '#" + id + "'",
          {{"node_id", id}, {"class_type", class_type}, {"node_title", title}}};
    }
    if (!report_.error) return false;
    report_.error->extra_info["orch_missing_nodes"] = std::move(missing);
    return true;
  }

  // The node ids `id` links to, in the order of its inputs.
  std::vector<std::string> links_of(const std::string& id) const {
    std::vector<std::string> out;
    for (const auto& [name, value] : prompt_.nodes.at(id).inputs) {
      if (const auto* link = std::get_if<node_link>(&value)) out.push_back(link->node_id);
    }
    return out;
  }

  // Every failing node reachable from `output` lists it as a dependent output. An explicit stack,
  // not recursion: a prompt is a chain of 100,000 nodes if its author says so.
  void mark_dependents(const std::string& output) {
    std::set<std::string> seen{output};
    std::vector<std::string> stack{output};
    while (!stack.empty()) {
      const std::string id = std::move(stack.back());
      stack.pop_back();
      if (!prompt_.nodes.count(id)) continue;
      if (auto it = report_.node_errors.find(id); it != report_.node_errors.end()) {
        it->second.dependent_outputs.push_back(output);
      }
      for (auto& next : links_of(id)) {
        if (seen.insert(next).second) stack.push_back(std::move(next));
      }
    }
  }

  // One node being validated: where it is in its class's inputs, and whether it is valid so far.
  struct frame {
    std::string id;
    std::size_t next_input = 0;
    bool ok = true;
    bool awaiting = false;  // a linked node's verdict is being computed above this frame
  };

  // Whether `output` and everything it depends on is valid; verdicts are memoised across outputs.
  // A depth-first walk on an explicit stack, in the order the recursive one had (inputs in class
  // order, a link's own checks before its source): ComfyUI's validate_inputs recurses, but a
  // 12,000-node chain overflowed the host's stack that way.
  bool validate_node(const std::string& output) {
    if (auto it = verdict_.find(output); it != verdict_.end()) return it->second;
    // The nodes on the walk's path, each with its place in `stack`.
    std::map<std::string, std::size_t> visiting{{output, 0}};
    std::vector<frame> stack;
    stack.push_back({output});
    bool last = true;  // the verdict of the frame popped last
    while (!stack.empty()) {
      frame& f = stack.back();
      if (f.awaiting) {  // back from the linked node
        f.ok = last && f.ok;
        f.awaiting = false;
      }
      const auto& node = prompt_.nodes.at(f.id);
      const auto& cls = *catalogue_.find(node.class_type);
      std::optional<std::string> descend;
      while (!descend && f.next_input < cls.inputs.size()) {
        const auto& input = cls.inputs[f.next_input++];
        auto it = node.inputs.find(input.name);
        if (it == node.inputs.end()) {
          if (input.required) {
            add(f.id, {"required_input_missing",
                       "Required input is missing",
                       input.name,
                       {{"input_name", input.name}}});
            f.ok = false;
          }
          continue;
        }
        const auto* link = std::get_if<node_link>(&it->second);
        if (link == nullptr) {
          f.ok = validate_literal(f.id, input, std::get<nlohmann::json>(it->second),
                                  custom_ && cls.validate_inputs.replaces_checks(input.name),
                                  cls.input_is_list) &&
                 f.ok;
          continue;
        }
        if (!check_link(f.id, input, *link,
                        custom_ && cls.validate_inputs.present && cls.validate_inputs.declared &&
                            cls.validate_inputs.input_types)) {
          f.ok = false;
          if (!prompt_.nodes.count(link->node_id)) continue;  // nothing to descend into
        }
        if (auto v = verdict_.find(link->node_id); v != verdict_.end()) {
          f.ok = v->second && f.ok;
        } else if (auto on_path = visiting.find(link->node_id); on_path != visiting.end()) {
          report_cycle(stack, on_path->second);
          f.ok = false;
        } else {
          descend = link->node_id;
          f.awaiting = true;
        }
      }
      if (descend) {
        visiting.emplace(*descend, stack.size());
        stack.push_back({std::move(*descend)});  // `f` is not used past this point
        continue;
      }
      if (custom_ && cls.validate_inputs.present) f.ok = run_custom(f.id, cls) && f.ok;
      last = f.ok;
      verdict_[f.id] = f.ok;
      visiting.erase(f.id);
      stack.pop_back();
    }
    return last;
  }

  // A link from the top of `path` back to path[from]: the path from there is a cycle (each such
  // back link is met once, so each cycle is reported once). Every node of it gets the error, so
  // a client marks them all; the first one's error names the cycle: its path as `details` and
  // its nodes as `cycle_nodes`. Bounded: a 100,000-node cycle marks and names its first
  // max_cycle_nodes_reported nodes (cycle_length says how many there are), each of the others'
  // errors only points at the first.
  void report_cycle(const std::vector<frame>& path, std::size_t from) {
    const std::size_t length = path.size() - from;
    const std::size_t shown = std::min(length, max_cycle_nodes_reported);
    nlohmann::json nodes = nlohmann::json::array();
    std::string details;
    for (std::size_t i = from; i < from + shown; ++i) {
      nodes.push_back(path[i].id);
      details += path[i].id + " -> ";
    }
    details += shown == length ? path[from].id
                               : "... (" + std::to_string(length) + " nodes in the cycle)";
    const std::string& first = path[from].id;
    add(first, {"dependency_cycle",
                "Dependency cycle detected",
                details,
                {{"node_id", first}, {"cycle_nodes", std::move(nodes)}, {"cycle_length", length}}});
    for (std::size_t i = from + 1; i < from + shown; ++i)
      add(path[i].id,
          {"dependency_cycle",
           "Dependency cycle detected",
           "in the cycle through node " + first,
           {{"node_id", path[i].id}, {"cycle_start", first}, {"cycle_length", length}}});
  }

  // The class's VALIDATE_INPUTS, with the literal inputs it takes and its links' types.
  bool run_custom(const std::string& id, const runtime::node_class& cls) {
    nlohmann::json literals = nlohmann::json::object();
    nlohmann::json input_types = nlohmann::json::object();
    for (const auto& [name, value] : prompt_.nodes.at(id).inputs) {
      if (const auto* link = std::get_if<node_link>(&value)) {
        const auto src = prompt_.nodes.find(link->node_id);
        const runtime::node_class* src_cls =
            src == prompt_.nodes.end() ? nullptr : catalogue_.find(src->second.class_type);
        const auto slot = static_cast<std::size_t>(link->slot);
        if (src_cls != nullptr && link->slot >= 0 && slot < src_cls->outputs.size())
          input_types[name] = src_cls->outputs[slot];
      } else if (cls.validate_inputs.sent(name)) {
        literals[name] = std::get<nlohmann::json>(value);
      }
    }
    auto refused = custom_(prompt_, id, cls, literals, input_types);
    if (!refused) return true;
    add(id, std::move(*refused));
    return false;
  }

  // The link's own checks: its source exists, has the slot, and gives a compatible type (unless
  // the class's VALIDATE_INPUTS takes input_types and checks them itself).
  bool check_link(const std::string& id, const runtime::node_input& input, const node_link& link,
                  bool custom_types) {
    auto src = prompt_.nodes.find(link.node_id);
    if (src == prompt_.nodes.end()) {
      add(id, {"bad_linked_input",
               "Bad linked input, linked node does not exist",
               input.name + ": node '" + link.node_id + "' is not in the prompt",
               {{"input_name", input.name}, {"input_config", error_input_config(input)}}});
      return false;
    }
    const auto& src_cls = *catalogue_.find(src->second.class_type);
    if (link.slot >= static_cast<std::int64_t>(src_cls.outputs.size())) {
      add(id, {"bad_linked_input",
               "Bad linked input, output slot out of range",
               input.name + ": node '" + link.node_id + "' (" + src_cls.class_type + ") has " +
                   std::to_string(src_cls.outputs.size()) + " output(s), slot " +
                   std::to_string(link.slot) + " requested",
               {{"input_name", input.name}, {"input_config", error_input_config(input)}}});
      return false;
    }
    const auto& received = src_cls.outputs[static_cast<std::size_t>(link.slot)];
    const bool compatible = custom_types || input.type == "*" || received == "*" ||
                            received == input.type ||
                            (input.type == "COMBO" && received == "STRING");
    if (!compatible) {
      add(id,
          {"return_type_mismatch",
           "Return type mismatch between linked nodes",
           input.name + ", received_type(" + received + ") mismatch input_type(" + input.type + ")",
           {{"input_name", input.name},
            {"input_config", error_input_config(input)},
            {"received_type", received},
            {"linked_node", {link.node_id, link.slot}}}});
      return false;
    }
    return true;
  }

  // `custom`: the class's VALIDATE_INPUTS checks this input, so only its type is checked here.
  // `in_list`: the class has INPUT_IS_LIST, so the call carries the value inside a list.
  bool validate_literal(const std::string& id, const runtime::node_input& input,
                        const nlohmann::json& value, bool custom, bool in_list) {
    const std::size_t deepest = max_literal_depth - (in_list ? 1 : 0);
    if (nesting_depth(value) > deepest) {
      // The call carries it as {inputs: {name: value}}; deeper than the wire's limit, the worker
      // would refuse the whole call body and drop its channel: the prompt would kill a worker.
      add(id,
          {"invalid_input_type",
           "Value nests deeper than " + std::to_string(deepest) + " levels of arrays and objects",
           input.name,
           {{"input_name", input.name}, {"input_config", error_input_config(input)}}});
      return false;
    }
    if (looks_like_link(value) || (value.is_array() && input.type != "COMBO")) {
      add(id, {"bad_linked_input",
               "Bad linked input, must be a length-2 list of [node_id, slot_index]",
               input.name,
               {{"input_name", input.name},
                {"input_config", error_input_config(input)},
                {"received_value", value}}});
      return false;
    }
    const auto extra = [&] {  // only for an error: a valid prompt pays nothing for it
      return nlohmann::json{{"input_name", input.name},
                            {"input_config", error_input_config(input)},
                            {"received_value", value}};
    };
    // ComfyUI's messages, as its f-strings print them (python_text.hpp).
    const auto unconvertible = [&](const std::string& why) {
      auto info = extra();
      info["exception_message"] = why;
      add(id, {"invalid_input_type",
               "Failed to convert an input value to a " + input.type + " value",
               input.name + ", " + python_str(value) + ", " + why, std::move(info)});
      return false;
    };
    if (input.type == "INT" || input.type == "FLOAT") {
      const bool integer = input.type == "INT";
      if (auto why = conversion_failure(value, integer)) return unconvertible(*why);
      const double number = as_number(value).value_or(0.0);
      if (custom) return true;
      // The bound as the class declares it (input_config: an INT's as an integer).
      const auto bound = [&](const char* key) {
        return python_str(runtime::input_config(input)[1][key]);
      };
      if (input.min && number < *input.min) {
        add(id, {"value_smaller_than_min",
                 "Value " + python_number(number, integer) + " smaller than min of " +
                     bound("min"),
                 input.name, extra()});
        return false;
      }
      if (input.max && number > *input.max) {
        add(id, {"value_bigger_than_max",
                 "Value " + python_number(number, integer) + " bigger than max of " +
                     bound("max"),
                 input.name, extra()});
        return false;
      }
    } else if (input.type == "BOOLEAN" && !value.is_boolean()) {
      // ComfyUI's bool() takes anything; a node here is sent what the prompt holds, so only
      // true and false are taken.
      return unconvertible(python_str(value) + " is not True or False");
    } else if (input.type == "COMBO" && !custom) {
      const auto text = python_str(value);
      if (std::find(input.options.begin(), input.options.end(), text) == input.options.end()) {
        // As ComfyUI: a long list (a folder of model files) is not sent back, only its length.
        const bool long_list = input.options.size() > max_listed_choices;
        const std::string choices = long_list ? "(list of length " +
                                                    std::to_string(input.options.size()) + ")"
                                              : python_list_repr(input.options);
        add(id, {"value_not_in_list",
                 "Value not in list",
                 input.name + ": '" + text + "' not in " + choices,
                 {{"input_name", input.name},
                  {"input_config", error_input_config(input)},
                  {"received_value", value}}});
        return false;
      }
    }
    return true;
  }

  const prompt& prompt_;
  const runtime::node_catalogue& catalogue_;
  const custom_validation& custom_;
  validation_report report_;
  std::map<std::string, bool> verdict_;
};

}  // namespace

validation_report validate_prompt(const prompt& p, const runtime::node_catalogue& catalogue,
                                  const custom_validation& custom) {
  return validator(p, catalogue, custom).run();
}

validation_report invalid_prompt_report(const error& e) {
  validation_report r;
  r.error = validation_error{executor_errc::invalid_prompt, e.message, "", nlohmann::json::object()};
  return r;
}

}  // namespace orch::executor
