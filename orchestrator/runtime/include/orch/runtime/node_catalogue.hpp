// The node classes the packs of a deployment provide, as the host knows them: what each worker
// reported at its handshake (docs/nodes.md). The host never loads node code itself; validation
// and routing work from this catalogue.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace orch::runtime {

// ComfyUI's widget types (INT, FLOAT, STRING, BOOLEAN, COMBO) are checked as literals; any other
// type name (IMAGE, MODEL, ...) can only arrive through a link. "*" accepts any linked type.
struct node_input {
  std::string name;
  std::string type;
  bool required = true;
  std::optional<nlohmann::json> default_value;
  std::optional<double> min;
  std::optional<double> max;
  std::vector<std::string> options;  // COMBO choices
};

// ComfyUI's VALIDATE_INPUTS of a class, run in its worker before the prompt
// (prompt_validation.hpp). The schema may say which inputs the method takes (a Python worker
// reads its signature): it is then sent only those, and ComfyUI's own range and combo checks are
// skipped for them, and its link type checks when it takes input_types. Without that declaration
// (a native pack's choice) it is sent every literal input and the host's checks all stand.
struct input_validation {
  bool present = false;
  bool declared = false;         // the schema's "validate_inputs" says what it takes
  std::set<std::string> inputs;  // the inputs it takes by name
  bool all_inputs = false;       // it takes **kwargs
  bool input_types = false;      // it takes input_types
  // Whether the method is sent literal input `name`.
  bool sent(const std::string& name) const {
    return present && (!declared || all_inputs || inputs.count(name) > 0);
  }
  // Whether the method checks input `name` in place of the host's range and combo checks.
  bool replaces_checks(const std::string& name) const {
    return present && declared && (all_inputs || inputs.count(name) > 0);
  }
};

struct node_class {
  std::string class_type;
  std::string display_name;
  std::string category;
  std::vector<node_input> inputs;
  std::vector<std::string> outputs;  // output types, by slot
  bool output_node = false;
  bool not_idempotent = false;
  std::string env;  // the env (worker) that runs it
  // ComfyUI's hidden inputs the class declares (PROMPT, UNIQUE_ID, EXTRA_PNGINFO, DYNPROMPT):
  // the host sends the values of PROMPT and EXTRA_PNGINFO with each call (docs/python.md).
  std::set<std::string> hidden;
  // ComfyUI's list flags (list_mapping.hpp): INPUT_IS_LIST, and OUTPUT_IS_LIST by slot.
  bool input_is_list = false;
  std::vector<bool> output_is_list;
  input_validation validate_inputs;
  bool is_changed = false;  // ComfyUI's IS_CHANGED: the worker gives a change key (executor.hpp)
  // ComfyUI's own /object_info entry for the class, as a Python worker computed it (server.py's
  // node_info, or a V3 class's GET_NODE_INFO_V1): every field the pack declared, served as is.
  // Null for a native pack, whose entry is built from the fields above.
  nlohmann::json node_info;
  // Null for a node class. An object ({"method", "path", "module", "handler"}) for an HTTP
  // route a pack declared in a ROUTES list (comfy-env's convention, docs/comfyui.md): called
  // like a node, with its JSON body as the input "body" and its JSON answer as the one output,
  // but never a node of a prompt or of /object_info.
  nlohmann::json route{};
  // A class of the worker's own that only comfy-orch calls, never a node of a prompt or of
  // /object_info: a Python worker's "orch.export:<env>", which hands one of its objects to
  // another env (docs/comfyui.md, "Objects across envs").
  bool internal = false;
};

// The input as its class's INPUT_TYPES gives it: [type or combo choices] or [type, {default,
// min, max}]; object_info's entry, and the input_config of a validation error.
nlohmann::json input_config(const node_input& input);

// The class in ComfyUI's GET /object_info schema (server.py node_info): the worker's node_info
// where it gave one, else built from the fields (input, required and optional, each [type or
// combo choices, options]; input_order, output, output_is_list, output_name, name, display_name,
// description, python_module, category, output_node); plus "orch_env", the worker that runs it.
nlohmann::json object_info(const node_class& cls);

class node_catalogue {
 public:
  // Adds a class, an internal class, or a route where cls.route is an object; a class_type (or
  // a route's method
  // and path) already provided by another env is kept with its first provider and the clash is
  // returned as a message, so the caller can report it.
  std::optional<std::string> add(node_class cls);
  // The node classes: what prompts may name and /object_info lists.
  const node_class* find(const std::string& class_type) const;
  std::size_t size() const { return classes_.size(); }
  const std::map<std::string, node_class>& classes() const { return classes_; }
  // The routes packs declared, by class_type: what only their HTTP proxies call.
  const node_class* find_route(const std::string& class_type) const;
  const std::map<std::string, node_class>& routes() const { return routes_; }
  // The workers' internal classes, by class_type.
  const node_class* find_internal(const std::string& class_type) const;

 private:
  std::map<std::string, node_class> classes_;
  std::map<std::string, node_class> routes_;
  std::map<std::string, node_class> internal_;
  std::map<std::string, std::string> route_paths_;  // "METHOD path" -> the env declaring it
};

}  // namespace orch::runtime
