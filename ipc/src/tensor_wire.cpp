#include "orch/ipc/tensor_wire.hpp"

#include <limits>
#include <set>

#include "orch/ipc/message.hpp"

namespace orch::ipc {

bool is_tensor_value(const nlohmann::json& value) noexcept {
  return value.is_object() && value.contains("tensor");
}

const nlohmann::json* dict_items(const nlohmann::json& value) noexcept {
  if (!value.is_object()) return nullptr;
  auto it = value.find("dict");
  return it != value.end() && it->is_object() ? &*it : nullptr;
}

std::vector<std::string> dict_keys(const nlohmann::json& value) {
  std::vector<std::string> keys;
  const nlohmann::json* items = dict_items(value);
  if (items == nullptr) return keys;
  const auto order = value.find("order");
  if (order != value.end() && order->is_array() && order->size() == items->size()) {
    std::set<std::string> seen;
    for (const auto& key : *order) {
      if (!key.is_string() || !items->contains(key.get<std::string>()) ||
          !seen.insert(key.get<std::string>()).second)
        break;
      keys.push_back(key.get<std::string>());
    }
    if (keys.size() == items->size()) return keys;
    keys.clear();
  }
  for (auto it = items->begin(); it != items->end(); ++it) keys.push_back(it.key());
  return keys;
}

result<wire_tensor> tensor_from_json(const nlohmann::json& t) {
  if (!t.is_object()) return error{body_errc::bad_field, "tensor is not a map"};
  wire_tensor out;
  auto dtype = t.find("dtype");
  if (dtype == t.end()) return error{body_errc::missing_field, "tensor lacks dtype"};
  // A signed non-negative integer is accepted too: a body built in-process (not decoded from
  // CBOR, which gives unsigned) holds small literals as signed.
  if (!dtype->is_number_integer() || (!dtype->is_number_unsigned() && dtype->get<std::int64_t>() < 0) ||
      dtype->get<std::uint64_t>() > std::numeric_limits<std::uint32_t>::max()) {
    return error{body_errc::bad_field, "tensor dtype is not an unsigned 32-bit code"};
  }
  out.dtype = static_cast<std::uint32_t>(dtype->get<std::uint64_t>());
  auto shape = t.find("shape");
  if (shape == t.end()) return error{body_errc::missing_field, "tensor lacks shape"};
  if (!shape->is_array()) {
    // A producer whose node set ndim past the shape array sends its rank alone (worker_runtime).
    if (auto ndim = t.find("ndim"); shape->is_null() && ndim != t.end() && ndim->is_number()) {
      return error{tensor_errc::bad_rank, "a tensor of rank " + ndim->dump() + " (at most " +
                                              std::to_string(max_tensor_dims) + ")"};
    }
    return error{body_errc::bad_field, "tensor shape is not a list"};
  }
  if (shape->size() > max_tensor_dims) {
    return error{tensor_errc::bad_rank, "a tensor of rank " + std::to_string(shape->size()) +
                                            " (at most " + std::to_string(max_tensor_dims) + ")"};
  }
  out.ndim = static_cast<std::uint32_t>(shape->size());
  for (std::size_t k = 0; k < shape->size(); ++k) {
    const auto& dim = (*shape)[k];
    // CBOR gives a non-negative integer as unsigned: one above int64 is not a dim.
    if (dim.is_number_unsigned()) {
      if (dim.get<std::uint64_t>() >
          static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return error{tensor_errc::too_large, "tensor dim " + std::to_string(k) + " is " +
                                                 std::to_string(dim.get<std::uint64_t>()) +
                                                 ", past int64"};
      }
      out.shape[k] = static_cast<std::int64_t>(dim.get<std::uint64_t>());
    } else if (dim.is_number_integer()) {
      out.shape[k] = dim.get<std::int64_t>();
    } else {
      return error{body_errc::bad_field, "tensor dim " + std::to_string(k) + " is not an integer"};
    }
  }
  auto descriptor = t.find("descriptor");
  if (descriptor == t.end()) return error{body_errc::missing_field, "tensor lacks descriptor"};
  auto d = descriptor_from_json(*descriptor);
  if (!d) return d.err();
  out.descriptor = *d;
  if (auto st = check_tensor_extent(out.dtype, out.dims(), {}, out.descriptor.size); !st) {
    return st.err();
  }
  return out;
}

std::string describe(const wire_tensor& t) {
  const auto& d = t.descriptor;
  return describe_tensor(t.dtype, t.dims()) + " in descriptor {segment " +
         std::to_string(d.segment) + ", offset " + std::to_string(d.offset) + ", size " +
         std::to_string(d.size) + ", generation " + std::to_string(d.generation) + "}";
}

}  // namespace orch::ipc
