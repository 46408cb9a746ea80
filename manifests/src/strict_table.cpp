#include "strict_table.hpp"

#include <algorithm>
#include <numeric>

#include "orch/manifests/toml_source.hpp"
#include "orch/manifests/units.hpp"

namespace orch::manifests::detail {
namespace {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

strict_table::strict_table(const toml::table* table, std::string prefix, std::string file,
                           diagnostics& diags, const toml::node* parent)
    : table_(table),
      prefix_(std::move(prefix)),
      file_(std::move(file)),
      diags_(diags),
      parent_(parent) {}

const toml::node* strict_table::get(const std::string& key) {
  known_.insert(key);
  if (table_ == nullptr) return nullptr;
  return table_->get(key);
}

source_position strict_table::where(const std::string& key) const {
  if (table_ != nullptr) {
    if (const auto* node = table_->get(key)) return position_of(file_, *node, table_);
    return position_of(file_, *table_, parent_);
  }
  if (parent_ != nullptr) return position_of(file_, *parent_);
  return {file_, 0, 0};
}

void strict_table::error(const std::string& key, std::string message, std::string fix) {
  diags_.error(where(key), join_key(prefix_, key), std::move(message), std::move(fix));
}

void strict_table::type_error(const std::string& key, const toml::node& node,
                              const std::string& expected, std::string fix) {
  error(key, "expected " + expected + ", got " + describe(node), std::move(fix));
}

std::optional<std::string> strict_table::string(const std::string& key) {
  const auto* node = get(key);
  if (node == nullptr) return std::nullopt;
  if (auto v = node->value_exact<std::string>()) return *v;
  type_error(key, *node, "a string", "quote the value: " + key + " = \"...\"");
  return std::nullopt;
}

std::optional<bool> strict_table::boolean(const std::string& key) {
  const auto* node = get(key);
  if (node == nullptr) return std::nullopt;
  if (auto v = node->value_exact<bool>()) return *v;
  type_error(key, *node, "true or false", "write " + key + " = true");
  return std::nullopt;
}

std::optional<std::int64_t> strict_table::integer(const std::string& key, std::int64_t min,
                                                  std::int64_t max) {
  const auto* node = get(key);
  if (node == nullptr) return std::nullopt;
  const auto v = node->value_exact<std::int64_t>();
  if (!v) {
    type_error(key, *node, "an integer", "write " + key + " = " + std::to_string(min));
    return std::nullopt;
  }
  if (*v < min || *v > max) {
    error(key,
          std::to_string(*v) + " is out of range [" + std::to_string(min) + ", " +
              std::to_string(max) + "]",
          "choose a value in that range");
    return std::nullopt;
  }
  return v;
}

std::optional<std::uint64_t> strict_table::size(const std::string& key) {
  const auto* node = get(key);
  if (node == nullptr) return std::nullopt;
  const std::string fix = "write a byte count or a size such as " + key + " = \"512MiB\"";
  if (const auto n = node->value_exact<std::int64_t>()) {
    if (*n >= 0) return static_cast<std::uint64_t>(*n);
    error(key, "a size cannot be negative", fix);
    return std::nullopt;
  }
  if (const auto text = node->value_exact<std::string>()) {
    if (const auto bytes = parse_size(*text)) return bytes;
    if (size_overflows(*text)) {
      error(key, "\"" + *text + "\" overflows: sizes stop below 16 EiB (2^64 bytes)", fix);
      return std::nullopt;
    }
    error(key, "\"" + *text + "\" is not a size (units: B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)",
          fix);
    return std::nullopt;
  }
  type_error(key, *node, "a size", fix);
  return std::nullopt;
}

std::optional<std::chrono::milliseconds> strict_table::duration(const std::string& key) {
  const auto* node = get(key);
  if (node == nullptr) return std::nullopt;
  const std::string fix = "write seconds or a duration such as " + key + " = \"250ms\"";
  if (node->is_integer() || node->is_floating_point()) {
    const double seconds = *node->value<double>();
    if (seconds >= 0 && seconds < 1e12) {
      return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0 + 0.5));
    }
    error(key, "a duration must be between 0 and 10^12 seconds", fix);
    return std::nullopt;
  }
  if (const auto text = node->value_exact<std::string>()) {
    if (const auto d = parse_duration(*text)) return d;
    error(key, "\"" + *text + "\" is not a duration (units: ms, s, m, h)", fix);
    return std::nullopt;
  }
  type_error(key, *node, "a duration", fix);
  return std::nullopt;
}

std::optional<std::vector<std::string>> strict_table::string_list(const std::string& key) {
  const auto* node = get(key);
  if (node == nullptr) return std::nullopt;
  const auto* array = node->as_array();
  if (array == nullptr) {
    type_error(key, *node, "an array of strings", "write " + key + " = [\"...\"]");
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (const auto& item : *array) {
    if (auto s = item.value_exact<std::string>()) {
      out.push_back(*s);
    } else {
      diags_.error(position_of(file_, item, node), join_key(prefix_, key),
                   "expected strings in the array, got " + describe(item), "quote each entry");
      return std::nullopt;
    }
  }
  return out;
}

const toml::table* strict_table::table(const std::string& key) {
  const auto* node = get(key);
  if (node == nullptr) return nullptr;
  if (const auto* t = node->as_table()) return t;
  type_error(key, *node, "a table", "write it as [" + join_key(prefix_, key) + "]");
  return nullptr;
}

void strict_table::finish() {
  if (table_ == nullptr) return;
  for (const auto& [k, v] : *table_) {
    const std::string key(k.str());
    if (known_.count(key) != 0) continue;
    std::string best;
    std::size_t best_distance = 3;  // suggest only close matches
    for (const auto& candidate : known_) {
      const auto d = edit_distance(key, candidate);
      if (d < best_distance) {
        best = candidate;
        best_distance = d;
      }
    }
    std::string known_list;
    for (const auto& candidate : known_) known_list += (known_list.empty() ? "" : ", ") + candidate;
    diags_.error(position_of(file_, v, table_), join_key(prefix_, key),
                 "unknown key (known here: " + known_list + ")",
                 best.empty() ? "remove it" : "did you mean '" + best + "'?");
  }
}

}  // namespace orch::manifests::detail
