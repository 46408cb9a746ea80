#include "orch/manifests/env_workspace.hpp"

#include <algorithm>

namespace orch::manifests {
namespace fs = std::filesystem;

const char* to_string(env_state state) noexcept {
  switch (state) {
    case env_state::ok:
      return "ok";
    case env_state::missing:
      return "missing";
    case env_state::broken:
      return "broken";
  }
  return "missing";
}

namespace {

bool exists_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

bool exists_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

// Candidate env directories for a name: the exact name, then "<name>-py..." / "<name>_py..."
// (the ABI tag always starts with "py"), newest spelling first.
std::vector<fs::path> env_dir_candidates(const fs::path& envs, const std::string& name) {
  std::vector<fs::path> found;
  if (exists_dir(envs / name)) found.push_back(envs / name);
  std::vector<fs::path> tagged;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(envs, ec)) {
    const std::string dir = entry.path().filename().string();
    if (dir.size() > name.size() + 3 && dir.compare(0, name.size(), name) == 0 &&
        (dir[name.size()] == '_' || dir[name.size()] == '-') &&
        dir.compare(name.size() + 1, 2, "py") == 0 && exists_dir(entry.path())) {
      tagged.push_back(entry.path());
    }
  }
  std::sort(tagged.begin(), tagged.end());
  found.insert(found.end(), tagged.begin(), tagged.end());
  return found;
}

// The interpreter of a materialised env: pixi's default environment, or a plain venv.
fs::path interpreter_of(const fs::path& env_dir) {
  for (const auto& rel : {".pixi/envs/default/bin/python", "bin/python"}) {
    if (exists_file(env_dir / rel)) return env_dir / rel;
  }
  return {};
}

// "3.11" from <prefix>/lib/python3.11, the layout every CPython env has.
std::string python_version_of(const fs::path& interpreter) {
  const fs::path lib = interpreter.parent_path().parent_path() / "lib";
  std::error_code ec;
  std::string best;
  for (const auto& entry : fs::directory_iterator(lib, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("python3.", 0) == 0 && exists_dir(entry.path())) best = std::max(best, name);
  }
  return best.empty() ? std::string() : best.substr(6);
}

env_status locate_native(const node_dir& dir, const std::string& library,
                         const env_lookup& lookup) {
  env_status status;
  status.native = true;
  status.python_version = "native";
  const fs::path config_dir = dir.config.parent_path();
  const bool bare_name = library.find('/') == std::string::npos;
  if (!bare_name) {
    const fs::path path = (config_dir / library).lexically_normal();
    status.path = path;
    if (exists_file(path)) {
      status.state = env_state::ok;
    } else {
      status.state = exists_dir(path.parent_path()) ? env_state::broken : env_state::missing;
      status.detail = "node library " + path.string() +
                      " not found; build the pack or fix "
                      "[worker] library in " +
                      dir.config.string();
    }
    return status;
  }
  std::vector<fs::path> search = lookup.library_paths;
  search.push_back(config_dir);
  for (const auto& base : search) {
    if (exists_file(base / library)) {
      status.state = env_state::ok;
      status.path = (base / library).lexically_normal();
      return status;
    }
  }
  status.state = env_state::missing;
  status.path = library;
  std::string where;
  for (const auto& base : search) where += (where.empty() ? "" : ", ") + base.string();
  status.detail = "node library " + library + " not found in " + where +
                  "; build it (./scripts/build) or add its directory to [packs] library_paths";
  return status;
}

}  // namespace

env_status locate_env(const node_dir& dir, const env_manifest& manifest, const env_lookup& lookup) {
  if (manifest.worker.library) return locate_native(dir, *manifest.worker.library, lookup);

  env_status status;
  status.python_version = manifest.python.value_or("");
  if (lookup.python != nullptr) {
    if (auto it = lookup.python->find(dir.env_name); it != lookup.python->end()) {
      status.interpreter = it->second;
      status.path = it->second.parent_path().parent_path();
      status.state = exists_file(it->second) ? env_state::ok : env_state::broken;
      if (auto v = python_version_of(it->second); !v.empty()) status.python_version = v;
      if (status.state != env_state::ok) {
        status.detail = "interpreter " + it->second.string() +
                        " from [packs.python] does not exist; fix that line";
      }
      return status;
    }
  }
  const fs::path envs = lookup.workspace_root / "envs";
  const auto candidates = env_dir_candidates(envs, dir.env_name);
  for (const auto& candidate : candidates) {
    if (const auto python = interpreter_of(candidate); !python.empty()) {
      status.state = env_state::ok;
      status.path = candidate;
      status.interpreter = python;
      if (auto v = python_version_of(python); !v.empty()) status.python_version = v;
      return status;
    }
  }
  if (!candidates.empty()) {
    status.state = env_state::broken;
    status.path = candidates.front();
    status.detail = "env directory " + candidates.front().string() +
                    " has no interpreter (.pixi/envs/default/bin/python); rebuild it with "
                    "`comfy-env install` in " +
                    dir.pack_dir.string();
    return status;
  }
  status.state = env_state::missing;
  status.path = envs / dir.env_name;
  status.detail = "env '" + dir.env_name + "' is not materialised under " + envs.string() +
                  "; run `comfy-env install` in " + dir.pack_dir.string();
  return status;
}

}  // namespace orch::manifests
