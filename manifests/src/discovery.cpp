#include "orch/manifests/discovery.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <string>

#include "orch/manifests/env_naming.hpp"

namespace orch::manifests {
namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// Why a manifest path that exists cannot be read as one: a directory, a FIFO, a device such as
// /dev/zero (directly or through a symlink), or a symlink that loops or dangles. Nothing when the
// path is a regular file or absent.
std::optional<std::string> not_a_manifest_file(const fs::path& p) {
  std::error_code ec;
  const auto link = fs::symlink_status(p, ec);
  if (ec || link.type() == fs::file_type::not_found) return std::nullopt;
  const auto target = fs::status(p, ec);
  if (ec) return "cannot be followed (" + ec.message() + ")";
  switch (target.type()) {
    case fs::file_type::regular:
      return std::nullopt;
    case fs::file_type::directory:
      return std::string("is a directory");
    case fs::file_type::fifo:
      return std::string("is a FIFO");
    case fs::file_type::character:
    case fs::file_type::block:
      return std::string("is a device");
    case fs::file_type::not_found:
      return std::string("is a symlink to nothing");
    default:
      return std::string("is not a regular file");
  }
}

void warn_unreadable_manifest(const fs::path& manifest, diagnostics& diags) {
  if (auto why = not_a_manifest_file(manifest)) {
    diags.warning({manifest.string(), 0, 0}, "comfy-env.toml",
                  manifest.string() + " " + *why + ", so this node directory runs no worker",
                  "make it a regular comfy-env.toml file, or remove it");
  }
}

node_dir make_node_dir(const fs::path& pack_dir, const fs::path& relative) {
  const fs::path config_dir = pack_dir / relative;
  return {pack_dir, config_dir / env_manifest_name, relative, env_name(pack_dir, config_dir)};
}

}  // namespace

pack_layout discover_pack(const fs::path& pack_dir, diagnostics& diags) {
  pack_layout pack;
  pack.dir = pack_dir;
  pack.name = pack_dir.lexically_normal().filename().string();
  if (pack.name.empty()) pack.name = pack_dir.lexically_normal().parent_path().filename().string();
  if (is_file(pack_dir / root_manifest_name)) pack.root_manifest = pack_dir / root_manifest_name;
  if (const auto stray = pack_dir / env_manifest_name; is_file(stray)) {
    diags.warning({stray.string(), 0, 0}, "comfy-env.toml",
                  "a pack-root comfy-env.toml is not bound by current comfy-env, and comfy-orch "
                  "does not run it either",
                  "move it to " + (pack_dir / "nodes" / env_manifest_name).string());
  }

  const fs::path nodes = pack_dir / "nodes";
  if (is_file(nodes / env_manifest_name)) {
    pack.node_dirs.push_back(make_node_dir(pack_dir, "nodes"));
  } else {
    warn_unreadable_manifest(nodes / env_manifest_name, diags);
  }
  std::error_code ec;
  if (fs::is_directory(nodes, ec)) {
    std::vector<std::string> children;
    for (const auto& entry : fs::directory_iterator(nodes, ec)) {
      const std::string child = entry.path().filename().string();
      if (child.empty() || child[0] == '.' || child[0] == '_') continue;
      std::error_code dir_ec;
      if (!entry.is_directory(dir_ec)) continue;
      if (is_file(entry.path() / env_manifest_name)) {
        children.push_back(child);
      } else {
        warn_unreadable_manifest(entry.path() / env_manifest_name, diags);
      }
    }
    std::sort(children.begin(), children.end());
    for (const auto& child : children) {
      pack.node_dirs.push_back(make_node_dir(pack_dir, fs::path("nodes") / child));
    }
  }
  return pack;
}

std::vector<fs::path> list_custom_nodes(const fs::path& custom_nodes) {
  std::vector<fs::path> packs;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(custom_nodes, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name[0] == '.' || name[0] == '_') continue;
    if (ends_with(name, ".disabled") || ends_with(name, "._disabled")) continue;
    std::error_code dir_ec;
    if (entry.is_directory(dir_ec)) packs.push_back(entry.path());
  }
  std::sort(packs.begin(), packs.end());
  return packs;
}

void check_env_name_collisions(const std::vector<pack_layout>& packs, diagnostics& diags) {
  std::map<std::string, const node_dir*> seen;
  for (const auto& pack : packs) {
    for (const auto& dir : pack.node_dirs) {
      auto [it, inserted] = seen.emplace(dir.env_name, &dir);
      if (inserted) continue;
      diags.error({dir.config.string(), 0, 0}, dir.env_name,
                  "env name '" + dir.env_name + "' is derived by BOTH " +
                      it->second->config.string() + " and " + dir.config.string() +
                      ", which would share one environment",
                  "rename one of the two pack or node directories, or disable one pack");
    }
  }
}

}  // namespace orch::manifests
