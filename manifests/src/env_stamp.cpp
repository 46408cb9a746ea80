#include "orch/manifests/env_stamp.hpp"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace orch::manifests {
namespace {

using nlohmann::json;

constexpr std::uintmax_t max_stamp_bytes = 64 * 1024;

// A string field, or nullopt when absent or null; anything else is a problem.
bool optional_text(const json& doc, const char* key, std::optional<std::string>& out,
                   std::string& problem) {
  const auto it = doc.find(key);
  if (it == doc.end() || it->is_null()) return true;
  if (!it->is_string()) {
    problem = std::string("field '") + key + "' is " + it->type_name() + ", not a string";
    return false;
  }
  out = it->get<std::string>();
  return true;
}

}  // namespace

stamp_reading read_env_stamp(const std::filesystem::path& env_dir) {
  stamp_reading reading;
  const auto file = env_dir / stamp_file_name;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) return reading;
  reading.present = true;
  const auto size = std::filesystem::file_size(file, ec);
  if (ec || size > max_stamp_bytes) {
    reading.problem = ec ? ec.message() : "larger than 64 KiB";
    return reading;
  }
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  const json doc = json::parse(text.str(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    reading.problem = "not a JSON object";
    return reading;
  }
  env_stamp stamp;
  std::optional<std::string> tag;
  std::optional<std::string> provenance;
  if (!optional_text(doc, "abi_tag", tag, reading.problem) ||
      !optional_text(doc, "comfy_env_version", stamp.comfy_env_version, reading.problem) ||
      !optional_text(doc, "torch_pin", stamp.torch_pin, reading.problem) ||
      !optional_text(doc, "provenance", provenance, reading.problem) ||
      !optional_text(doc, "pixi_lock_sha256", stamp.pixi_lock_sha256, reading.problem) ||
      !optional_text(doc, "comfy_orch_version", stamp.comfy_orch_version, reading.problem) ||
      !optional_text(doc, "backend", stamp.backend, reading.problem) ||
      !optional_text(doc, "identity", stamp.identity, reading.problem)) {
    return reading;
  }
  if (!tag || tag->empty()) {
    reading.problem = "no abi_tag";
    return reading;
  }
  stamp.abi_tag = *tag;
  stamp.provenance = provenance.value_or("unknown");
  reading.stamp = std::move(stamp);
  return reading;
}

std::string env_stamp_text(const env_stamp& stamp) {
  auto nullable = [](const std::optional<std::string>& v) { return v ? json(*v) : json(nullptr); };
  json doc = json::object();
  doc["comfy_env_version"] = nullable(stamp.comfy_env_version);
  doc["abi_tag"] = stamp.abi_tag;
  doc["torch_pin"] = nullable(stamp.torch_pin);
  doc["provenance"] = stamp.provenance;
  doc["pixi_lock_sha256"] = nullable(stamp.pixi_lock_sha256);
  doc["comfy_orch_version"] = nullable(stamp.comfy_orch_version);
  doc["backend"] = nullable(stamp.backend);
  doc["identity"] = nullable(stamp.identity);
  return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace orch::manifests
