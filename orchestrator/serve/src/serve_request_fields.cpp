#include "orch/serve/serve_request_fields.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>

namespace orch::serve {

using nlohmann::json;

std::string uuid4() {
  static thread_local std::mt19937_64 gen{std::random_device{}()};
  const std::uint64_t a = gen();
  const std::uint64_t b = gen();
  char out[37];
  std::snprintf(out, sizeof out, "%08x-%04x-4%03x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xfff),
                static_cast<unsigned>(0x8000 | ((b >> 48) & 0x3fff)),
                static_cast<unsigned long long>(b & 0xffffffffffffull));
  return out;
}

std::vector<std::string> ids_of(const json& body) {
  std::vector<std::string> ids;
  if (auto it = body.find("delete"); it != body.end() && it->is_array())
    for (const auto& id : *it)
      if (id.is_string()) ids.push_back(id.get<std::string>());
  return ids;
}

bool flag(const json& body, const char* key) {
  const auto it = body.find(key);
  if (it == body.end()) return false;
  if (it->is_boolean()) return it->get<bool>();
  if (it->is_number()) return it->get<double>() != 0.0;
  if (it->is_string()) return !it->get_ref<const std::string&>().empty();
  if (it->is_array() || it->is_object()) return !it->empty();
  return false;  // null
}

std::optional<double> number_of(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (!v.is_string()) return std::nullopt;
  const auto& text = v.get_ref<const std::string&>();
  char* end = nullptr;
  const double d = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size()) return std::nullopt;
  return d;
}

std::optional<std::string> prompt_id_of(const json& body, bool& refused) {
  const auto it = body.find("prompt_id");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (it->is_string() && canonical_uuid(it->get_ref<const std::string&>()))
    return it->get<std::string>();
  refused = true;
  return std::nullopt;
}

bool canonical_uuid(std::string_view id) {
  if (id.size() != 36) return false;
  for (std::size_t i = 0; i < id.size(); ++i) {
    const char c = id[i];
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

json queue_number(double number) {
  if (number == std::floor(number) && std::fabs(number) < 9007199254740992.0)
    return static_cast<std::int64_t>(number);
  return number;
}

}  // namespace orch::serve
