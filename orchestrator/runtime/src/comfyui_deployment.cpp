#include "orch/runtime/comfyui_deployment.hpp"

#include <cstdio>
#include <filesystem>
#include <sstream>

#include "orch/runtime/errc.hpp"

namespace orch::runtime {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A TOML basic string: quotes, backslashes and control characters escaped; the parser checks
// the rest (UTF-8 included).
std::string toml_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

error bad(const std::string& field, const std::string& must) {
  return error{runtime_errc::invalid_description, "the ComfyUI description's " + field + " must be " + must};
}

}  // namespace

result<comfyui_deployment_text> comfyui_deployment(const json& d) {
  if (!d.is_object()) return bad("top level", "a JSON object with at least \"root\"");
  for (const auto& [key, value] : d.items()) {
    if (key != "root" && key != "custom_nodes" && key != "device" && key != "protocol_level" &&
        key != "memory")
      return bad("key \"" + key + "\"", "one of root, custom_nodes, device, protocol_level, memory");
  }
  const auto text_field = [&](const char* key) -> result<std::string> {
    const auto it = d.find(key);
    if (it == d.end()) return std::string{};
    if (!it->is_string() || it->get_ref<const std::string&>().empty())
      return bad(key, "a non-empty string");
    return it->get<std::string>();
  };
  auto root = text_field("root");
  if (!root) return root.err();
  if (root->empty()) return bad("root", "the ComfyUI tree (the directory holding main.py)");
  const fs::path tree = fs::absolute(*root).lexically_normal();
  auto custom_nodes = text_field("custom_nodes");
  if (!custom_nodes) return custom_nodes.err();
  auto device = text_field("device");
  if (!device) return device.err();

  std::ostringstream t;
  t << "[host]\n";
  if (!device->empty()) t << "device = " << toml_string(*device) << '\n';
  if (const auto it = d.find("protocol_level"); it != d.end()) {
    if (!it->is_number_integer()) return bad("protocol_level", "an integer (1 to 4)");
    t << "protocol_level = " << it->get<std::int64_t>() << '\n';  // the parser checks 1..4
  }
  t << "\n[memory]\n";
  if (const auto it = d.find("memory"); it != d.end()) {
    if (!it->is_object()) return bad("memory", "an object of [memory] keys");
    for (const auto& [key, value] : it->items()) {
      // Keys are checked by the parser (an unknown one is an error naming it); written bare
      // only when they are plain names, as every [memory] key is.
      const bool bare = !key.empty() && key.find_first_not_of("abcdefghijklmnopqrstuvwxyz_0123456"
                                                              "789") == std::string::npos;
      t << (bare ? key : toml_string(key)) << " = ";
      if (value.is_boolean()) {
        t << (value.get<bool>() ? "true" : "false");
      } else if (value.is_number_unsigned() || value.is_number_integer()) {
        t << value.dump();
      } else if (value.is_string()) {
        t << toml_string(value.get<std::string>());
      } else {
        return bad("memory." + key, "a boolean, an integer or a string");
      }
      t << '\n';
    }
  }
  t << "\n[comfyui]\nroot = " << toml_string(tree.string()) << "\n\n[packs]\ncustom_nodes = "
    << toml_string(custom_nodes->empty() ? (tree / "custom_nodes").string() : *custom_nodes)
    << '\n';
  return comfyui_deployment_text{t.str(), (tree / "(ComfyUI host)").string()};
}

}  // namespace orch::runtime
