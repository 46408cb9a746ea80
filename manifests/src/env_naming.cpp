#include "orch/manifests/env_naming.hpp"

#include <array>

namespace orch::manifests {
namespace {

bool is_kept(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

std::filesystem::path resolved(const std::filesystem::path& p) {
  std::error_code ec;
  auto r = std::filesystem::weakly_canonical(std::filesystem::absolute(p), ec);
  return ec ? std::filesystem::absolute(p).lexically_normal() : r;
}

// The last component of a path, ignoring a trailing separator ("a/b/" -> "b").
std::string last_component(const std::filesystem::path& p) {
  auto normal = p.lexically_normal();
  auto name = normal.filename().string();
  if (name.empty()) name = normal.parent_path().filename().string();
  return name;
}

}  // namespace

std::string sanitize_env_part(std::string_view text) {
  std::string lowered;
  lowered.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    // Python's str.lower() maps U+212A KELVIN SIGN to ASCII 'k' and U+0130 to "i" + U+0307; every
    // other non-ASCII character stays outside [a-z0-9-] and is replaced below either way.
    if (c == 0xE2 && i + 2 < text.size() && static_cast<unsigned char>(text[i + 1]) == 0x84 &&
        static_cast<unsigned char>(text[i + 2]) == 0xAA) {
      lowered += 'k';
      i += 2;
    } else if (c == 0xC4 && i + 1 < text.size() &&
               static_cast<unsigned char>(text[i + 1]) == 0xB0) {
      lowered += "i\xCC\x87";
      i += 1;
    } else if (c >= 'A' && c <= 'Z') {
      lowered += static_cast<char>(c - 'A' + 'a');
    } else {
      lowered += static_cast<char>(c);
    }
  }
  std::string out;
  out.reserve(lowered.size());
  for (char c : lowered) {
    const char mapped = is_kept(c) ? c : '-';
    if (mapped == '-' && !out.empty() && out.back() == '-') continue;
    out += mapped;
  }
  const auto first = out.find_first_not_of('-');
  if (first == std::string::npos) return {};
  const auto last = out.find_last_not_of('-');
  return out.substr(first, last - first + 1);
}

std::string_view strip_comfyui_prefix(std::string_view pack_name) {
  static constexpr std::array<std::string_view, 4> prefixes = {"ComfyUI-", "ComfyUI_", "comfyui-",
                                                               "comfyui_"};
  for (auto prefix : prefixes) {
    if (pack_name.substr(0, prefix.size()) == prefix) return pack_name.substr(prefix.size());
  }
  return pack_name;
}

std::string env_name(const std::filesystem::path& pack_dir,
                     const std::filesystem::path& config_dir) {
  const std::string plugin = sanitize_env_part(strip_comfyui_prefix(last_component(pack_dir)));
  const auto pack = resolved(pack_dir);
  const auto config = resolved(config_dir);
  if (pack == config) return plugin;

  std::string suffix_source;
  const auto rel = config.lexically_relative(pack);
  const bool inside = !rel.empty() && *rel.begin() != "..";
  suffix_source = inside ? last_component(rel) : last_component(config_dir);
  const std::string suffix = sanitize_env_part(suffix_source);
  if (suffix.empty()) return plugin;
  if (plugin.empty()) return suffix;
  return plugin + "-" + suffix;
}

}  // namespace orch::manifests
