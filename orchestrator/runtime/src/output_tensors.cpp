#include "output_tensors.hpp"

#include <algorithm>

#include "orch/ipc/message.hpp"
#include "orch/ipc/tensor_wire.hpp"
#include "orch/runtime/errc.hpp"

namespace orch::runtime {
namespace {

// `produced`: when given, the block must be one of these (by segment, offset and generation).
status check_value(const nlohmann::json& value, const ipc::lease_table& leases,
                   ipc::process_id holder, const std::string& where,
                   const std::span<const ipc::buffer_descriptor>* produced) {
  if (value.is_array()) {
    for (std::size_t k = 0; k < value.size(); ++k) {
      const std::string at = where + "[" + std::to_string(k) + "]";
      if (auto st = check_value(value[k], leases, holder, at, produced); !st) return st;
    }
    return ok_status();
  }
  if (const nlohmann::json* items = ipc::dict_items(value)) {
    for (const auto& [key, item] : items->items()) {
      if (auto st = check_value(item, leases, holder, where + "." + key, produced); !st) return st;
    }
    return ok_status();
  }
  if (!ipc::is_tensor_value(value)) return ok_status();
  auto t = ipc::tensor_from_json(value["tensor"]);
  if (!t) return error{runtime_errc::invalid_output, where + ": " + t.err().message};
  const auto& d = t->descriptor;
  if (produced != nullptr &&
      std::none_of(produced->begin(), produced->end(), [&](const ipc::buffer_descriptor& p) {
        return p.segment == d.segment && p.offset == d.offset && p.generation == d.generation;
      })) {
    return error{runtime_errc::invalid_output,
                 where + ": " + ipc::describe(*t) +
                     " is no output of this prompt: only a node's output reaches a worker "
                     "as a tensor"};
  }
  const std::uint64_t leased = leases.leased_size(d, holder);
  if (leased == 0) {
    return error{runtime_errc::invalid_output,
                 where + ": " + ipc::describe(*t) +
                     " names no block the host holds (not allocated by this call, freed, or "
                     "another generation)"};
  }
  if (d.size > leased) {
    return error{runtime_errc::invalid_output,
                 where + ": " + ipc::describe(*t) + " claims " + std::to_string(d.size) +
                     " bytes, but its buffer holds " + std::to_string(leased) + " bytes"};
  }
  return ok_status();
}

}  // namespace

status check_output_tensors(const nlohmann::json& outputs, const ipc::lease_table& leases,
                            ipc::process_id holder, const std::string& producer) {
  if (!outputs.is_array()) return ok_status();  // ipc::check_call_response refuses it first
  for (std::size_t slot = 0; slot < outputs.size(); ++slot) {
    auto st = check_value(outputs[slot], leases, holder, "output " + std::to_string(slot), nullptr);
    if (!st) {
      return error{runtime_errc::invalid_output,
                   producer + " returned an invalid tensor: " + st.err().message};
    }
  }
  return ok_status();
}

status check_input_tensors(const nlohmann::json& inputs, const ipc::lease_table& leases,
                           ipc::process_id holder,
                           std::span<const ipc::buffer_descriptor> produced) {
  if (!inputs.is_object()) return ok_status();
  for (const auto& [name, value] : inputs.items()) {
    auto st = check_value(value, leases, holder, "input " + name, &produced);
    if (!st) return error{runtime_errc::invalid_input, st.err().message};
  }
  return ok_status();
}

namespace {

void collect_descriptors(const nlohmann::json& v, std::vector<ipc::buffer_descriptor>& out) {
  if (v.is_array()) {
    for (const auto& x : v) collect_descriptors(x, out);
  } else if (const nlohmann::json* items = ipc::dict_items(v)) {
    for (const auto& [key, x] : items->items()) collect_descriptors(x, out);
  } else if (v.is_object() && v.contains("tensor") && v["tensor"].is_object() &&
             v["tensor"].contains("descriptor")) {
    auto d = ipc::descriptor_from_json(v["tensor"]["descriptor"]);
    if (d) out.push_back(*d);
  }
}

}  // namespace

std::vector<ipc::buffer_descriptor> tensor_descriptors(const nlohmann::json& values) {
  std::vector<ipc::buffer_descriptor> out;
  collect_descriptors(values, out);
  return out;
}

}  // namespace orch::runtime
