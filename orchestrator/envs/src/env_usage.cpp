#include "orch/envs/env_usage.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

namespace orch::envs {
namespace {

namespace fs = std::filesystem;

// Only the directory is resolved: a venv's bin/python is a symlink out of the env, and the env
// is what is asked about.
bool is_inside(const fs::path& path, const fs::path& dir) {
  const fs::path file = canonical_or_normal(path.parent_path()) / path.filename();
  const auto rel = file.lexically_relative(canonical_or_normal(dir));
  return !rel.empty() && *rel.begin() != ".." && !rel.is_absolute();
}

// argv[0] and the executable of every readable process but this one: a venv's worker shows
// its env in argv[0] (its bin/python is a symlink out of the env), a pixi env's child in exe.
void add_processes(env_usage& usage) {
  std::error_code ec;
  const std::string self = std::to_string(::getpid());
  for (fs::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string pid = it->path().filename().string();
    if (pid.empty() || !std::all_of(pid.begin(), pid.end(), ::isdigit) || pid == self) continue;
    std::ifstream in(it->path() / "cmdline", std::ios::binary);
    std::string argv0;
    std::getline(in, argv0, '\0');
    const std::string who = "pid " + pid + " (" + fs::path(argv0).filename().string() + ")";
    if (!argv0.empty() && argv0.front() == '/') usage.users.push_back({argv0, who});
    std::error_code link_ec;
    const auto exe = fs::read_symlink(it->path() / "exe", link_ec);
    if (!link_ec && exe.is_absolute()) usage.users.push_back({exe, who});
  }
}

void add_servers(env_usage& usage, const std::vector<server_status>& servers) {
  for (const auto& [who, status] : servers) {
    if (!status || !status->is_object() || !status->contains("processes") ||
        !(*status)["processes"].is_array()) {
      usage.unknown.push_back(who + ": " +
                              (status ? "an unreadable status" : status.err().message));
      continue;
    }
    for (const auto& p : (*status)["processes"]) {
      if (!p.is_object() || !p.contains("env_path") || !p["env_path"].is_string()) continue;
      const std::string env = p.contains("process") && p["process"].is_string()
                                  ? p["process"].get<std::string>()
                                  : std::string("?");
      usage.users.push_back({p["env_path"].get<std::string>(), who + ", env " + env});
    }
  }
}

}  // namespace

fs::path canonical_or_normal(const fs::path& p) {
  std::error_code ec;
  auto c = fs::weakly_canonical(fs::absolute(p, ec), ec);
  return ec ? p.lexically_normal() : c;
}

std::vector<const env_user*> env_usage::inside(const fs::path& dir) const {
  std::vector<const env_user*> out;
  for (const auto& u : users) {
    if (is_inside(u.path, dir)) out.push_back(&u);
  }
  return out;
}

env_usage read_env_usage(const std::vector<server_status>& servers) {
  env_usage usage;
  add_servers(usage, servers);
  add_processes(usage);
  return usage;
}

void remember_deployment(const fs::path& workspace_root, const fs::path& deployment) {
  std::error_code ec;
  const fs::path file = workspace_root / "envs" / ".deployments";
  fs::create_directories(file.parent_path(), ec);
  const fs::path canonical = fs::weakly_canonical(fs::absolute(deployment, ec), ec);
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  ::flock(fd, LOCK_EX);  // two installs remembering at once append one line each
  const auto known = remembered_deployments(workspace_root);
  if (std::find(known.begin(), known.end(), canonical) == known.end()) {
    const std::string line = canonical.string() + "\n";
    [[maybe_unused]] const auto n = ::write(fd, line.data(), line.size());
  }
  ::close(fd);
}

std::vector<fs::path> remembered_deployments(const fs::path& workspace_root) {
  std::vector<fs::path> out;
  std::ifstream in(workspace_root / "envs" / ".deployments");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && std::find(out.begin(), out.end(), fs::path(line)) == out.end())
      out.emplace_back(line);
  }
  return out;
}

}  // namespace orch::envs
