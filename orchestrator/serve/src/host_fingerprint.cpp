#include "orch/serve/host_fingerprint.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "orch/support/sha256.hpp"

namespace orch::serve {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// "sha256:<hex>" of a file's bytes; null when it is absent or unreadable.
json file_hash(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return nullptr;
  if (fs::file_size(file, ec) > (std::uintmax_t{1} << 30)) return "too large";
  std::ifstream in(file, std::ios::binary);
  if (!in) return nullptr;
  support::sha256 h;
  std::string block(1 << 16, '\0');
  while (in.read(block.data(), static_cast<std::streamsize>(block.size())) || in.gcount() > 0)
    h.update(std::string_view(block.data(), static_cast<std::size_t>(in.gcount())));
  return "sha256:" + h.hex_digest();
}

std::string first_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  return line.substr(0, 256);
}

// The commit a git checkout of `dir` has out: its HEAD, or the branch HEAD names (a loose ref,
// else packed-refs). Null when `dir` is no checkout (a .git file of a worktree is followed).
json git_commit(const fs::path& dir) {
  std::error_code ec;
  fs::path git = dir / ".git";
  if (fs::is_regular_file(git, ec)) {  // "gitdir: <path>"
    const std::string line = first_line(git);
    if (line.rfind("gitdir: ", 0) != 0) return nullptr;
    git = fs::path(line.substr(8));
    if (git.is_relative()) git = dir / git;
  }
  if (!fs::is_directory(git, ec)) return nullptr;
  const std::string head = first_line(git / "HEAD");
  if (head.rfind("ref: ", 0) != 0) return head.empty() ? json(nullptr) : json(head);
  const std::string ref = head.substr(5);
  if (const std::string loose = first_line(git / ref); !loose.empty()) return loose;
  std::ifstream packed(git / "packed-refs");
  for (std::string line; std::getline(packed, line);)
    if (line.size() > 41 && line.compare(41, std::string::npos, ref) == 0)
      return line.substr(0, 40);
  return nullptr;
}

std::string hash_of(const json& canonical) {
  // replace: a part read from disk (a git HEAD, an ABI tag) need not be UTF-8.
  return "sha256:" +
         support::sha256_hex(canonical.dump(-1, ' ', false, json::error_handler_t::replace));
}

json deployment_settings(const runtime::prepared_deployment& p) {
  const manifests::deployment& d = p.deployment;
  const auto ms = [](std::chrono::milliseconds t) { return t.count(); };
  json floors = json::object();
  for (const auto& [kind, version] : d.memory.runtime_floor)
    floors[manifests::to_string(kind)] = version.to_string();
  json packs = json::array();
  for (const auto& pack : p.inventory.packs) packs.push_back(pack.layout.name);
  std::sort(packs.begin(), packs.end());
  return {
      {"device", d.host.device.to_string()},
      {"sim",
       {{"capacity", d.host.sim.capacity},
        {"page_size", d.host.sim.page_size},
        {"mode", manifests::to_string(d.host.sim.mode)},
        {"other_process_usage", d.host.sim.other_process_usage},
        {"runtime", d.host.sim.runtime.to_string()}}},
      {"protocol_level", d.host.protocol_level ? json(*d.host.protocol_level) : json(nullptr)},
      {"memory",
       {{"disable_dynamic_vram", d.memory.disable_dynamic_vram},
        {"enable_dynamic_vram", d.memory.enable_dynamic_vram},
        {"highvram", d.memory.highvram},
        {"gpu_only", d.memory.gpu_only},
        {"novram", d.memory.novram},
        {"cpu", d.memory.cpu},
        {"reserve_vram", d.memory.reserve_vram},
        {"vram_headroom", d.memory.vram_headroom ? json(*d.memory.vram_headroom) : json(nullptr)},
        {"disable_pinned_memory", d.memory.disable_pinned_memory},
        {"async_offload_streams",
         d.memory.async_offload_streams ? json(*d.memory.async_offload_streams) : json(nullptr)},
        {"runtime_floor", floors}}},
      {"workers",
       {{"handshake_timeout_ms", ms(d.workers.handshake_timeout)},
        {"heartbeat_interval_ms", ms(d.workers.heartbeat_interval)},
        {"call_timeout_ms", ms(d.workers.call_timeout)},
        {"restart_backoff_ms", ms(d.workers.restart_backoff)},
        {"restart_backoff_max_ms", ms(d.workers.restart_backoff_max)},
        {"crash_loop_limit", d.workers.crash_loop_limit},
        {"crash_loop_window_ms", ms(d.workers.crash_loop_window)},
        {"failed_retry_ms", ms(d.workers.failed_retry)},
        {"idle_reap_ms", ms(d.workers.idle_reap)}}},
      {"pinned_pool_size", d.shm.pinned_pool_size},
      {"cache", manifests::to_string(d.server.cache)},
      {"lru_prompts", d.server.lru_prompts},
      {"packs", packs},
  };
}

json env_identity(const manifests::pack_entry& pack, const manifests::env_entry& env) {
  const manifests::env_status& s = env.status;
  const fs::path& dir = pack.layout.dir;
  json id = {{"pack", pack.layout.name},
             {"node_dir", env.dir.relative_dir.generic_string()},
             {"manifest", file_hash(env.dir.config)},
             {"root_manifest",
              pack.layout.root_manifest ? file_hash(*pack.layout.root_manifest) : json(nullptr)},
             {"pyproject", file_hash(dir / "pyproject.toml")},
             {"requirements", file_hash(dir / "requirements.txt")},
             {"commit", git_commit(dir)},
             {"native", s.native},
             {"state", manifests::to_string(s.state)},
             {"abi_tag", s.abi_tag},
             {"python", s.python_version}};
  // A native pack's code is its library; a Python env's installed state is what its stamp says.
  if (s.native) id["library"] = file_hash(s.path);
  if (s.stamp) {
    id["backend"] = s.stamp->backend ? json(*s.stamp->backend) : json(nullptr);
    id["lock"] = s.stamp->pixi_lock_sha256 ? json(*s.stamp->pixi_lock_sha256) : json(nullptr);
  }
  return id;
}

}  // namespace

fleet::fingerprint_parts fingerprint_parts_of(const runtime::prepared_deployment& deployment,
                                              const std::string& version) {
  fleet::fingerprint_parts parts;
  parts["comfy-orch"] = version;
  parts["deployment"] = hash_of(deployment_settings(deployment));
  for (const auto& pack : deployment.inventory.packs)
    for (const auto& env : pack.envs)
      parts["env:" + env.dir.env_name] = hash_of(env_identity(pack, env));
  return parts;
}

std::string fingerprint_of(const fleet::fingerprint_parts& parts) {
  support::sha256 h;
  for (const auto& [name, value] : parts) {
    h.update(name);
    h.update("=");
    h.update(value);
    h.update("\n");
  }
  return "sha256:" + h.hex_digest();
}

}  // namespace orch::serve
