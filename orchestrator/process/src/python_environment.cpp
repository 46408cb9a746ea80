#include "orch/process/python_environment.hpp"

namespace orch::process {

namespace {

constexpr const char* removed[] = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE"};
constexpr const char* no_user_site = "PYTHONNOUSERSITE";

}  // namespace

void scrub_python_environment(environment& env) {
  for (const char* name : removed) env.erase(name);
  env[no_user_site] = "1";
}

void scrub_python_environment(std::map<std::string, std::optional<std::string>>& changes) {
  for (const char* name : removed) changes[name] = std::nullopt;
  changes[no_user_site] = "1";
}

}  // namespace orch::process
