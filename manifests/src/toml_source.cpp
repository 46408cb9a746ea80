#include "orch/manifests/toml_source.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

namespace orch::manifests {

std::optional<toml::table> parse_toml_text(std::string_view text, const std::string& display_name,
                                           diagnostics& diags) {
  try {
    return toml::parse(text, display_name);
  } catch (const toml::parse_error& e) {
    diags.error({display_name, e.source().begin.line, e.source().begin.column}, {},
                "not valid TOML: " + std::string(e.description()),
                "correct the TOML syntax at this position");
    return std::nullopt;
  }
}

std::optional<toml::table> parse_toml_file(const std::filesystem::path& file, diagnostics& diags) {
  const std::string name = file.string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) {
    diags.error({name, 0, 0}, {},
                std::filesystem::exists(file, ec) ? "not a regular file" : "file not found",
                "check the path");
    return std::nullopt;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    diags.error({name, 0, 0}, {}, "cannot be read", "check the file's permissions");
    return std::nullopt;
  }
  // Read at most one chunk past the cap: a file that grows after the check cannot make us read
  // more than that. Real manifests and deployments are a few KiB.
  std::string text;
  char chunk[64 * 1024];
  while (text.size() <= max_toml_file_bytes &&
         in.read(chunk, sizeof chunk).gcount() > 0) {
    text.append(chunk, static_cast<std::size_t>(in.gcount()));
  }
  if (text.size() > max_toml_file_bytes) {
    diags.error({name, 0, 0}, {},
                "is larger than " + std::to_string(max_toml_file_bytes >> 20) +
                    " MiB, which no deployment or manifest is",
                "check that the path names the TOML file");
    return std::nullopt;
  }
  return parse_toml_text(text, name, diags);
}

namespace {

// The earliest written position inside a node. A table created implicitly by a dotted header
// ([target.linux-64.dependencies] creates "target") has no region of its own, but its children do.
toml::source_position first_written(const toml::node& node) {
  if (node.source().begin.line != 0) return node.source().begin;
  toml::source_position best{};
  auto consider = [&best](const toml::node& child) {
    const auto p = first_written(child);
    if (p.line != 0 && (best.line == 0 || p < best)) best = p;
  };
  if (const auto* table = node.as_table()) {
    for (const auto& [k, v] : *table) consider(v);
  } else if (const auto* array = node.as_array()) {
    for (const auto& v : *array) consider(v);
  }
  return best;
}

}  // namespace

source_position position_of(const std::string& file, const toml::node& node,
                            const toml::node* fallback) {
  auto begin = first_written(node);
  if (begin.line == 0 && fallback != nullptr) begin = first_written(*fallback);
  return {file, begin.line, begin.column};
}

std::string describe(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string:
      return "a string (\"" + std::string(*node.value<std::string_view>()) + "\")";
    case toml::node_type::integer:
      return "an integer (" + std::to_string(*node.value<std::int64_t>()) + ")";
    case toml::node_type::floating_point: {
      std::ostringstream out;
      out << "a float (" << *node.value<double>() << ")";
      return out.str();
    }
    case toml::node_type::boolean:
      return *node.value<bool>() ? "a boolean (true)" : "a boolean (false)";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

std::optional<std::string> scalar_to_string(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string:
      return std::string(*node.value<std::string_view>());
    case toml::node_type::integer:
      return std::to_string(*node.value<std::int64_t>());
    case toml::node_type::floating_point: {
      std::ostringstream out;
      out << *node.value<double>();
      return out.str();
    }
    case toml::node_type::boolean:
      return std::string(*node.value<bool>() ? "1" : "0");
    default:
      return std::nullopt;
  }
}

std::string join_key(std::string_view prefix, std::string_view key) {
  if (prefix.empty()) return std::string(key);
  return std::string(prefix) + "." + std::string(key);
}

}  // namespace orch::manifests
