// env.stamp.json: what an env was built from and for (docs/references.md, comfy-env §1.4). The
// fields comfy-env writes are kept with their meaning, so comfy-env and comfy-orch read each
// other's stamps; comfy-orch adds its own version, the backend, and the derivation identity
// (env_derivation.hpp), which is what decides whether a manifest change needs a rebuild.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace orch::manifests {

inline constexpr const char* stamp_file_name = "env.stamp.json";

struct env_stamp {
  std::optional<std::string> comfy_env_version;  // set by comfy-env; null in ours
  std::string abi_tag;
  std::optional<std::string> torch_pin;
  std::string provenance;
  std::optional<std::string> pixi_lock_sha256;
  std::optional<std::string> comfy_orch_version;  // present only in stamps comfy-orch wrote
  std::optional<std::string> backend;             // pixi, uv or venv
  std::optional<std::string> identity;            // "orch1:<sha256>" of the derivation
};

struct stamp_reading {
  bool present = false;
  std::optional<env_stamp> stamp;  // absent when the file is missing or unreadable
  std::string problem;             // why an existing file could not be read
};

// Reads <env_dir>/env.stamp.json. A stamp is untrusted input: wrong types, a size over 64 KiB
// or broken JSON give `problem`, never an exception.
stamp_reading read_env_stamp(const std::filesystem::path& env_dir);

// The stamp as JSON text, the form comfy-env writes (two-space indent, trailing newline).
std::string env_stamp_text(const env_stamp& stamp);

}  // namespace orch::manifests
