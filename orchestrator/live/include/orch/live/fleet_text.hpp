// fleet_text: a gateway's live documents (docs/fleet.md, "Live views across the fleet") as the
// terminal text of `comfy-orch status` and `comfy-orch diverge --url`: a section per host, each
// as live_text.hpp writes one serve's document, then the hosts that did not answer and why. A
// gateway's document is {"hosts": {"host-0": <serve's document>, ...}, "unanswered": {"host-1":
// "why"}} (diverge's also "divergent"; status's also "fleet", the gateway's placement summary,
// printed first); a serve's has no "hosts".
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace orch::live {

// Whether `doc` is a gateway's document rather than a serve's.
bool is_fleet_document(const nlohmann::json& doc);

std::string format_fleet_status(const nlohmann::json& fleet);
std::string format_fleet_divergences(const nlohmann::json& fleet);

// One serve-shaped document of every host's: its "processes" (status) or "differences"
// (diverge), each with a "host" field, and the hosts that did not answer under "unanswered", for
// `comfy-orch top`.
nlohmann::json flatten_fleet(const nlohmann::json& fleet, const char* rows);

}  // namespace orch::live
