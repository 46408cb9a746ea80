#include "orch/serve/fleet_host_route.hpp"

#include <unistd.h>

#include <climits>
#include <utility>

#include "orch/runtime/memory_table.hpp"
#include "orch/serve/json_reply.hpp"

namespace orch::serve {

std::string machine_host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

std::set<std::string> resident_models_of(const runtime::host_runtime& host) {
  std::set<std::string> models;
  for (const auto& m : host.stand_ins().entries())
    if (m.resident > 0) models.insert(m.asked.begin(), m.asked.end());
  return models;
}

void add_fleet_host_route(route_table& table, runtime::host_runtime& host, fleet_identity identity,
                          std::function<queue_state()> queue) {
  table.add(
      {.method = "GET",
       .path = "/orch/fleet/host",
       .answer = [&host, id = std::move(identity), queue = std::move(queue)](const http_request&) {
         fleet::host_report report;
         fleet::host_view& v = report.view;
         v.name = id.name;
         v.fingerprint = id.fingerprint;
         report.parts = id.parts;
         for (const auto& [name, cls] : host.catalogue().classes()) v.node_classes.insert(name);
         host.on_io_thread([&] {
           v.free_device_bytes = runtime::device_figures_of(runtime::read_memory_table(host)).free;
           v.resident_models = resident_models_of(host);
         });
         const queue_state q = queue();
         v.running = q.running;
         v.queued = q.queued;
         return json_reply(fleet::host_report_json(report));
       }});
}

}  // namespace orch::serve
