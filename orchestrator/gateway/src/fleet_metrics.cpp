#include "orch/gateway/fleet_metrics.hpp"

#include <cstdlib>
#include <optional>
#include <string_view>
#include <utility>

#include "orch/live/metrics_text.hpp"
#include "orch/support/untrusted_text.hpp"

namespace orch::gateway {

namespace {

constexpr std::size_t max_line_bytes = 64 * 1024;
constexpr std::size_t max_labels = 64;
constexpr std::size_t max_samples_per_host = 200000;
constexpr std::size_t max_families_per_host = 10000;

struct sample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // unescaped values
  std::string value;
  std::string timestamp;  // empty: none
};

struct family {
  std::string help;                // as written after the name (its escapes kept); empty: none
  std::string type;                // empty: none declared
  std::vector<std::string> lines;  // samples written anew, host label first
};

bool name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool name_char(char c) {
  return name_start(c) || (c >= '0' && c <= '9');
}

// A metric name ([a-zA-Z_:][a-zA-Z0-9_:]*) or a label name ([a-zA-Z_][a-zA-Z0-9_]*) at `at`.
std::optional<std::string> read_name(std::string_view line, std::size_t& at, bool metric) {
  const std::size_t start = at;
  if (at >= line.size() || !(name_start(line[at]) || (metric && line[at] == ':')))
    return std::nullopt;
  while (at < line.size() && (name_char(line[at]) || (metric && line[at] == ':'))) ++at;
  return std::string(line.substr(start, at - start));
}

void skip_blanks(std::string_view line, std::size_t& at) {
  while (at < line.size() && (line[at] == ' ' || line[at] == '\t')) ++at;
}

// A quoted label value with the format's escapes (\\, \", \n), unescaped.
std::optional<std::string> read_label_value(std::string_view line, std::size_t& at) {
  if (at >= line.size() || line[at] != '"') return std::nullopt;
  ++at;
  std::string out;
  while (at < line.size()) {
    const char c = line[at++];
    if (c == '"') return out;
    if (c != '\\') {
      out += c;
      continue;
    }
    if (at >= line.size()) return std::nullopt;
    const char e = line[at++];
    if (e == '\\' || e == '"') {
      out += e;
    } else if (e == 'n') {
      out += '\n';
    } else {
      return std::nullopt;
    }
  }
  return std::nullopt;  // no closing quote
}

// A sample value: a decimal float, or NaN, +Inf, -Inf (Go's ParseFloat forms Prometheus takes,
// without hexadecimal ones).
bool is_value(const std::string& v) {
  if (v == "NaN" || v == "+Inf" || v == "-Inf" || v == "Inf") return true;
  if (v.empty() || v.size() > 64) return false;
  for (const char c : v)
    if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'))
      return false;
  char* end = nullptr;
  std::strtod(v.c_str(), &end);
  return end == v.c_str() + v.size();
}

bool is_timestamp(const std::string& t) {
  if (t.empty() || t.size() > 20) return false;
  for (std::size_t i = 0; i < t.size(); ++i)
    if (!((t[i] >= '0' && t[i] <= '9') || (i == 0 && t[i] == '-' && t.size() > 1))) return false;
  return true;
}

std::optional<sample> parse_sample(std::string_view line) {
  sample s;
  std::size_t at = 0;
  auto name = read_name(line, at, true);
  if (!name) return std::nullopt;
  s.name = std::move(*name);
  skip_blanks(line, at);
  if (at < line.size() && line[at] == '{') {
    ++at;
    for (;;) {
      skip_blanks(line, at);
      if (at < line.size() && line[at] == '}') {
        ++at;
        break;
      }
      auto label = read_name(line, at, false);
      if (!label) return std::nullopt;
      skip_blanks(line, at);
      if (at >= line.size() || line[at] != '=') return std::nullopt;
      ++at;
      skip_blanks(line, at);
      auto value = read_label_value(line, at);
      if (!value || s.labels.size() >= max_labels) return std::nullopt;
      s.labels.emplace_back(std::move(*label), std::move(*value));
      skip_blanks(line, at);
      if (at < line.size() && line[at] == ',') {
        ++at;
        continue;
      }
      if (at < line.size() && line[at] == '}') {
        ++at;
        break;
      }
      return std::nullopt;
    }
  }
  std::vector<std::string> rest;
  while (true) {
    skip_blanks(line, at);
    if (at >= line.size()) break;
    const std::size_t start = at;
    while (at < line.size() && line[at] != ' ' && line[at] != '\t') ++at;
    rest.emplace_back(line.substr(start, at - start));
  }
  if (rest.empty() || rest.size() > 2 || !is_value(rest[0])) return std::nullopt;
  if (rest.size() == 2 && !is_timestamp(rest[1])) return std::nullopt;
  s.value = rest[0];
  if (rest.size() == 2) s.timestamp = rest[1];
  return s;
}

bool is_type(std::string_view t) {
  return t == "counter" || t == "gauge" || t == "histogram" || t == "summary" || t == "untyped";
}

// HELP's text: kept as written, but never a control character.
bool is_help_text(std::string_view t) {
  for (const unsigned char c : t)
    if (c < 0x20 || c == 0x7f) return false;
  return true;
}

std::string write_sample(const sample& s, const std::string& host) {
  std::string out = s.name + "{host=\"" + live::escape_label_value(host) + '"';
  // A value's control characters are escaped as printable() writes them, and what is not UTF-8
  // (the format's label values are) replaced: the text ends up on terminals too.
  for (const auto& l : s.labels)
    out += "," + l.first + "=\"" + live::escape_label_value(printable(l.second)) + '"';
  out += "} " + s.value;
  if (!s.timestamp.empty()) out += " " + s.timestamp;
  return out;
}

// One host's text as families (in first-seen order).
struct host_families {
  std::vector<std::string> order;
  std::map<std::string, family> by_name;
  std::size_t dropped = 0;

