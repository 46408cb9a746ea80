// GET /object_info and /object_info/{class}: ComfyUI's shape of each node class the workers'
// ready messages declared (runtime::object_info makes one entry; the catalogue holds them all).
#include <string_view>

#include "orch/runtime/node_catalogue.hpp"
#include "orch/serve/json_reply.hpp"
#include "orch/serve/serve_api.hpp"

namespace orch::serve {

using nlohmann::json;

http_reply comfy_api::object_info(const std::string& path) const {
  const auto& classes = host_.catalogue().classes();
  constexpr std::string_view one_class = "/object_info/";
  if (path.size() > one_class.size()) {
    const std::string name = path.substr(one_class.size());
    const auto it = classes.find(name);
    if (it == classes.end()) return json_reply(json::object());  // ComfyUI answers {} too
    return json_reply({{name, runtime::object_info(it->second)}});
  }
  json out = json::object();
  for (const auto& [name, cls] : classes) out[name] = runtime::object_info(cls);
  return json_reply(out);
}

}  // namespace orch::serve
