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

}  // namespace

bool is_fleet_document(const json& doc) {
  return doc.is_object() && doc.contains("hosts") && doc["hosts"].is_object() &&
         !doc.contains("processes") && !doc.contains("differences");
}

std::string format_fleet_status(const json& fleet) {
  return sections(fleet, [](const json& doc) { return format_status(doc); });
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
