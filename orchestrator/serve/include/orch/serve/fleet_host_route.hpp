// fleet_host_route: GET /orch/fleet/host (and under /api), what this serve host says of itself
// to a fleet's gateway (issue 58; docs/fleet.md, "What a host reports"; docs/serve.md): its name,
// fingerprint and the fingerprint's parts (host_fingerprint.hpp, made once at start), its
// /object_info classes, the models its memory table holds resident by what their loaders were
// asked to load, the device's free bytes as /system_stats says them, and its queue. Written by
// orch::fleet's host_report_json, the form the gateway's parser reads.
#pragma once

#include <cstddef>
#include <functional>
#include <set>
#include <string>

#include "orch/fleet/host_report.hpp"
#include "orch/runtime/host_runtime.hpp"
#include "orch/serve/route_table.hpp"

namespace orch::serve {

// Who this host is in a fleet: fixed while it serves.
struct fleet_identity {
  std::string name;  // --fleet-host-name, else the machine's host name
  fleet::fingerprint_parts parts;
  std::string fingerprint;  // fingerprint_of(parts)
};

// Whether a prompt runs, and how many wait behind it at this host.
struct queue_state {
  bool running = false;
  std::size_t queued = 0;
};

// The machine's host name (gethostname), or "localhost" when it has none.
std::string machine_host_name();

// The models of the stand-in table resident on the device, each by what its loader was asked
// to load; a model no loader named (a pack's own loader) is left out. io thread only.
std::set<std::string> resident_models_of(const runtime::host_runtime& host);

// Adds the route to `table`, answered on the API thread; the memory table is read on the io
// thread. `host` and what `queue` reads must outlive the table's use.
void add_fleet_host_route(route_table& table, runtime::host_runtime& host, fleet_identity identity,
                          std::function<queue_state()> queue);

}  // namespace orch::serve
