#include "node_values.hpp"

#include "node_context.hpp"
#include "orch/ipc/descriptor.hpp"
#include "worker_errc.hpp"

namespace orch::worker {

using nlohmann::json;

// How the node inputs and outputs travel (docs/protocol.md, "call"): literals as themselves, a
// tensor as {"tensor": {dtype, shape, descriptor}} naming a pool block, never its bytes.
namespace {

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

}  // namespace

result<orch_value> value_from_json(const json& j, const std::string& type,
                                   ipc::segment_table& segments, std::deque<std::string>& storage) {
  orch_value v{};
  if (j.is_object() && j.contains("tensor")) {
    auto t = tensor_view(j["tensor"], segments);  // the extent and the block, checked here
    if (!t) return t.err();
    v.kind = ORCH_VALUE_TENSOR;
    v.tensor = *t;
    return v;
  }
  if (type == "INT" && j.is_number()) {
    v.kind = ORCH_VALUE_INT;
    v.i = j.is_number_float() ? static_cast<std::int64_t>(j.get<double>()) : j.get<std::int64_t>();
  } else if (type == "FLOAT" && j.is_number()) {
    v.kind = ORCH_VALUE_FLOAT;
    v.f = j.get<double>();
  } else if (type == "BOOLEAN" && j.is_boolean()) {
    v.kind = ORCH_VALUE_BOOL;
    v.i = j.get<bool>() ? 1 : 0;
  } else if (j.is_string()) {
    v.kind = ORCH_VALUE_STRING;
    storage.push_back(j.get<std::string>());
    v.s = storage.back().c_str();
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
    default:
      return nullptr;
  }
}

}  // namespace orch::worker
