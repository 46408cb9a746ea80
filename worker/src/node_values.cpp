#include "node_values.hpp"

#include <algorithm>
#include <optional>

#include "node_context.hpp"
#include "orch/ipc/descriptor.hpp"
#include "orch/ipc/tensor_wire.hpp"
#include "worker_errc.hpp"

namespace orch::worker {

using nlohmann::json;

// How the node inputs and outputs travel (docs/protocol.md, "call"): literals as themselves, a
// tensor as {"tensor": {dtype, shape, descriptor}} naming a pool block, never its bytes.
namespace {

// How deep a node's containers nest: within ipc::max_body_depth (16) once the response around a
// value (2 levels), a dict's wrapper (1 more per level) and a tensor (3) are counted.
constexpr int max_value_depth = 5;

json tensor_to_json(const orch_tensor& t) {
  // A node that set ndim past the shape array: reading on would leave the struct. Sent without
  // a shape, which the host refuses as this node's invalid output (output_tensors.cpp).
  json shape = nullptr;
  if (t.ndim <= ORCH_TENSOR_MAX_DIMS) {
    shape = json::array();
    for (std::uint32_t k = 0; k < t.ndim; ++k) shape.push_back(t.shape[k]);
  }
  ipc::buffer_descriptor d{t.buffer.segment, t.buffer.generation, t.buffer.offset, t.buffer.size};
  json out = {{"dtype", t.dtype}, {"shape", shape}, {"descriptor", ipc::descriptor_to_json(d)}};
  if (shape.is_null()) out["ndim"] = t.ndim;
  return {{"tensor", std::move(out)}};
}

json value_to_json_at(const orch_value& v, int depth);

// A node's LIST or DICT: its items, walked max_value_depth containers deep (a node that built a
// cycle, or nested deeper, gets an empty container there, never a stack overflow or a body the
// channel cannot carry). A count below zero reads as none.
json container_to_json(const orch_value& v, int depth) {
  const orch_value_item* items = orch_value_items(&v);
  const bool dict = v.kind == ORCH_VALUE_DICT;
  json out = dict ? json::object() : json::array();
  json order = json::array();
  if (items == nullptr || v.i <= 0 || depth >= max_value_depth)
    return dict ? json{{"dict", std::move(out)}} : out;
  for (std::int64_t k = 0; k < v.i; ++k) {
    json item = value_to_json_at(items[k].value, depth + 1);
    if (dict) {
      std::string key = items[k].key != nullptr ? items[k].key : std::to_string(k);
      if (!out.contains(key)) order.push_back(key);
      out[std::move(key)] = std::move(item);
    } else {
      out.push_back(std::move(item));
    }
  }
  if (!dict) return out;
  // The node's order of keys, which a JSON object here (a sorted map) loses.
  return json{{"dict", std::move(out)}, {"order", std::move(order)}};
}

json value_to_json_at(const orch_value& v, int depth) {
  if (v.kind == ORCH_VALUE_LIST || v.kind == ORCH_VALUE_DICT) return container_to_json(v, depth);
  return value_to_json(v);
}

}  // namespace

result<orch_value> value_from_json(const json& j, const std::string& type,
                                   ipc::segment_table& segments, value_storage& storage) {
  orch_value v{};
  if (j.is_object() && j.contains("tensor")) {
    auto t = tensor_view(j["tensor"], segments);  // the extent and the block, checked here
    if (!t) return t.err();
    v.kind = ORCH_VALUE_TENSOR;
    v.tensor = *t;
    return v;
  }
  const json* dict = ipc::dict_items(j);
  if (j.is_array() || dict != nullptr) {
    auto& out = storage.items.emplace_back();
    if (dict != nullptr) {
      out.reserve(dict->size());
      for (const std::string& name : ipc::dict_keys(j)) {
        auto item = value_from_json(dict->at(name), "*", segments, storage);
        if (!item) return item.err();
        out.push_back({storage.strings.emplace_back(name).c_str(), *item});
      }
    } else {
      out.reserve(j.size());
      for (const auto& element : j) {
        auto item = value_from_json(element, "*", segments, storage);
        if (!item) return item.err();
        out.push_back({nullptr, *item});
      }
    }
    v.kind = dict != nullptr ? ORCH_VALUE_DICT : ORCH_VALUE_LIST;
    v.i = static_cast<std::int64_t>(out.size());
    v.tensor.data = out.data();
    return v;
  }
  const bool any = type == "*";
  if (j.is_null() && any) {
    v.kind = ORCH_VALUE_NONE;
  } else if ((type == "INT" && j.is_number()) || (any && j.is_number_integer())) {
    v.kind = ORCH_VALUE_INT;
    v.i = j.is_number_float() ? static_cast<std::int64_t>(j.get<double>()) : j.get<std::int64_t>();
  } else if ((type == "FLOAT" && j.is_number()) || (any && j.is_number_float())) {
    v.kind = ORCH_VALUE_FLOAT;
    v.f = j.get<double>();
  } else if ((type == "BOOLEAN" || any) && j.is_boolean()) {
    v.kind = ORCH_VALUE_BOOL;
    v.i = j.get<bool>() ? 1 : 0;
  } else if (j.is_string()) {
    v.kind = ORCH_VALUE_STRING;
    v.s = storage.strings.emplace_back(j.get<std::string>()).c_str();
  } else {
    return error{worker_errc::bad_value, "a value of type " + type + " cannot be " + j.dump()};
  }
  return v;
}

json value_to_json(const orch_value& v) {
  switch (v.kind) {
    case ORCH_VALUE_INT:
      return v.i;
    case ORCH_VALUE_FLOAT:
      return v.f;
    case ORCH_VALUE_BOOL:
      return v.i != 0;
    case ORCH_VALUE_STRING:
      return v.s == nullptr ? std::string() : std::string(v.s);
    case ORCH_VALUE_TENSOR:
      return tensor_to_json(v.tensor);
    case ORCH_VALUE_LIST:
    case ORCH_VALUE_DICT:
      return container_to_json(v, 0);
    default:
      return nullptr;
  }
}

result<decoded_inputs> decode_inputs(const node_class& cls, const json& given,
                                     ipc::segment_table& segments, value_storage& storage,
                                     bool defaults) {
  decoded_inputs out;
  out.values.resize(cls.inputs.size());
  std::optional<std::size_t> rest;
  for (std::size_t k = 0; k < cls.inputs.size(); ++k) {
    const orch_node_input& in = *cls.inputs[k];
    if ((in.flags & ORCH_INPUT_REST) != 0 && !rest) {
      rest = k;
      continue;
    }
    auto it = given.find(in.name);
    if (it == given.end()) {
      if (defaults && (in.flags & ORCH_INPUT_HAS_DEFAULT)) out.values[k] = in.default_value;
      continue;
    }
    auto v = value_from_json(*it, in.type, segments, storage);
    if (!v) return error{v.err().code, std::string(in.name) + ": " + v.err().message};
    out.values[k] = *v;
    if (v->kind == ORCH_VALUE_TENSOR) out.seen[in.name] = value_to_json(*v)["tensor"];
  }
  if (rest && given.is_object()) {
    json undeclared = json::object();
    for (auto it = given.begin(); it != given.end(); ++it) {
      const bool declared = std::any_of(cls.inputs.begin(), cls.inputs.end(),
                                        [&](const auto* in) { return it.key() == in->name; });
      if (!declared) undeclared[it.key()] = *it;
    }
    auto v = value_from_json(json{{"dict", std::move(undeclared)}}, "*", segments, storage);
    if (!v) return error{v.err().code, "a dynamic input: " + v.err().message};
    out.values[*rest] = *v;
  }
  return out;
}

}  // namespace orch::worker
