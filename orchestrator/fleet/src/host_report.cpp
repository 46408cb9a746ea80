#include "orch/fleet/host_report.hpp"

#include <set>
#include <utility>
#include <vector>

namespace orch::fleet {

namespace {

using nlohmann::json;

// How deep `text` nests arrays and objects, counted outside strings, stopping past `limit`:
// nlohmann-json builds (and destroys) a value per level, so a report of a million '[' is refused
// before it is parsed.
std::size_t nesting_depth(std::string_view text, std::size_t limit) {
  std::size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
      if (deepest > limit) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

bool is_fingerprint(const std::string& s) {
  constexpr std::string_view prefix = "sha256:";
  if (s.size() != prefix.size() + 64 || s.compare(0, prefix.size(), prefix) != 0) return false;
  for (std::size_t i = prefix.size(); i < s.size(); ++i) {
    const char c = s[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

class reader {
 public:
  reader(const json& doc, const report_limits& limits) : doc_(doc), limits_(limits) {}
  std::string error;

  const json* field(const char* key) {
    const auto it = doc_.find(key);
    if (it == doc_.end()) return fail(std::string(key) + ": missing");
    return &*it;
  }
  std::optional<std::string> name(const json& v, const std::string& where) {
    if (!v.is_string()) return fail(where + ": not a string"), std::nullopt;
    const auto& s = v.get_ref<const std::string&>();
    if (s.empty()) return fail(where + ": empty"), std::nullopt;
    if (s.size() > limits_.max_name_bytes)
      return fail(where + ": " + std::to_string(s.size()) + " bytes, more than " +
                  std::to_string(limits_.max_name_bytes)),
             std::nullopt;
    return s;
  }
  bool names(const char* key, std::set<std::string>& out) {
    const json* v = field(key);
    if (v == nullptr) return false;
    if (!v->is_array()) return fail(std::string(key) + ": not an array"), false;
    if (v->size() > limits_.max_names)
      return fail(std::string(key) + ": " + std::to_string(v->size()) + " entries, more than " +
                  std::to_string(limits_.max_names)),
             false;
    for (std::size_t i = 0; i < v->size(); ++i) {
      auto s = name((*v)[i], std::string(key) + "[" + std::to_string(i) + "]");
      if (!s) return false;
      out.insert(std::move(*s));
    }
    return true;
  }
  std::optional<std::uint64_t> count(const char* key) {
    const json* v = field(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number_unsigned())
      return fail(std::string(key) + ": not an unsigned integer"), std::nullopt;
    return v->get<std::uint64_t>();
  }

 private:
  std::nullptr_t fail(std::string why) {
    if (error.empty()) error = std::move(why);
    return nullptr;
  }
  const json& doc_;
  const report_limits& limits_;
};

// A value from another machine, fit for one sentence: a hash cut to 12 hex digits, anything
// else to 64 bytes, control bytes and quotes replaced.
std::string shown(const std::string& value) {
  constexpr std::string_view prefix = "sha256:";
  std::string out =
      value.compare(0, prefix.size(), prefix) == 0 && value.size() > prefix.size() + 12
          ? value.substr(0, prefix.size() + 12) + "\u2026"
      : value.size() > 64 ? value.substr(0, 64) + "\u2026"
                          : value;
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return out;
}

std::string part_label(const std::string& part) {
  std::string label = part.compare(0, 4, "env:") == 0 ? "env " + part.substr(4) : part;
  return shown(label);
}

}  // namespace

json host_report_json(const host_report& report) {
  const host_view& v = report.view;
  return {{"name", v.name},
          {"fingerprint", v.fingerprint},
          {"fingerprint_parts", report.parts},
          {"node_classes", v.node_classes},
          {"resident_models", v.resident_models},
          {"free_device_bytes", v.free_device_bytes},
          {"running", v.running},
          {"queued", v.queued}};
}

host_report_reading parse_host_report(std::string_view text, const report_limits& limits) {
  const auto refuse = [](std::string why) {
    return host_report_reading{std::nullopt, "host report: " + std::move(why)};
  };
  if (text.size() > limits.max_bytes)
    return refuse(std::to_string(text.size()) + " bytes, more than " +
                  std::to_string(limits.max_bytes));
  if (nesting_depth(text, limits.max_depth) > limits.max_depth)
    return refuse("nested more than " + std::to_string(limits.max_depth) + " deep");
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return refuse("not JSON");
  if (!doc.is_object()) return refuse("not an object");

  reader r(doc, limits);
  host_report out;
  host_view& v = out.view;
  v.up = true;
  if (const json* name = r.field("name"))
    if (auto s = r.name(*name, "name")) v.name = std::move(*s);
  if (!r.error.empty()) return refuse(r.error);
  if (const json* f = r.field("fingerprint")) {
    if (!f->is_string() || !is_fingerprint(f->get_ref<const std::string&>()))
      return refuse("fingerprint: not \"sha256:\" and 64 lower-case hex digits");
    v.fingerprint = f->get<std::string>();
  }
  if (!r.error.empty()) return refuse(r.error);
  if (const json* parts = r.field("fingerprint_parts")) {
    if (!parts->is_object()) return refuse("fingerprint_parts: not an object");
    if (parts->size() > limits.max_names)
      return refuse("fingerprint_parts: " + std::to_string(parts->size()) + " entries, more than " +
                    std::to_string(limits.max_names));
    for (const auto& [key, value] : parts->items()) {
      const std::string where = "fingerprint_parts[" + shown(key) + "]";
      if (key.empty() || key.size() > limits.max_name_bytes)
        return refuse(where + ": a part's name must be 1 to " +
                      std::to_string(limits.max_name_bytes) + " bytes");
      auto s = r.name(value, where);
      if (!s) return refuse(r.error);
      out.parts.emplace(key, std::move(*s));
    }
  }
  if (!r.error.empty()) return refuse(r.error);
  if (!r.names("node_classes", v.node_classes) || !r.names("resident_models", v.resident_models))
    return refuse(r.error);
  if (auto n = r.count("free_device_bytes")) v.free_device_bytes = *n;
  if (!r.error.empty()) return refuse(r.error);
  if (const json* running = r.field("running")) {
    if (!running->is_boolean()) return refuse("running: not a boolean");
    v.running = running->get<bool>();
  }
  if (!r.error.empty()) return refuse(r.error);
  if (auto n = r.count("queued")) v.queued = static_cast<std::size_t>(*n);
  if (!r.error.empty()) return refuse(r.error);
  return {std::move(out), {}};
}

std::string fingerprint_difference(const fingerprint_parts& fleet, const fingerprint_parts& host) {
  std::set<std::string> all;
  for (const auto& [k, _] : fleet) all.insert(k);
  for (const auto& [k, _] : host) all.insert(k);
  std::vector<std::string> differ, same;
  for (const auto& part : all) {
    const auto f = fleet.find(part);
    const auto h = host.find(part);
    const std::string here = h == host.end() ? "absent" : shown(h->second);
    const std::string there = f == fleet.end() ? "absent" : shown(f->second);
    if (f != fleet.end() && h != host.end() && f->second == h->second)
      same.push_back(part_label(part));
    else
      differ.push_back(part_label(part) + ": " + here + " here, " + there + " in the fleet");
  }
  std::string out;
  for (const auto& d : differ) out += (out.empty() ? "" : "; ") + d;
  if (differ.empty()) out = "no part differs";
  if (same.size() > 8) {
    out += "; " + std::to_string(same.size()) + " other parts same";
  } else {
    for (const auto& s : same) out += "; " + s + ": same";
  }
  return out;
}

}  // namespace orch::fleet
