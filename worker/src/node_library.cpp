#include "node_library.hpp"

#include <dlfcn.h>

#include <set>

namespace orch::worker {
namespace {

nlohmann::json literal(const orch_value& v) {
  switch (v.kind) {
    case ORCH_VALUE_INT:
      return v.i;
    case ORCH_VALUE_FLOAT:
      return v.f;
    case ORCH_VALUE_BOOL:
      return v.i != 0;
    case ORCH_VALUE_STRING:
      return v.s == nullptr ? std::string() : std::string(v.s);
    default:
      return nullptr;
  }
}

}  // namespace

result<std::unique_ptr<node_library>> node_library::open(const std::filesystem::path& path) {
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    return error{"load_failed", "cannot load node library " + path.string() + ": " +
                                    (why ? why : "unknown error") +
                                    "; build the pack or fix [worker] library in its comfy-env.toml"};
  }
  auto query = reinterpret_cast<orch_nodes_query_fn>(::dlsym(handle, ORCH_NODES_ENTRY_SYMBOL));
  if (query == nullptr) {
    ::dlclose(handle);
    return error{"not_a_pack", path.string() + " exports no " ORCH_NODES_ENTRY_SYMBOL
                                               "; a native pack must (docs/nodes.md)"};
  }
  const orch_node_set* set = query(ORCH_NODES_ABI_MAJOR);
  if (set == nullptr || set->struct_size < sizeof(orch_node_set) ||
      set->abi_major != ORCH_NODES_ABI_MAJOR) {
    ::dlclose(handle);
    return error{"abi_mismatch", path.string() + " does not serve node ABI major " +
                                     std::to_string(ORCH_NODES_ABI_MAJOR) + "; rebuild the pack"};
  }
  std::set<std::string> seen;
  for (std::uint32_t i = 0; i < set->count; ++i) {
    const orch_node_class& c = set->classes[i];
    if (c.class_type == nullptr || c.execute == nullptr || !seen.insert(c.class_type).second ||
        (c.input_count > 0 && c.inputs == nullptr) || (c.output_count > 0 && c.outputs == nullptr)) {
      ::dlclose(handle);
      return error{"invalid_pack", path.string() + ": node class #" + std::to_string(i) +
                                       " lacks class_type, execute, its tables, or repeats a name"};
    }
  }
  return std::unique_ptr<node_library>(new node_library(handle, set, path));
}

node_library::~node_library() {
  if (handle_ != nullptr) ::dlclose(handle_);
}

const orch_node_class* node_library::find(const std::string& class_type) const noexcept {
  for (std::uint32_t i = 0; i < set_->count; ++i) {
    if (class_type == set_->classes[i].class_type) return &set_->classes[i];
  }
  return nullptr;
}

nlohmann::json node_library::describe() const {
  auto classes = nlohmann::json::array();
  for (std::uint32_t i = 0; i < set_->count; ++i) {
    const orch_node_class& c = set_->classes[i];
    auto inputs = nlohmann::json::array();
    for (std::uint32_t k = 0; k < c.input_count; ++k) {
      const orch_node_input& in = c.inputs[k];
      nlohmann::json j{{"name", in.name},
                       {"type", in.type},
                       {"required", (in.flags & ORCH_INPUT_REQUIRED) != 0}};
      if (in.flags & ORCH_INPUT_HAS_MIN) j["min"] = in.min;
      if (in.flags & ORCH_INPUT_HAS_MAX) j["max"] = in.max;
      if (in.flags & ORCH_INPUT_HAS_DEFAULT) j["default"] = literal(in.default_value);
      inputs.push_back(std::move(j));
    }
    auto outputs = nlohmann::json::array();
    for (std::uint32_t k = 0; k < c.output_count; ++k) outputs.push_back(c.outputs[k]);
    classes.push_back({{"class_type", c.class_type},
                       {"display_name", c.display_name ? c.display_name : c.class_type},
                       {"category", c.category ? c.category : ""},
                       {"inputs", std::move(inputs)},
                       {"outputs", std::move(outputs)},
                       {"output_node", (c.flags & ORCH_NODE_OUTPUT_NODE) != 0},
                       {"not_idempotent", (c.flags & ORCH_NODE_NOT_IDEMPOTENT) != 0}});
  }
  return classes;
}

}  // namespace orch::worker
