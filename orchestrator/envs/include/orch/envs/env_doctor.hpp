// env_doctor: `comfy-orch doctor` (docs/envs.md). Per Python env: its interpreter runs, the
// packages its manifest declares import (each in the env's own interpreter, with a timeout), its
// stamp matches this host's stack and derivation, and comfy_orch imports there. For the machine:
// the host device and its driver through the backend plugin, /dev/shm against the pinned pool,
// the cgroup limit, the plugins found, and the ComfyUI root. Every problem has its fix.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/envs/env_context.hpp"

namespace orch::envs {

struct doctor_check {
  std::string scope;   // "machine" or the env's name
  std::string check;   // "interpreter", "import", "stamp", "comfy_orch", "device", "shm", ...
  std::string status;  // "ok", "warning" or "error"
  std::string message;
  std::string fix;  // empty for ok
};

struct doctor_options {
  std::string deployment;  // as given, for the fix lines
  std::filesystem::path python_package_root;
  std::filesystem::path worker_library;
  std::string worker_executable;
  std::chrono::milliseconds import_timeout{60'000};
};

std::vector<doctor_check> check_python_env(const env_context& context,
                                           const manifests::env_entry& env,
                                           const doctor_options& options);
std::vector<doctor_check> check_machine(const env_context& context, const doctor_options& options);

nlohmann::json doctor_check_json(const doctor_check& check);

}  // namespace orch::envs
