#include "hidden_values.hpp"

#include <spdlog/spdlog.h>

#include "orch/ipc/frame.hpp"
#include "orch/ipc/message.hpp"

namespace orch::executor {

namespace {

// The value itself, or null (and a warning) when a call body could not carry it.
nlohmann::json carried(nlohmann::json value, const char* kind, const std::string& node_id) {
  constexpr std::size_t above = 2;  // the body, then its "hidden" object
  if (above + nesting_depth(value) > ipc::max_body_depth) {
    spdlog::warn("node {}: {} nests deeper than a call can carry ({} levels); the node gets None",
                 node_id, kind, ipc::max_body_depth - above);
    return nullptr;
  }
  const std::size_t size =
      value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size();
  if (size > ipc::default_max_body / 4) {
    spdlog::warn(
        "node {}: {} is {} bytes, more than a call carries of it ({}); the node gets "
        "None",
        node_id, kind, size, ipc::default_max_body / 4);
    return nullptr;
  }
  return value;
}

}  // namespace

nlohmann::json hidden_values(const prompt& p, const runtime::node_class& cls,
                             const std::string& node_id) {
  nlohmann::json hidden = nlohmann::json::object();
  if (cls.hidden.count("PROMPT") || cls.hidden.count("DYNPROMPT") ||
      cls.hidden.count("EXTRA_PNGINFO")) {
    hidden = {{"PROMPT", carried(prompt_document(p), "PROMPT", node_id)},
              {"EXTRA_PNGINFO", carried(p.extra_pnginfo, "EXTRA_PNGINFO", node_id)}};
  }
  // Not one of ComfyUI's hidden kinds: PromptServer.instance.client_id in the worker
  // (docs/comfyui.md, "A pack's web side").
  if (!p.client_id.empty()) hidden["client_id"] = p.client_id;
  return hidden;
}

}  // namespace orch::executor