  family* get(const std::string& name) {
    auto it = by_name.find(name);
    if (it != by_name.end()) return &it->second;
    if (by_name.size() >= max_families_per_host) return nullptr;
    order.push_back(name);
    return &by_name[name];
  }

  // The family a sample belongs to: its own name, or a histogram's or summary's whose suffix it
  // bears (_bucket, _sum, _count).
  std::string family_of(const std::string& name) const {
    if (by_name.count(name)) return name;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string_view sfx(suffix);
      if (name.size() <= sfx.size() || name.compare(name.size() - sfx.size(), sfx.size(), sfx))
        continue;
      const auto base = by_name.find(name.substr(0, name.size() - sfx.size()));
      if (base == by_name.end()) continue;
      const auto& type = base->second.type;
      if (type == "histogram" || (type == "summary" && sfx != "_bucket")) return base->first;
    }
    return name;
  }
};

host_families read_host(const host_metrics& h) {
  host_families f;
  std::size_t samples = 0;
  std::string_view text(h.text);
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::size_t lead = 0;
    skip_blanks(line, lead);
    line.remove_prefix(lead);
    if (line.empty()) continue;
    if (line.size() > max_line_bytes || samples >= max_samples_per_host) {
      ++f.dropped;
      continue;
    }
    if (line[0] == '#') {
      std::size_t at = 1;
      skip_blanks(line, at);
      const bool help = line.substr(at, 5) == "HELP ";
      const bool type = line.substr(at, 5) == "TYPE ";
      if (!help && !type) continue;  // a comment
      at += 5;
      skip_blanks(line, at);
      auto name = read_name(line, at, true);
      if (!name) {
        ++f.dropped;
        continue;
      }
      skip_blanks(line, at);
      std::string_view rest = line.substr(at);
      while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t')) rest.remove_suffix(1);
      if (name->rfind(gateway_metric_prefix, 0) == 0 || (type && !is_type(rest)) ||
          (help && !is_help_text(rest))) {
        ++f.dropped;
        continue;
      }
      family* fam = f.get(*name);
      // The format has a family's TYPE before its first sample.
      if (fam == nullptr || (type && !fam->lines.empty())) {
        ++f.dropped;
        continue;
      }
      std::string& slot = help ? fam->help : fam->type;
      if (slot.empty()) slot = valid_utf8(rest);  // the first one; a second is ignored
      continue;
    }
    auto s = parse_sample(line);
    bool own_host_label = false;
    if (s)
      for (const auto& l : s->labels) own_host_label = own_host_label || l.first == "host";
    if (!s || own_host_label || s->name.rfind(gateway_metric_prefix, 0) == 0) {
      ++f.dropped;
      continue;
    }
    family* fam = f.get(f.family_of(s->name));
    if (fam == nullptr) {
      ++f.dropped;
      continue;
    }
    fam->lines.push_back(write_sample(*s, h.host));
    ++samples;
  }
  return f;
}

}  // namespace

merged_metrics merge_host_metrics(const std::vector<host_metrics>& hosts) {
  merged_metrics out;
  std::vector<std::string> order;
  std::map<std::string, family> merged;
  for (const auto& h : hosts) {
    host_families f = read_host(h);
    std::size_t dropped = f.dropped;
    for (const auto& name : f.order) {
      family& theirs = f.by_name[name];
      auto it = merged.find(name);
      if (it == merged.end()) {
        order.push_back(name);
        merged.emplace(name, std::move(theirs));
        continue;
      }
      family& ours = it->second;
      if (!ours.type.empty() && !theirs.type.empty() && ours.type != theirs.type) {
        dropped += theirs.lines.size();  // a family is of one type
        continue;
      }
      if (ours.type.empty()) ours.type = theirs.type;
      if (ours.help.empty()) ours.help = theirs.help;
      for (auto& line : theirs.lines) ours.lines.push_back(std::move(line));
    }
    out.dropped_lines[h.host] = dropped;
  }
  for (const auto& name : order) {
    const family& fam = merged[name];
    if (fam.lines.empty() && fam.help.empty() && fam.type.empty()) continue;
    if (!fam.help.empty()) out.text += "# HELP " + name + " " + fam.help + "\n";
    if (!fam.type.empty()) out.text += "# TYPE " + name + " " + fam.type + "\n";
    for (const auto& line : fam.lines) out.text += line + "\n";
  }
  return out;
}

}  // namespace orch::gateway
