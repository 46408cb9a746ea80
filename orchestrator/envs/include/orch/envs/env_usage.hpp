// env_usage: which env directories running workers use, for `comfy-orch gc` (docs/envs.md).
// Two sources, both read: what every running `serve` of this user answered over its control
// socket (each worker's env_path in its status; the CLI asks them), and every process of this
// machine whose executable path (argv[0]) lies inside an env directory, which covers `run`, a
// ComfyUI host and anything else that started an env's interpreter.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/support/result.hpp"

namespace orch::envs {

struct env_user {
  std::filesystem::path path;  // the interpreter or library in use
  std::string who;             // "serve pid 123 (deployment), env foo" or "pid 456 (python)"
};

struct env_usage {
  std::vector<env_user> users;
  std::vector<std::string> unknown;  // servers that did not answer: what they use is not known
  // The users inside `dir`; empty when none.
  std::vector<const env_user*> inside(const std::filesystem::path& dir) const;
};

// What one running `serve` answered to {"get": "status"}, or why there is no answer.
struct server_status {
  std::string who;  // "serve pid 123 (deployment)"
  result<nlohmann::json> status;
};

env_usage read_env_usage(const std::vector<server_status>& servers);

// `p` made absolute and canonical as far as it exists (symlinks resolved); lexically normal
// when it cannot be.
std::filesystem::path canonical_or_normal(const std::filesystem::path& p);

// Registers `deployment` (canonical) in <workspace>/envs/.deployments, the list `gc --all-known`
// reads; a deployment already listed is not added twice.
void remember_deployment(const std::filesystem::path& workspace_root,
                         const std::filesystem::path& deployment);
std::vector<std::filesystem::path> remembered_deployments(
    const std::filesystem::path& workspace_root);

}  // namespace orch::envs
