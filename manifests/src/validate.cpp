#include "orch/manifests/validate.hpp"

#include "orch/manifests/env_manifest.hpp"
#include "orch/manifests/inventory.hpp"
#include "orch/manifests/root_manifest.hpp"

namespace orch::manifests {

const char* to_string(file_role role) noexcept {
  switch (role) {
    case file_role::deployment:
      return "deployment";
    case file_role::env_manifest:
      return "env manifest";
    case file_role::root_manifest:
      return "root manifest";
  }
  return "deployment";
}

file_role role_of(const std::filesystem::path& file) {
  const std::string name = file.filename().string();
  auto ends_with = [&name](const std::string& suffix) {
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with(root_manifest_name)) return file_role::root_manifest;
  if (ends_with(env_manifest_name)) return file_role::env_manifest;
  return file_role::deployment;
}

diagnostics validate_file(const std::filesystem::path& file, const environment_reader& env) {
  diagnostics diags;
  switch (role_of(file)) {
    case file_role::root_manifest:
      (void)load_root_manifest(file, diags);
      break;
    case file_role::env_manifest:
      (void)load_env_manifest(file, diags);
      break;
    case file_role::deployment:
      if (auto d = load_deployment(file, diags, env)) (void)build_inventory(*d, diags);
      break;
  }
  return diags;
}

}  // namespace orch::manifests
