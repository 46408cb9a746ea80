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

namespace orch::orchestrator {

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
};

class node_catalogue {
 public:
  // Adds a class; a class_type already provided by another env is kept with its first provider
  // and the clash is returned as a message, so the caller can report it.
  std::optional<std::string> add(node_class cls);
  const node_class* find(const std::string& class_type) const;
  std::size_t size() const { return classes_.size(); }
  const std::map<std::string, node_class>& classes() const { return classes_; }

 private:
  std::map<std::string, node_class> classes_;
};

}  // namespace orch::orchestrator
