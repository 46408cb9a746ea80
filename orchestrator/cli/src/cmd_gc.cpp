// comfy-orch gc <deployment>|--all-known [--delete]: the env directories nothing needs any more
// (orphans, envs built for another stack or from an older manifest, the unused spellings of an
// ambiguous env), with their size on disk. Only --delete removes anything, and never an env a
// running worker uses (env_usage.hpp) or one an install holds the lock of.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "diagnostics_output.hpp"
#include "orch/control/control_client.hpp"
#include "orch/control/control_directory.hpp"
#include "orch/envs/env_context.hpp"
#include "orch/envs/env_usage.hpp"
#include "orch/manifests/units.hpp"

namespace orch::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct gc_options {
  std::string deployment;
  bool all_known = false;
  bool remove = false;
  bool json = false;
};

struct gc_entry {
  fs::path path;
  std::string reason;
  std::uint64_t bytes = 0;
  std::vector<std::string> users;
  std::string outcome;  // "kept", "deleted", "in use", "locked", "failed: ..."
};

// Bytes on disk of a directory tree; a file hard-linked several times inside counts once, and
// symlinks are not followed.
std::uint64_t disk_size(const fs::path& dir) {
  std::uint64_t total = 0;
  std::set<std::pair<dev_t, ino_t>> seen;
  std::error_code ec;
  for (auto it =
           fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (st.st_nlink > 1 && !seen.insert({st.st_dev, st.st_ino}).second) continue;
    total += static_cast<std::uint64_t>(st.st_blocks) * 512;
  }
  return total;
}

// Removes an env under its install lock: renamed out of its name first, so a half-removed
// directory never looks like an env.
std::string delete_env(const fs::path& dir) {
  const fs::path envs = dir.parent_path();
  const fs::path lock_path = envs / ".locks" / (dir.filename().string() + ".lock");
  std::error_code ec;
  fs::create_directories(lock_path.parent_path(), ec);
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (fd >= 0) ::close(fd);
    return "locked";
  }
  const fs::path doomed =
      envs / ("." + dir.filename().string() + ".gc-" + std::to_string(::getpid()));
  fs::rename(dir, doomed, ec);
  if (!ec) fs::remove_all(doomed, ec);
  ::close(fd);
  return ec ? "failed: " + ec.message() : "deleted";
}

// The deployments to read: the one given, or every one comfy-orch knows of (those that
// installed into the default workspace, and those of the running servers).
std::vector<fs::path> deployments_of(const gc_options& o) {
  if (!o.all_known) return {o.deployment};
  std::vector<fs::path> out;
  manifests::diagnostics ignored;
  const auto defaults = manifests::parse_deployment_text("", "<defaults>", ignored);
  if (defaults) out = envs::remembered_deployments(defaults->env.root);
  if (auto servers = control::list_registrations()) {
    for (const auto& s : *servers) {
      if (std::find(out.begin(), out.end(), fs::path(s.deployment)) == out.end())
        out.emplace_back(s.deployment);
    }
  }
  return out;
}

// Every running `serve` of this user, asked for its status over its control socket.
std::vector<envs::server_status> ask_servers() {
  std::vector<envs::server_status> out;
  auto servers = control::list_registrations();
  if (!servers) {
    out.push_back({"the servers' registrations", servers.err()});
    return out;
  }
  for (const auto& s : *servers) {
    auto client = control::control_client::connect(s.socket);
    auto status = client ? client->ask({{"get", "status"}}) : result<json>(client.err());
    out.push_back({"serve pid " + std::to_string(s.pid) + " (" + s.deployment + ")",
                   std::move(status)});
  }
  return out;
}

