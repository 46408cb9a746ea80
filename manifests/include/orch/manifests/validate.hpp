// `comfy-orch validate`: a file's role is decided by the ending of its name, as comfy-env does,
// so corpus files validate under their own names.
#pragma once

#include <filesystem>

#include "orch/manifests/deployment.hpp"
#include "orch/manifests/diagnostic.hpp"

namespace orch::manifests {

enum class file_role { deployment, env_manifest, root_manifest };

const char* to_string(file_role role) noexcept;

// "comfy-env-root.toml" ending: root manifest; "comfy-env.toml" ending: env manifest; otherwise
// a deployment.
file_role role_of(const std::filesystem::path& file);

// Validates one file by its role. A deployment is validated with its packs: each pack's
// manifests and the env-name collisions are checked too.
diagnostics validate_file(const std::filesystem::path& file,
                          const environment_reader& env = environment_reader{});

}  // namespace orch::manifests
