// comfy-env's env naming rule, reproduced exactly (docs/references.md, comfy-env §1.4;
// get_env_name at comfy-env 507d341), so an env materialised by comfy-env is
// found under the same name.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace orch::manifests {

// Step 2: lower-case, every run of characters outside [a-z0-9-] becomes one '-', runs of '-'
// collapse, and '-' is trimmed at both ends. Input is UTF-8; lower-casing follows Python's
// str.lower() where it can turn a non-ASCII character into an ASCII one.
std::string sanitize_env_part(std::string_view text);

// Step 1: removes the first matching prefix of "ComfyUI-", "ComfyUI_", "comfyui-", "comfyui_"
// (case-sensitive, at most one).
std::string_view strip_comfyui_prefix(std::string_view pack_name);

// The env name of the config directory `config_dir` in pack `pack_dir`. The pack's own name is
// taken as given (not symlink-resolved); the root-config check and the relative path use
// resolved paths, as comfy-env does. Either directory may be missing on disk, in which case it
// is compared lexically.
std::string env_name(const std::filesystem::path& pack_dir,
                     const std::filesystem::path& config_dir);

}  // namespace orch::manifests
