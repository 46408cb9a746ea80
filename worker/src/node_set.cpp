#include "node_set.hpp"
#include "node_values.hpp"
#include "worker_errc.hpp"

#include <cstddef>
#include <cstdint>
#include <set>

namespace orch::worker {
namespace {

// What node ABI 1.0's structs hold: an element shorter than this is no element of the array.
constexpr std::size_t class_size_1_0 =
    offsetof(orch_node_class, execute) + sizeof(orch_node_execute_fn);
constexpr std::size_t class_size_1_1 = offsetof(orch_node_class, schema_json) + sizeof(const char*);
constexpr std::size_t class_size_1_2 =
    offsetof(orch_node_class, is_changed) + sizeof(orch_node_execute_fn);
constexpr std::size_t input_size_1_0 =
    offsetof(orch_node_input, default_value) + sizeof(orch_value);

// The element `offset` bytes into an array of growable structs (nodes.h).
template <typename T>
const T* element_at(const T* base, std::size_t offset) noexcept {
  return reinterpret_cast<const T*>(reinterpret_cast<std::uintptr_t>(base) + offset);
}

// An element size the worker can step by: at least ABI 1.0's struct, and a multiple of its
// alignment so the next element is aligned.
template <typename T>
bool usable_size(std::size_t size, std::size_t size_1_0) noexcept {
  return size >= size_1_0 && size % alignof(T) == 0;
}

// Copies `extra`'s keys into `into` where `into` has none: the struct's fields stay authoritative.
void merge_absent(nlohmann::json& into, const nlohmann::json& extra) {
  if (!extra.is_object()) return;
  for (const auto& [key, value] : extra.items()) {
    if (!into.contains(key)) into[key] = value;
  }
}

}  // namespace

result<node_set> node_set::check(const orch_node_set* set, const std::string& origin) {
  if (set == nullptr || set->struct_size < sizeof(orch_node_set) ||
      set->abi_major != ORCH_NODES_ABI_MAJOR) {
    return error{worker_errc::abi_mismatch, origin + " does not serve node ABI major " +
                                                std::to_string(ORCH_NODES_ABI_MAJOR) +
                                                "; rebuild the pack"};
  }
  const auto invalid = [&](std::uint32_t i, const std::string& what) {
    return error{worker_errc::invalid_pack,
                 origin + ": node class #" + std::to_string(i) + " " + what};
  };
  if (set->count > 0 && set->classes == nullptr) return invalid(0, "is missing (classes is NULL)");
  // Every class and input is found after the previous one's own struct_size (nodes.h).
  std::set<std::string> seen;
  node_set out;
  std::size_t offset = 0;
  for (std::uint32_t i = 0; i < set->count; ++i) {
    const orch_node_class& c = *element_at(set->classes, offset);
    if (!usable_size<orch_node_class>(c.struct_size, class_size_1_0))
      return invalid(i, "has struct_size " + std::to_string(c.struct_size) +
                            ", not a struct of node ABI 1 (at least " +
                            std::to_string(class_size_1_0) + " bytes); rebuild the pack");
    offset += c.struct_size;
    if (c.class_type == nullptr || c.execute == nullptr || !seen.insert(c.class_type).second ||
        (c.input_count > 0 && c.inputs == nullptr) || (c.output_count > 0 && c.outputs == nullptr))
      return invalid(i, "lacks class_type, execute, its tables, or repeats a name");
    node_class entry{&c, {}, nlohmann::json::object(), nullptr, nullptr};
    if (c.struct_size >= class_size_1_2) {
      entry.validate_inputs = c.validate_inputs;
      entry.is_changed = c.is_changed;
    }
    if (c.struct_size >= class_size_1_1 && c.schema_json != nullptr) {
      entry.schema = nlohmann::json::parse(c.schema_json, nullptr, /*allow_exceptions=*/false);
      if (!entry.schema.is_object())
        return invalid(
            i, "(" + std::string(c.class_type) + ") has a schema_json that is not a JSON object");
    }
    std::size_t input_offset = 0;
    for (std::uint32_t k = 0; k < c.input_count; ++k) {
      const orch_node_input& in = *element_at(c.inputs, input_offset);
      const std::size_t size = in.struct_size == 0 ? input_size_1_0 : in.struct_size;
      if (!usable_size<orch_node_input>(size, input_size_1_0))
        return invalid(i, "has input #" + std::to_string(k) + " of struct_size " +
                              std::to_string(in.struct_size) +
                              ", not a struct of node ABI 1; rebuild the pack");
      if (in.name == nullptr || in.type == nullptr)
        return invalid(i, "has input #" + std::to_string(k) + " without a name or a type");
      entry.inputs.push_back(&in);
      input_offset += size;
    }
    out.classes_.push_back(std::move(entry));
  }
  return out;
}

const node_class* node_set::find(const std::string& class_type) const noexcept {
  for (const node_class& c : classes_)
    if (class_type == c.decl->class_type) return &c;
  return nullptr;
}

nlohmann::json node_set::describe() const {
  auto classes = nlohmann::json::array();
  for (const node_class& entry : classes_) {
    const orch_node_class& c = *entry.decl;
    const nlohmann::json* input_extras = nullptr;
    if (auto it = entry.schema.find("inputs"); it != entry.schema.end() && it->is_object())
      input_extras = &*it;
    auto inputs = nlohmann::json::array();
    for (const orch_node_input* input : entry.inputs) {
      const orch_node_input& in = *input;
      nlohmann::json j{{"name", in.name},
                       {"type", in.type},
                       {"required", (in.flags & ORCH_INPUT_REQUIRED) != 0}};
      if (in.flags & ORCH_INPUT_HAS_MIN) j["min"] = in.min;
      if (in.flags & ORCH_INPUT_HAS_MAX) j["max"] = in.max;
      if (in.flags & ORCH_INPUT_HAS_DEFAULT) j["default"] = value_to_json(in.default_value);
      if (input_extras != nullptr) {
        if (auto it = input_extras->find(in.name); it != input_extras->end()) merge_absent(j, *it);
      }
      inputs.push_back(std::move(j));
    }
    auto outputs = nlohmann::json::array();
    for (std::uint32_t k = 0; k < c.output_count; ++k)
      outputs.push_back(c.outputs[k] != nullptr ? c.outputs[k] : "*");
    nlohmann::json cls{{"class_type", c.class_type},
                       {"display_name", c.display_name ? c.display_name : c.class_type},
                       {"category", c.category ? c.category : ""},
                       {"inputs", std::move(inputs)},
                       {"outputs", std::move(outputs)},
                       {"output_node", (c.flags & ORCH_NODE_OUTPUT_NODE) != 0},
                       {"not_idempotent", (c.flags & ORCH_NODE_NOT_IDEMPOTENT) != 0},
                       {"has_validate_inputs", entry.validate_inputs != nullptr},
                       {"has_is_changed", entry.is_changed != nullptr}};
    merge_absent(cls, entry.schema);
    classes.push_back(std::move(cls));
  }
  return classes;
}

}  // namespace orch::worker
