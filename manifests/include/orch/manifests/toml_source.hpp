// Reading TOML with toml++ into diagnostics: syntax errors and source positions.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <toml++/toml.h>

#include "orch/manifests/diagnostic.hpp"

namespace orch::manifests {

// The largest TOML file read; a bigger one is an error before it is parsed.
inline constexpr std::size_t max_toml_file_bytes = std::size_t{4} << 20;

// Parses a TOML file. A missing, unreadable, not regular or oversized file, or a syntax error,
// adds one error (with the line and column toml++ reports) and returns nullopt.
std::optional<toml::table> parse_toml_file(const std::filesystem::path& file, diagnostics& diags);

// Parses TOML text; `display_name` is used as the file name in diagnostics.
std::optional<toml::table> parse_toml_text(std::string_view text, const std::string& display_name,
                                           diagnostics& diags);

// Where `node` was written. Tables created implicitly by a dotted header have no region of their
// own; `fallback` (usually the parent) is used then.
source_position position_of(const std::string& file, const toml::node& node,
                            const toml::node* fallback = nullptr);

// "a string", "an integer", "a float (3.1)", "a table", ...: for "expected X, got Y" messages.
std::string describe(const toml::node& node);

// Scalars (string, integer, float, boolean) rendered as the string a process environment gets:
// booleans as "1"/"0" (comfy-env's convention), numbers as written. nullopt for arrays/tables.
std::optional<std::string> scalar_to_string(const toml::node& node);

// A dotted key for messages: join("host", "sim") == "host.sim"; join("", "x") == "x".
std::string join_key(std::string_view prefix, std::string_view key);

}  // namespace orch::manifests