int run_gc(const gc_options& o) {
  std::vector<envs::env_context> contexts;
  for (const auto& file : deployments_of(o)) {
    std::error_code ec;
    if (o.all_known && !fs::exists(file, ec)) continue;
    manifests::diagnostics diags;
    auto context = envs::load_env_context(file.string(), diags);
    if (!context || diags.has_errors()) {
      print_diagnostics(std::cerr, diags);
      std::cerr << "comfy-orch gc: cannot read " << file.string()
                << "; nothing is listed for it, and nothing deleted\n";
      return exit_invalid_input;
    }
    contexts.push_back(std::move(*context));
  }
  // Per workspace (canonical), what every deployment using it claims: the ones read, and every
  // other that installed into it.
  std::map<fs::path, std::vector<fs::path>> claims;
  std::set<fs::path> read_files;
  auto claim = [&](const envs::env_context& c) {
    auto& claimed = claims[envs::canonical_or_normal(c.deployment.env.root)];
    for (const auto& dir : manifests::claimed_env_dirs(c.inventory))
      claimed.push_back(envs::canonical_or_normal(dir));
    read_files.insert(envs::canonical_or_normal(c.deployment.file));
  };
  for (const auto& c : contexts) claim(c);
  std::vector<fs::path> roots;
  for (const auto& [root, unused] : claims) roots.push_back(root);
  for (const auto& root : roots) {
    for (const auto& other : envs::remembered_deployments(root)) {
      std::error_code ec;
      if (read_files.count(envs::canonical_or_normal(other)) != 0 || !fs::exists(other, ec))
        continue;
      manifests::diagnostics ignored;
      if (auto c = envs::load_env_context(other.string(), ignored)) claim(*c);
    }
  }

  std::vector<gc_entry> entries;
  std::set<fs::path> listed;
  auto add = [&](const fs::path& path, std::string reason) {
    if (listed.insert(path).second) entries.push_back({path, std::move(reason), 0, {}, "kept"});
  };
  for (const auto& c : contexts) {
    for (const auto& pack : c.inventory.packs) {
      for (const auto& e : pack.envs) {
        const auto& s = e.status;
        if (s.native || s.named) continue;
        // Built for another stack: it never runs again. An env that is stale only because its
        // manifest changed still runs, and install rebuilds it in place: it is not listed.
        if (s.state == manifests::env_state::stale && !s.runnable) {
          add(envs::canonical_or_normal(s.path), "stale: " + s.detail);
        }
        for (const auto& other : s.candidates) {
          if (other != s.path && s.runnable) {
            add(envs::canonical_or_normal(other), "unused spelling of env '" + e.dir.env_name +
                                                      "' (" + s.path.filename().string() +
                                                      " is used)");
          }
        }
      }
    }
  }
  for (const auto& [root, claimed] : claims) {
    for (const auto& orphan : manifests::find_orphan_envs(root, claimed)) {
      add(orphan.path,
          "orphan: no pack of a deployment comfy-orch knows maps to it" +
              (orphan.abi_tag.empty() ? std::string() : " (abi=" + orphan.abi_tag + ")"));
    }
  }

  const auto usage = envs::read_env_usage(ask_servers());
  std::uint64_t total = 0;
  for (auto& e : entries) {
    e.bytes = disk_size(e.path);
    total += e.bytes;
    for (const auto* u : usage.inside(e.path)) e.users.push_back(u->who);
    if (!e.users.empty()) e.outcome = "in use";
  }
  if (o.remove && !usage.unknown.empty()) {
    for (const auto& u : usage.unknown) std::cerr << "comfy-orch gc: cannot ask " << u << '\n';
    std::cerr << "comfy-orch gc: nothing deleted: a server that does not answer may use any of "
                 "these envs; stop it (or wait until it answers) and run gc again\n";
    return exit_failure;
  }
  bool failed = false;
  for (auto& e : entries) {
    if (!o.remove || !e.users.empty()) continue;
    e.outcome = delete_env(e.path);
    failed = failed || e.outcome.rfind("failed", 0) == 0;
  }
  if (o.json) {
    json list = json::array();
    for (const auto& e : entries) {
      list.push_back({{"path", e.path.string()},
                      {"reason", e.reason},
                      {"bytes", e.bytes},
                      {"in_use_by", e.users},
                      {"outcome", e.outcome}});
    }
    std::cout << json{{"envs", list}, {"bytes", total}, {"deleted", o.remove}}.dump(
                     2, ' ', false, json::error_handler_t::replace)
              << '\n';
  } else {
    for (const auto& e : entries) {
      std::cout << manifests::format_size(e.bytes) << "  " << e.path.string() << "\n    "
                << e.reason << "\n    " << e.outcome;
      for (const auto& u : e.users) std::cout << (&u == &e.users.front() ? ": " : ", ") << u;
      std::cout << '\n';
    }
    std::cout << entries.size() << " env(s), " << manifests::format_size(total)
              << (o.remove ? "" : "; run with --delete to remove those not in use") << '\n';
  }
  return failed ? exit_failure : exit_ok;
}

}  // namespace

void add_gc_command(CLI::App& app) {
  auto* cmd = add_command(
      app, "gc", "List the env directories nothing needs; --delete removes them",
      "Lists the env directories nothing needs: orphans (no pack maps to them), stale envs "
      "(built for another ABI tag or from an older manifest) and the unused spellings of an "
      "ambiguous env, each with its size on disk. Only --delete removes them, and never one "
      "that a running worker uses (every running serve is asked over its control socket, and "
      "every process's executable is looked at) or one an install is building. --all-known "
      "reads every deployment that installed into the default workspace and those of the "
      "running servers. An env is an orphan only when no deployment that installed into its "
      "workspace maps to it.");
  auto o = std::make_shared<gc_options>();
  auto* file = cmd->add_option("deployment", o->deployment,
                  "Deployment file (comfy-orch.toml), or a ComfyUI tree (its custom_nodes)")
                   ->check(CLI::ExistingPath);
  auto* all = cmd->add_flag("--all-known", o->all_known, "Every deployment comfy-orch knows of");
  file->excludes(all);
  cmd->add_flag("--delete", o->remove, "Remove the envs listed that are not in use");
  cmd->add_flag("--json", o->json, "One JSON document: each env with its reason and size");
  cmd->callback([o] {
    if (o->deployment.empty() && !o->all_known) {
      throw CLI::ValidationError("gc", "name a deployment file, or pass --all-known");
    }
    if (const int code = run_gc(*o); code != exit_ok) throw CLI::RuntimeError(code);
  });
}

}  // namespace orch::cli
