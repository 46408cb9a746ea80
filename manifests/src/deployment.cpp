#include "orch/manifests/deployment.hpp"

#include <cstdlib>
#include <utility>

#include "orch/manifests/toml_source.hpp"
#include "strict_table.hpp"

namespace orch::manifests {
namespace fs = std::filesystem;
using detail::strict_table;

std::optional<std::string> environment_reader::get(const std::string& name) const {
  const char* v = std::getenv(name.c_str());
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

const char* to_string(free_memory_mode mode) noexcept {
  return mode == free_memory_mode::device ? "device" : "process";
}

const char* to_string(env_root_source source) noexcept {
  switch (source) {
    case env_root_source::deployment:
      return "deployment";
    case env_root_source::orch_env_root:
      return "ORCH_ENV_ROOT";
    case env_root_source::comfy_env_root:
      return "COMFY_ENV_ROOT";
    case env_root_source::home_default:
      return "default";
  }
  return "default";
}

const char* to_string(cache_policy policy) noexcept {
  switch (policy) {
    case cache_policy::classic:
      return "classic";
    case cache_policy::lru:
      return "lru";
    case cache_policy::none:
      return "none";
  }
  return "classic";
}

namespace {

class deployment_parser {
 public:
  deployment_parser(const toml::table& root, const fs::path& file, diagnostics& diags,
                    const environment_reader& env)
      : root_(root),
        file_(file.string()),
        base_(fs::absolute(file).parent_path()),
        diags_(diags),
        env_(env) {
    result_.file = file;
  }

  deployment run() {
    strict_table top(&root_, "", file_, diags_);
    read_host(top);
    read_memory(top);
    read_plugins(top);
    read_env(top);
    read_comfyui(top);
    read_packs(top);
    read_workers(top);
    read_shm(top);
    read_server(top);
    top.finish();
    return std::move(result_);
  }

 private:
  fs::path resolve(const std::string& text) const {
    fs::path p = text;
    if (text == "~" || text.rfind("~/", 0) == 0) {
      p = fs::path(env_.get("HOME").value_or("/")) / text.substr(text.size() > 1 ? 2 : 1);
    }
    if (p.is_relative()) p = base_ / p;
    return p.lexically_normal();
  }

  void read_host(strict_table& top) {
    strict_table host(top.table("host"), "host", file_, diags_, &root_);
    if (auto text = host.string("device")) {
      result_.positions["host.device"] = host.where("device");
      if (auto spec = parse_device_spec(*text)) {
        result_.host.device = *spec;
      } else {
        host.error("device", "unknown device \"" + *text + "\"", "use cpu, sim, cuda:N or hip:N");
      }
    }
    if (auto v = host.integer("protocol_level", 1, 4)) {
      result_.host.protocol_level = static_cast<unsigned>(*v);
    }
    const toml::node* host_node = root_.get("host");
    strict_table sim(host.table("sim"), "host.sim", file_, diags_, host_node);
    auto& s = result_.host.sim;
    if (auto v = sim.size("capacity")) s.capacity = *v;
    if (auto v = sim.size("page_size")) s.page_size = *v;
    if (auto v = sim.size("other_process_usage")) s.other_process_usage = *v;
    if (auto text = sim.string("free_memory_mode")) {
      if (*text == "device") {
        s.mode = free_memory_mode::device;
      } else if (*text == "process") {
        s.mode = free_memory_mode::process;
      } else {
        sim.error("free_memory_mode", "expected \"device\" or \"process\", got \"" + *text + "\"",
                  "use \"device\" (Linux: the whole card) or \"process\" (Windows WDDM: the "
                  "caller's own budget)");
      }
    }
    if (auto text = sim.string("runtime_version")) {
      const auto v = parse_runtime_version(*text);
      if (v && *v > runtime_version{0, 0}) {
        s.runtime = *v;
      } else {
        sim.error("runtime_version",
                  "expected \"MAJOR.MINOR\" above \"0.0\", got \"" + *text + "\"",
                  "use e.g. runtime_version = \"12.8\"");
      }
    }
    const bool page_ok = s.page_size >= 4096 && (s.page_size & (s.page_size - 1)) == 0;
    if (!page_ok) {
      sim.error("page_size", "must be a power of two of at least 4 KiB",
                "use e.g. page_size = \"2MiB\"");
    } else if (s.capacity == 0 || s.capacity % s.page_size != 0) {
      sim.error("capacity", "must be a positive multiple of page_size",
                "use e.g. capacity = \"8GiB\"");
    } else if (s.other_process_usage > s.capacity) {
      sim.error("other_process_usage", "exceeds the device capacity", "use a value below capacity");
    }
    sim.finish();
    host.finish();
  }

  void read_memory(strict_table& top) {
    strict_table mem(top.table("memory"), "memory", file_, diags_, &root_);
    auto& m = result_.memory;
    for (const auto& flag : comfyui_flag_table) {
      if (auto v = mem.boolean(flag.key)) m.*flag.field = *v;
    }
    if (auto v = mem.boolean("disable_pinned_memory")) m.disable_pinned_memory = *v;
    if (auto v = mem.size("reserve_vram")) m.reserve_vram = *v;
    if (auto v = mem.size("vram_headroom")) m.vram_headroom = *v;
    if (auto v = mem.integer("async_offload_streams", 0, 16)) {
      m.async_offload_streams = static_cast<int>(*v);
    }
    read_runtime_floor(mem);
    if (m.enable_dynamic_vram && m.disable_dynamic_vram) {
      mem.error("enable_dynamic_vram", "contradicts disable_dynamic_vram = true",
                "set only one of the two");
    }
    // ComfyUI's VRAM modes are one mutually exclusive group of command-line flags.
    const char* chosen = nullptr;
    for (const auto& flag : comfyui_flag_table) {
      if (!flag.vram_mode || !(m.*flag.field)) continue;
      const char* name = flag.key;
      if (chosen != nullptr) {
        mem.error(name,
                  std::string("contradicts ") + chosen +
                      " = true (ComfyUI accepts one "
                      "VRAM mode)",
                  "set only one of highvram, gpu_only, novram, cpu");
      }
      chosen = name;
    }
    mem.finish();
  }

  void read_runtime_floor(strict_table& mem) {
    const toml::node* memory_node = root_.get("memory");
    strict_table floor(mem.table("runtime_floor"), "memory.runtime_floor", file_, diags_,
                       memory_node);
    for (const auto kind : {device_kind::sim, device_kind::cuda, device_kind::hip}) {
      const char* name = to_string(kind);
      auto text = floor.string(name);
      if (!text) continue;
      if (auto v = parse_runtime_version(*text)) {
        result_.memory.runtime_floor[kind] = *v;
      } else {
        floor.error(name, "expected \"MAJOR.MINOR\", got \"" + *text + "\"",
                    std::string("use e.g. ") + name + " = \"12.8\" (a string: as a float, 12.10 "
                    "would read as 12.1)");
      }
    }
    floor.finish();
  }

  void read_plugins(strict_table& top) {
    strict_table plugins(top.table("plugins"), "plugins", file_, diags_, &root_);
    if (auto paths = plugins.string_list("search_paths")) {
      result_.positions["plugins.search_paths"] = plugins.where("search_paths");
      for (const auto& p : *paths) result_.plugin_paths.push_back(resolve(p));
    }
    plugins.finish();
  }

  void read_comfyui(strict_table& top) {
    strict_table comfyui(top.table("comfyui"), "comfyui", file_, diags_, &root_);
    if (auto root = comfyui.string("root")) {
      const auto dir = resolve(*root);
      std::error_code ec;
      if (!fs::is_directory(dir / "comfy", ec)) {
        comfyui.error("root", "\"" + *root + "\" (" + dir.string() +
                                  ") is not a ComfyUI tree (it has no comfy/ directory)",
                      "point it at the directory holding ComfyUI's main.py, or remove it");
      }
      result_.comfyui_root = dir;
    }
    comfyui.finish();
  }

  void read_env(strict_table& top) {
    strict_table env(top.table("env"), "env", file_, diags_, &root_);
    if (auto root = env.string("root")) {
      result_.env = {resolve(*root), env_root_source::deployment, {}};
    } else if (auto v = env_.get("ORCH_ENV_ROOT")) {
      result_.env = {resolve(*v), env_root_source::orch_env_root, {}};
    } else if (auto c = env_.get("COMFY_ENV_ROOT")) {
      result_.env = {resolve(*c), env_root_source::comfy_env_root, {}};
    } else {
      result_.env = {resolve("~/.ce"), env_root_source::home_default, {}};
    }
    if (auto python = env.string("python")) {
      if (python->empty()) {
        env.error("python", "is empty",
                  "name the host's interpreter: python = \"/usr/bin/python3\"");
      } else {
        result_.env.host_python =
            python->find('/') == std::string::npos ? fs::path(*python) : resolve(*python);
      }
    }
    env.finish();
  }

  void read_packs(strict_table& top) {
    strict_table packs(top.table("packs"), "packs", file_, diags_, &root_);
    std::error_code ec;
    if (auto paths = packs.string_list("paths")) {
      for (const auto& p : *paths) {
        const auto dir = resolve(p);
        if (!fs::is_directory(dir, ec)) {
          packs.error("paths", "pack directory \"" + p + "\" (" + dir.string() + ") does not exist",
                      "fix the path; relative paths are relative to the deployment file");
        }
        result_.packs.paths.push_back(dir);
      }
    }
    if (auto dir = packs.string("custom_nodes")) {
      const auto resolved = resolve(*dir);
      if (!fs::is_directory(resolved, ec)) {
        packs.error("custom_nodes",
                    "directory \"" + *dir + "\" (" + resolved.string() + ") does not exist",
                    "point it at ComfyUI's custom_nodes directory");
      }
      result_.packs.custom_nodes = resolved;
    }
    if (auto paths = packs.string_list("library_paths")) {
      for (const auto& p : *paths) result_.packs.library_paths.push_back(resolve(p));
    }
    if (const toml::table* table = packs.table("python")) {
      // [packs.python]: env name -> the interpreter that runs it, ahead of the workspace's.
      strict_table python(table, "packs.python", file_, diags_, &root_);
      for (const auto& [key, node] : *table) {
        const std::string env{key.str()};
        auto path = python.string(env);
        if (!path) continue;
        const auto resolved = resolve(*path);
        if (!fs::is_regular_file(resolved, ec)) {
          python.error(env,
                       "interpreter \"" + *path + "\" (" + resolved.string() + "\") does not exist",
                       "point it at the env's bin/python, or remove the line to use the "
                       "workspace's env");
        }
        result_.packs.python[env] = resolved;
      }
      python.finish();
    }
    if (result_.packs.paths.empty() && !result_.packs.custom_nodes) {
      diags_.warning(packs.where("paths"), "packs",
                     "the deployment names no packs, so no worker will run",
                     "list pack directories in [packs] paths, or set [packs] custom_nodes");
    }
    packs.finish();
  }

  void read_workers(strict_table& top) {
    strict_table w(top.table("workers"), "workers", file_, diags_, &root_);
    auto& s = result_.workers;
    // Each timing key has a floor below which the runtime cannot keep its promise: at
    // heartbeat_interval = "1ms" a busy machine's scheduling delay alone got live workers killed
    // as hung.
    using std::chrono::milliseconds;
    auto at_least = [&w](const std::string& key, milliseconds floor, milliseconds& target) {
      if (auto v = w.duration(key)) {
        if (*v >= floor) {
          target = *v;
        } else {
          w.error(key, "must be at least " + std::to_string(floor.count()) + "ms",
                  "use e.g. " + key + " = \"" +
                      std::to_string(std::max<std::int64_t>(floor.count(), 1000) / 1000) + "s\"");
        }
      }
    };
    at_least("handshake_timeout", milliseconds(100), s.handshake_timeout);
    at_least("heartbeat_interval", milliseconds(50), s.heartbeat_interval);
    at_least("call_timeout", milliseconds(100), s.call_timeout);
    at_least("restart_backoff", milliseconds(10), s.restart_backoff);
    at_least("restart_backoff_max", milliseconds(10), s.restart_backoff_max);
    at_least("crash_loop_window", milliseconds(100), s.crash_loop_window);
    if (auto v = w.duration("idle_reap")) s.idle_reap = *v;
    if (auto v = w.duration("failed_retry")) {
      if (v->count() == 0 || *v >= milliseconds(100)) {
        s.failed_retry = *v;
      } else {
        w.error("failed_retry", "must be 0 (never) or at least 100ms",
                "use e.g. failed_retry = \"60s\"");
      }
    }
    if (auto v = w.integer("crash_loop_limit", 1, 1000)) s.crash_loop_limit = static_cast<int>(*v);
    if (s.restart_backoff > s.restart_backoff_max) {
      w.error("restart_backoff", "is larger than restart_backoff_max",
              "make restart_backoff <= restart_backoff_max");
    }
    if (s.heartbeat_interval * 2 > s.handshake_timeout) {
      w.error("heartbeat_interval",
              "must be at most half of handshake_timeout, or a live worker "
              "could be declared hung before its first beat",
              "lower heartbeat_interval or raise handshake_timeout");
    }
    w.finish();
  }

  void read_shm(strict_table& top) {
    strict_table shm(top.table("shm"), "shm", file_, diags_, &root_);
    if (auto v = shm.size("pinned_pool_size")) {
      result_.positions["shm.pinned_pool_size"] = shm.where("pinned_pool_size");
      if (*v == 0 && !result_.memory.disable_pinned_memory) {
        shm.error("pinned_pool_size", "must be greater than zero",
                  "use e.g. pinned_pool_size = \"256MiB\", or set [memory] "
                  "disable_pinned_memory = true");
      } else {
        result_.shm.pinned_pool_size = *v;
      }
    }
    shm.finish();
  }

  void read_server(strict_table& top) {
    strict_table server(top.table("server"), "server", file_, diags_, &root_);
    server_settings& s = result_.server;
    if (auto v = server.string("cache")) {
      if (*v == "classic") {
        s.cache = cache_policy::classic;
      } else if (*v == "lru") {
        s.cache = cache_policy::lru;
      } else if (*v == "none") {
        s.cache = cache_policy::none;
      } else {
        server.error("cache", "\"" + *v + "\" is not a cache policy",
                     "use \"classic\" (ComfyUI's default), \"lru\" (with lru_prompts) or "
                     "\"none\"");
      }
    }
    if (auto v = server.integer("lru_prompts", 1, 10'000)) {
      s.lru_prompts = static_cast<unsigned>(*v);
      if (s.cache != cache_policy::lru) {
        server.error("lru_prompts", "only applies to cache = \"lru\"",
                     "set cache = \"lru\", or remove lru_prompts");
      }
    }
    const fs::path defaults = result_.comfyui_root.value_or(base_);
    s.input_directory = defaults / "input";
    s.output_directory = defaults / "output";
    if (auto v = server.string("input_directory")) s.input_directory = resolve(*v);
    if (auto v = server.string("output_directory")) s.output_directory = resolve(*v);
    server.finish();
  }

  const toml::table& root_;
  std::string file_;
  fs::path base_;
  diagnostics& diags_;
  const environment_reader& env_;
  deployment result_;
};

}  // namespace

std::optional<deployment> parse_deployment_text(std::string_view text, const fs::path& file,
                                                diagnostics& diags, const environment_reader& env) {
  diagnostics local;
  auto table = parse_toml_text(text, file.string(), local);
  std::optional<deployment> out;
  if (table) out = deployment_parser(*table, file, local, env).run();
  diags.append(local);
  if (local.has_errors()) return std::nullopt;
  return out;
}

std::optional<deployment> load_deployment(const fs::path& file, diagnostics& diags,
                                          const environment_reader& env) {
  diagnostics local;
  auto table = parse_toml_file(file, local);
  std::optional<deployment> out;
  if (table) out = deployment_parser(*table, file, local, env).run();
  diags.append(local);
  if (local.has_errors()) return std::nullopt;
  return out;
}

}  // namespace orch::manifests
