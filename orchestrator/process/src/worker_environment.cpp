#include "orch/process/worker_environment.hpp"

extern char** environ;

namespace orch::process {

environment build_worker_environment(
    const environment& operator_env,
    const std::vector<std::pair<std::string, std::string>>& pack_env_vars,
    const environment& host_derived) {
  environment env = operator_env;
  for (const auto& [name, value] : pack_env_vars) env[name] = value;
  for (const auto& [name, value] : host_derived) env.emplace(name, value);  // only where absent
  return env;
}

environment current_environment() {
  environment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const auto eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

std::vector<std::string> to_envp(const environment& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [name, value] : env) out.push_back(name + "=" + value);
  return out;
}

}  // namespace orch::process
