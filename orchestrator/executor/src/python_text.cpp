#include "python_text.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace orch::executor {

using nlohmann::json;

namespace {

std::string quoted(const std::string& s) {
  // repr() uses single quotes unless the text holds one and no double quote, and escapes the
  // quote, the backslash and control characters.
  const bool doubled = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = doubled ? '"' : '\'';
  static const char* hex = "0123456789abcdef";
  std::string out(1, q);
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == q || c == '\\') {
      out += {'\\', c};
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      out += {'\\', 'x', hex[u >> 4], hex[u & 15]};
    } else {
      out.push_back(c);
    }
  }
  out.push_back(q);
  return out;
}

// repr() of a float: the shortest digits that read back, positional for exponents from -4 to
// 15, else scientific with a two-digit exponent at least (1e+16, 1e-05).
std::string float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  const std::string sci(buf, r.ptr);  // "-1.2345e+15"
  const auto e = sci.find('e');
  const bool negative = sci[0] == '-';
  std::string digits;
  for (std::size_t i = negative ? 1 : 0; i < e; ++i)
    if (sci[i] != '.') digits.push_back(sci[i]);
  const int exponent = std::stoi(sci.substr(e + 1));
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0)
      return out + "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
    const auto whole = static_cast<std::size_t>(exponent) + 1;
    if (digits.size() <= whole)
      return out + digits + std::string(whole - digits.size(), '0') + ".0";
    return out + digits.substr(0, whole) + "." + digits.substr(whole);
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  const std::string magnitude = std::to_string(exponent < 0 ? -exponent : exponent);
  return out + "e" + (exponent < 0 ? "-" : "+") + (magnitude.size() < 2 ? "0" : "") + magnitude;
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
  return float_repr(value);
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
  if (value.is_boolean()) return std::nullopt;  // int(True) is 1
  if (value.is_number()) {
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

}  // namespace orch::executor
