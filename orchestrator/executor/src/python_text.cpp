#include "python_text.hpp"

#include <cmath>
#include <cstdlib>

namespace orch::orchestrator {

using nlohmann::json;

namespace {

std::string quoted(const std::string& s) {
  // repr() uses single quotes unless the text holds one and no double quote.
  const bool doubled = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = doubled ? '"' : '\'';
  std::string out(1, q);
  for (const char c : s) {
    if (c == q || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back(q);
  return out;
}

std::string python_repr(const json& v) {
  if (v.is_string()) return quoted(v.get<std::string>());
  if (v.is_array()) {
    std::string out = "[";
    for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + python_repr(v[i]);
    return out + "]";
  }
  if (v.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [key, item] : v.items()) {
      out += (first ? "" : ", ") + quoted(key) + ": " + python_repr(item);
      first = false;
    }
    return out + "}";
  }
  return python_str(v);
}

std::string type_name(const json& v) {
  if (v.is_null()) return "NoneType";
  if (v.is_array()) return "list";
  if (v.is_object()) return "dict";
  return "str";
}

}  // namespace

std::string python_number(double value, bool integer) {
  if (integer && std::fabs(value) < 9007199254740992.0)
    return std::to_string(static_cast<long long>(value));
  std::string text = json(value).dump();  // the shortest text that reads back, as repr()
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

std::string python_str(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_null()) return "None";
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  if (v.is_number_float()) return python_number(v.get<double>(), false);
  return python_repr(v);
}

std::string python_list_repr(const std::vector<std::string>& items) {
  return python_repr(json(items));
}

std::optional<std::string> conversion_failure(const json& value, bool integer) {
  if (value.is_number() || value.is_boolean()) {
    const double d = value.get<double>();
    if (integer && value.is_number_float() && d != std::floor(d))
      return python_str(value) + " is not a whole number";
    return std::nullopt;
  }
  if (value.is_string()) {
    const auto& s = value.get_ref<const std::string&>();
    char* end = nullptr;
    const double d = integer ? static_cast<double>(std::strtoll(s.c_str(), &end, 10))
                             : std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(d)) return std::nullopt;
    return integer ? "invalid literal for int() with base 10: " + quoted(s)
                   : "could not convert string to float: " + quoted(s);
  }
  return integer ? "int() argument must be a string, a bytes-like object or a real number, not '" +
                       type_name(value) + "'"
                 : "float() argument must be a string or a real number, not '" +
                       type_name(value) + "'";
}

}  // namespace orch::orchestrator
