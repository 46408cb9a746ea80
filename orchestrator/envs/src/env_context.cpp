#include "orch/envs/env_context.hpp"

#include <nlohmann/json.hpp>

#include "orch/runtime/comfyui_deployment.hpp"
#include "orch/runtime/host_stack_probe.hpp"
#include "orch/runtime/preflight.hpp"

namespace orch::envs {

namespace {

// A ComfyUI tree given where a deployment file is expected: the deployment the launcher and
// ComfyUI's process use for it (comfyui_deployment.hpp), so `comfy-orch install <root>` builds
// exactly the envs `launch` would start.
std::optional<manifests::deployment> load_deployment_or_tree(const std::string& file,
                                                             manifests::diagnostics& diags) {
  std::error_code ec;
  if (!std::filesystem::is_directory(file, ec)) return manifests::load_deployment(file, diags);
  if (!std::filesystem::is_directory(std::filesystem::path(file) / "comfy", ec)) {
    diags.error({file}, "", "this directory is not a ComfyUI tree (it has no comfy/)",
                "give a deployment file (comfy-orch.toml) or the directory holding ComfyUI's "
                "main.py");
    return std::nullopt;
  }
  auto text = runtime::comfyui_deployment(nlohmann::json{{"root", file}});
  if (!text) {
    diags.error({file}, "", text.err().message, "");
    return std::nullopt;
  }
  auto d = manifests::parse_deployment_text(text->text, text->label, diags);
  if (d) d->file = file;  // what its fix lines name: `comfy-orch install <root> <env>`
  return d;
}

}  // namespace

std::optional<env_context> load_env_context(const std::string& file,
                                            manifests::diagnostics& diags) {
  auto d = load_deployment_or_tree(file, diags);
  if (!d) return std::nullopt;
  d->packs.library_paths = runtime::deployment_library_directories(*d);
  env_context context;
  context.host_python = runtime::host_python(*d);
  if (auto stack = runtime::probe_host_stack(context.host_python)) {
    context.stack = *stack;
  } else {
    context.stack_problem = stack.err().message;
  }
  context.inventory =
      manifests::build_inventory(*d, diags, context.stack ? &*context.stack : nullptr);
  context.deployment = std::move(*d);
  return context;
}

}  // namespace orch::envs
