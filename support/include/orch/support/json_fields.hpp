// Reading fields a worker sent without trusting their types: a missing field or one of another
// type reads as empty or 0, never as an exception (workers are processes we do not trust).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace orch {

inline std::string text_field(const nlohmann::json& j, const char* key) {
  auto it = j.is_object() ? j.find(key) : j.end();
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The field `key` of an object; null when absent, or when `j` is no object.
inline const nlohmann::json& field_or_null(const nlohmann::json& j, const char* key) {
  static const nlohmann::json none;
  auto it = j.is_object() ? j.find(key) : j.end();
  return it != j.end() ? *it : none;
}

// The field `key` when it is an object, else an empty object.
inline const nlohmann::json& object_field(const nlohmann::json& j, const char* key) {
  static const nlohmann::json empty = nlohmann::json::object();
  auto it = j.is_object() ? j.find(key) : j.end();
  return it != j.end() && it->is_object() ? *it : empty;
}

inline std::uint64_t unsigned_field(const nlohmann::json& j, const char* key) {
  auto it = j.is_object() ? j.find(key) : j.end();
  return it != j.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0;
}

// A failed call's traceback (error.traceback): its string entries, at most 256; anything else
// reads as no traceback.
inline nlohmann::json traceback_lines(const nlohmann::json& error) {
  nlohmann::json lines = nlohmann::json::array();
  auto it = error.is_object() ? error.find("traceback") : error.end();
  if (it == error.end() || !it->is_array()) return lines;
  for (const auto& line : *it) {
    if (line.is_string() && lines.size() < 256) lines.push_back(line);
  }
  return lines;
}

}  // namespace orch
