#include "orch/manifests/env_workspace.hpp"

#include <algorithm>
#include <cctype>

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
    case env_state::stale:
      return "stale";
    case env_state::ambiguous:
      return "ambiguous";
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

// Candidate env directories for a name: the exact name, then "<name>-<abi tag>" and
// "<name>_<abi tag>" (looks_like_abi_tag), in name order.
std::vector<fs::path> env_dir_candidates(const fs::path& envs, const std::string& name) {
  std::vector<fs::path> found;
  if (exists_dir(envs / name)) found.push_back(envs / name);
  std::vector<fs::path> tagged;
  std::error_code ec;
  for (fs::directory_iterator it(envs, ec), end; !ec && it != end; it.increment(ec)) {
    const auto& entry = *it;
    const std::string dir = entry.path().filename().string();
    if (!tag_in_dir_name(dir, name).empty() && exists_dir(entry.path())) {
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
  int best = -1;  // the newest python3.<minor> by number: python3.11 is newer than python3.9
  for (fs::directory_iterator it(lib, ec), end; !ec && it != end; it.increment(ec)) {
    const auto& entry = *it;
    const std::string name = entry.path().filename().string();
    if (name.rfind("python3.", 0) != 0 || name.size() > 12 || !exists_dir(entry.path())) continue;
    const std::string minor = name.substr(8);
    if (minor.empty() || !std::all_of(minor.begin(), minor.end(), [](unsigned char c) {
          return std::isdigit(c) != 0;
        }))
      continue;
    best = std::max(best, std::stoi(minor));
  }
  return best < 0 ? std::string() : "3." + std::to_string(best);
}

// Whether `manifest_python` ("3.11", "3.11.9", "3") names another Python than `version` (the
// env's "3.<minor>"): compared as far as the manifest says, to the minor at most.
bool other_python(const std::string& manifest_python, const std::string& version) {
  const auto cut = [](const std::string& v) {
    const auto first = v.find('.');
    if (first == std::string::npos) return v;
    const auto second = v.find('.', first + 1);
    return second == std::string::npos ? v : v.substr(0, second);
  };
  const std::string wanted = cut(manifest_python);
  const std::string have = wanted.find('.') == std::string::npos ? cut(version).substr(0, 1)
                                                                 : cut(version);
  return wanted != have;
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

// One directory found for an env, read against the host's stack.
struct candidate {
  fs::path dir;
  fs::path interpreter;
  stamp_reading stamp;
  std::string tag;        // the stamp's tag, else the one in the directory's name
  bool foreign = false;   // built for another stack
  bool verified = false;  // a stamp with the host's tag
};

candidate read_candidate(const fs::path& dir, const std::string& env_name,
                         const std::string& host_tag) {
  candidate c{dir, interpreter_of(dir), read_env_stamp(dir), {}, false, false};
  if (c.stamp.stamp) {
    c.tag = c.stamp.stamp->abi_tag;
  } else {
    c.tag = tag_in_dir_name(dir.filename().string(), env_name);
  }
  if (!host_tag.empty() && !c.tag.empty()) {
    c.foreign = !same_abi_tag(c.tag, host_tag);
    c.verified = c.stamp.stamp && !c.foreign;
  }
  return c;
}

std::string stamp_note(const candidate& c) {
  if (!c.stamp.present) return "unstamped (not verified)";
  if (!c.stamp.stamp) return "stamp unreadable (" + c.stamp.problem + "); not verified";
  return "abi=" + c.stamp.stamp->abi_tag + (c.foreign ? "" : " verified");
}

// The candidate a worker runs in: a verified one, else an unverified one (comfy-env lets an
// unstamped env pass), never a foreign one. Among equals, the order of env_dir_candidates.
const candidate* choose(const std::vector<candidate>& found) {
  for (const auto& c : found) {
    if (!c.interpreter.empty() && c.verified) return &c;
  }
  for (const auto& c : found) {
    if (!c.interpreter.empty() && !c.foreign) return &c;
  }
  return nullptr;
}

std::string names_of(const std::vector<candidate>& found, const candidate* except) {
  std::string out;
  for (const auto& c : found) {
    if (&c == except) continue;
    out += (out.empty() ? "" : ", ") + c.dir.filename().string() +
           (c.tag.empty() ? std::string() : " (abi=" + c.tag + ")");
  }
  return out;
}

}  // namespace

std::string tag_in_dir_name(const std::string& dir_name, const std::string& env_name) {
  if (dir_name.size() <= env_name.size() + 1 || dir_name.compare(0, env_name.size(), env_name) != 0)
    return {};
  const char sep = dir_name[env_name.size()];
  if (sep != '_' && sep != '-') return {};
  const std::string tag = dir_name.substr(env_name.size() + 1);
  return looks_like_abi_tag(tag) ? tag : std::string();
}

env_status locate_env(const node_dir& dir, const env_manifest& manifest, const env_lookup& lookup) {
  if (manifest.worker.library) {
    auto status = locate_native(dir, *manifest.worker.library, lookup);
    status.runnable = status.state == env_state::ok;
    return status;
  }

  env_status status;
  status.python_version = manifest.python.value_or("");
  if (lookup.python != nullptr) {
    if (auto it = lookup.python->find(dir.env_name); it != lookup.python->end()) {
      status.interpreter = it->second;
      status.path = it->second.parent_path().parent_path();
      status.state = exists_file(it->second) ? env_state::ok : env_state::broken;
      status.runnable = status.state == env_state::ok;
      status.named = true;
      status.stamp_note = "named by [packs.python] (not verified)";
      if (auto v = python_version_of(it->second); !v.empty()) status.python_version = v;
      if (status.state != env_state::ok) {
        status.detail = "interpreter " + it->second.string() +
                        " from [packs.python] does not exist; fix that line";
      }
      return status;
    }
  }
  const std::string host_tag = lookup.stack ? abi_tag(*lookup.stack) : std::string();
  if (lookup.stack) {
    status.identity =
        derive_env(dir.env_name, manifest, *lookup.stack, lookup.platform, dir.config.parent_path())
            .identity;
  }
  const fs::path envs = lookup.workspace_root / "envs";
  std::vector<candidate> found;
  for (const auto& path : env_dir_candidates(envs, dir.env_name)) {
    found.push_back(read_candidate(path, dir.env_name, host_tag));
    status.candidates.push_back(path);
  }
  const std::string deployment =
      lookup.deployment.empty() ? std::string("<deployment>") : lookup.deployment.string();
  const std::string install = "run `comfy-orch install " + deployment + " " + dir.env_name + "`";
  if (found.empty()) {
    status.state = env_state::missing;
    status.path = envs / dir.env_name;
    status.detail =
        "env '" + dir.env_name + "' is not materialised under " + envs.string() + "; " + install;
    return status;
  }
  const candidate* chosen = choose(found);
  if (chosen == nullptr) {
    const auto foreign =
        std::find_if(found.begin(), found.end(), [](const candidate& c) { return c.foreign; });
    if (foreign != found.end()) {
      status.state = env_state::stale;
      status.path = foreign->dir;
      status.abi_tag = foreign->tag;
      status.stamp = foreign->stamp.stamp;
      status.stamp_note = stamp_note(*foreign);
      status.detail = "refusing " + foreign->dir.string() + ": built for abi=" + foreign->tag +
                      ", this host's stack is abi=" + host_tag + "; " + install;
      return status;
    }
    status.state = env_state::broken;
    status.path = found.front().dir;
    status.detail = "env directory " + found.front().dir.string() +
                    " has no interpreter (.pixi/envs/default/bin/python or bin/python); " + install;
    return status;
  }
  status.path = chosen->dir;
  status.interpreter = chosen->interpreter;
  status.abi_tag = chosen->tag;
  status.stamp = chosen->stamp.stamp;
  status.stamp_note = stamp_note(*chosen);
  status.runnable = true;
  if (auto v = python_version_of(chosen->interpreter); !v.empty()) status.python_version = v;
  status.state = env_state::ok;
  if (found.size() > 1) {
    status.state = env_state::ambiguous;
    status.detail = "several directories for env '" + dir.env_name + "': using " +
                    chosen->dir.filename().string() + " (" + status.stamp_note + "), not " +
                    names_of(found, chosen) +
                    "; remove the others (comfy-orch gc <deployment> --delete lists them)";
  }
  // An env whose interpreter is another Python than its manifest asks for (one built by hand,
  // or by a tool that ignored the line) runs the pack on the wrong ABI: rebuild it.
  if (manifest.python && !status.python_version.empty() &&
      other_python(*manifest.python, status.python_version)) {
    status.state = env_state::stale;
    status.detail = "built with Python " + status.python_version + ", and " +
                    dir.config.filename().string() + " asks for Python " + *manifest.python +
                    "; " + install + " to rebuild it";
    return status;
  }
  const auto& stamped_identity = chosen->stamp.stamp ? chosen->stamp.stamp->identity : std::nullopt;
  if (!status.identity.empty() && stamped_identity && *stamped_identity != status.identity) {
    status.state = env_state::stale;
    status.detail = "built from an earlier " + dir.config.filename().string() +
                    " (its dependencies changed since); " + install + " to rebuild it" +
                    (found.size() > 1 ? "; also " + status.detail : std::string());
  }
  return status;
}

std::vector<orphan_env> find_orphan_envs(const fs::path& workspace_root,
                                         const std::vector<fs::path>& claimed) {
  std::vector<orphan_env> out;
  std::error_code ec;
  for (fs::directory_iterator it(workspace_root / "envs", ec), end; !ec && it != end;
       it.increment(ec)) {
    const auto& entry = *it;
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.front() == '.' || !exists_dir(entry.path())) continue;
    if (std::find(claimed.begin(), claimed.end(), entry.path()) != claimed.end()) continue;
    const auto stamp = read_env_stamp(entry.path());
    out.push_back({entry.path(), stamp.stamp ? stamp.stamp->abi_tag : std::string()});
  }
  std::sort(out.begin(), out.end(),
            [](const orphan_env& a, const orphan_env& b) { return a.path < b.path; });
  return out;
}

}  // namespace orch::manifests
