#include "orch/live/fleet_text.hpp"

#include <sstream>

#include "orch/live/live_text.hpp"
#include "orch/support/json_fields.hpp"
#include "orch/support/untrusted_text.hpp"

namespace orch::live {

namespace {

using nlohmann::json;

std::string why_text(const json& j) {
  return j.is_string() ? printable(j.get<std::string>())
                       : printable(j.dump(-1, ' ', false, json::error_handler_t::replace));
}

// Each host's section, then those that did not answer.
std::string sections(const json& fleet, std::string (*one)(const json&)) {
  std::ostringstream out;
  const json& hosts = object_field(fleet, "hosts");
  const json& unanswered = object_field(fleet, "unanswered");
  for (const auto& [name, doc] : hosts.items())
    out << "== " << printable(name) << " ==\n" << one(doc) << '\n';
  for (const auto& [name, why] : unanswered.items())
    out << "== " << printable(name) << ": did not answer: " << why_text(why) << " ==\n";
  out << hosts.size() << " host" << (hosts.size() == 1 ? "" : "s") << " answered";
  if (!unanswered.empty()) out << ", " << unanswered.size() << " did not";
  out << '\n';
  return out.str();
}

// The gateway's placement summary, when its status has one: each host (up or why not, its
// models, its prompt), the prompts waiting at the gateway, and why the newest went where they
// went. Everything in it came from a gateway over HTTP: printed as untrusted text.
std::string placement_section(const json& fleet) {
  const json& summary = object_field(fleet, "fleet");
  if (summary.empty()) return {};
  std::ostringstream out;
  out << "== fleet ==\n";
  const json& hosts = field_or_null(summary, "hosts");
  if (hosts.is_array())
    for (const auto& h : hosts) {
      if (!h.is_object()) continue;
      out << printable(text_field(h, "name")) << "  ";
      const json& refused = field_or_null(h, "refused");
      if (refused.is_string())
        out << "refused: " << why_text(refused);
      else
        out << (field_or_null(h, "up") == true ? "up" : "down");
      std::string models;
      if (const json& m = field_or_null(h, "resident_models"); m.is_array())
        for (const auto& name : m)
          if (name.is_string()) models += (models.empty() ? "" : ", ") + printable(name.get<std::string>());
      out << "  models: " << (models.empty() ? "none" : models);
      const json& running = field_or_null(h, "running");
      out << "  running: " << (running.is_string() ? printable(running.get<std::string>()) : "none")
          << '\n';
    }
  out << "waiting at the gateway: " << unsigned_field(summary, "queue_remaining") << '\n';
  const json& decisions = field_or_null(summary, "decisions");
  if (decisions.is_array() && !decisions.empty()) {
    out << "recent placements:\n";
    for (const auto& d : decisions)
      if (d.is_object())
        out << "  " << printable(text_field(d, "prompt_id")) << "  "
            << printable(text_field(d, "reason")) << '\n';
  }
  return out.str() + '\n';
}

}  // namespace

bool is_fleet_document(const json& doc) {
  return doc.is_object() && doc.contains("hosts") && doc["hosts"].is_object() &&
         !doc.contains("processes") && !doc.contains("differences");
}

std::string format_fleet_status(const json& fleet) {
  return placement_section(fleet) +
         sections(fleet, [](const json& doc) { return format_status(doc); });
}

std::string format_fleet_divergences(const json& fleet) {
  return sections(fleet, [](const json& doc) { return format_divergences(doc); });
}

json flatten_fleet(const json& fleet, const char* rows) {
  json all = json::array();
  for (const auto& [name, doc] : object_field(fleet, "hosts").items()) {
    const json& these = field_or_null(doc, rows);
    if (!these.is_array()) continue;
    for (const auto& row : these) {
      if (!row.is_object()) continue;
      json labelled = row;
      labelled["host"] = name;
      all.push_back(std::move(labelled));
    }
  }
  return {{rows, std::move(all)}, {"unanswered", object_field(fleet, "unanswered")}};
}

}  // namespace orch::live
