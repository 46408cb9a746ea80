// The supervisor's lease service (docs/shared-memory.md): the host alone writes
// allocation metadata, so a worker's pinned-pool block is allocated here and reaches it as a
// lease; its lease_free and lease_release notifications, the pinned_grant requests that grow its
// budget grant, and the hand-over of a call's outputs to the host.
#include <algorithm>

#include "orch/ipc/descriptor.hpp"
#include "orch/runtime/host_memory.hpp"
#include "orch/runtime/supervisor.hpp"
#include "output_tensors.hpp"

namespace orch::runtime {

using nlohmann::json;

void supervisor::on_allocate(worker& w, const ipc::message& m) {
  auto d = memory_.leases().allocate(w.info.slot, m.body["size"].get<std::uint64_t>());
  if (!d) return w.channel->respond_error(m.header, d.err());
  w.channel->respond(m.header, {{"descriptor", ipc::descriptor_to_json(*d)}});
}

void supervisor::on_lease_message(worker& w, const ipc::message& m) {
  // A descriptor the worker holds no lease on is its own mistake: nothing changes.
  auto d = ipc::descriptor_from_json(m.body["descriptor"]);
  if (!d) return;
  if (static_cast<ipc::message_type>(m.header.type) == ipc::message_type::lease_free) {
    (void)memory_.leases().free(*d, w.info.slot);
  } else {
    (void)memory_.leases().release(*d, w.info.slot);
  }
}

void supervisor::on_pinned_grant(worker& w, const ipc::message& m) {
  // The worker's reservation passed its grant (docs/shared-memory.md).
  auto grant = memory_.grant(w.info.slot, m.body["bytes"].get<std::uint64_t>());
  if (!grant) return w.channel->respond_error(m.header, grant.err());
  w.channel->respond(m.header, {{"grant", *grant}});
}

std::vector<ipc::buffer_descriptor> supervisor::hand_over_outputs(const std::string& env,
                                                                  const json& response) {
  // On the io thread, before anyone reads the response: each block the node returned becomes the
  // host's; each one it allocated and dropped goes back to the pool.
  std::vector<ipc::buffer_descriptor> kept;
  const auto* w = find(env);
  if (w == nullptr) return kept;
  const bool ok = response.value("status", "") == "ok";
  const auto returned =
      ok ? tensor_descriptors(response["outputs"]) : std::vector<ipc::buffer_descriptor>{};
  for (const auto& a : response.value("allocations", json::array())) {
    auto d = ipc::descriptor_from_json(a);
    if (!d) continue;
    const bool keep = std::find(returned.begin(), returned.end(), *d) != returned.end();
    if (keep) (void)memory_.leases().acquire(*d, host_slot);
    (void)memory_.leases().free(*d, w->slot);
    if (keep) kept.push_back(*d);
  }
  return kept;
}

}  // namespace orch::runtime
