#include "output_tensors.hpp"

#include "orch/ipc/tensor_wire.hpp"

namespace orch::orchestrator {
namespace {

status check_value(const nlohmann::json& value, const ipc::lease_table& leases,
                   ipc::process_id holder, const std::string& where) {
  if (value.is_array()) {
    for (std::size_t k = 0; k < value.size(); ++k) {
      if (auto st = check_value(value[k], leases, holder, where + "[" + std::to_string(k) + "]");
          !st) {
        return st;
      }
    }
    return ok_status();
  }
  if (!ipc::is_tensor_value(value)) return ok_status();
  auto t = ipc::tensor_from_json(value["tensor"]);
  if (!t) return error{invalid_output, where + ": " + t.err().message};
  const std::uint64_t leased = leases.leased_size(t->descriptor, holder);
  if (leased == 0) {
    return error{invalid_output, where + ": " + ipc::describe(*t) +
                                     " names no block the host holds (not allocated by this "
                                     "call, freed, or another generation)"};
  }
  if (t->descriptor.size > leased) {
    return error{invalid_output, where + ": " + ipc::describe(*t) + " claims " +
                                     std::to_string(t->descriptor.size) +
                                     " bytes, but its buffer holds " + std::to_string(leased) +
                                     " bytes"};
  }
  return ok_status();
}

}  // namespace

status check_output_tensors(const nlohmann::json& outputs, const ipc::lease_table& leases,
                            ipc::process_id holder, const std::string& producer) {
  if (!outputs.is_array()) return ok_status();  // checked_response refuses it first
  for (std::size_t slot = 0; slot < outputs.size(); ++slot) {
    auto st = check_value(outputs[slot], leases, holder, "output " + std::to_string(slot));
    if (!st) {
      return error{invalid_output, producer + " returned an invalid tensor: " +
                                       st.err().message};
    }
  }
  return ok_status();
}

}  // namespace orch::orchestrator
