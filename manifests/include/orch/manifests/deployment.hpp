// comfy-orch.toml: a deployment (docs/deployment.md). Parsed strictly: an unknown key, a wrong
// type or an impossible value is an error naming file, line, column and key, and nothing starts
// from a deployment with an error.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "orch/manifests/device_spec.hpp"
#include "orch/manifests/diagnostic.hpp"
#include "orch/manifests/runtime_version.hpp"
#include "orch/support/comfyui_flags.hpp"

namespace orch::manifests {

// How the simulated GPU answers "how much is free" (docs/sim-device.md).
enum class free_memory_mode {
  device,   // Linux: the whole card, other processes' usage included
  process,  // Windows WDDM: the caller's own budget
};

struct sim_device_settings {
  std::uint64_t capacity = 8ull << 30;
  std::uint64_t page_size = 2ull << 20;
  free_memory_mode mode = free_memory_mode::device;
  std::uint64_t other_process_usage = 0;  // injected usage by "someone else" on the card
  runtime_version runtime{1, 0};          // what the simulated runtime reports
};

// ComfyUI's command-line memory flags, mirrored (docs/memory-semantics.md): the ones that choose
// the memory manager (orch/support/comfyui_flags.hpp), and the sizes and switches beside them.
struct memory_flags : comfyui_memory_flags {
  std::uint64_t reserve_vram = 0;              // --reserve-vram
  std::optional<std::uint64_t> vram_headroom;  // the pager's simple headroom; default 256 MiB
  bool disable_pinned_memory = false;
  std::optional<int> async_offload_streams;  // default: 2 on a GPU device, 0 on cpu
  // [memory.runtime_floor]: the lowest device runtime the pager runs on, per backend (the
  // counterpart of ComfyUI's torch 2.8 gate). No entry: no floor for that backend.
  std::map<device_kind, runtime_version> runtime_floor;
};

struct host_settings {
  device_spec device{device_kind::sim, 0};
  sim_device_settings sim;
  // The level the host's memory manager speaks (DESIGN §4.5), when the host is not comfy-orch's
  // own pager: ComfyUI's comfy-aimdo version mapped to a level (docs/comfyui.md). Workers
  // follow it. Default: the host pager plugin's highest level.
  std::optional<unsigned> protocol_level;
};

struct worker_settings {
  std::chrono::milliseconds handshake_timeout{10'000};
  std::chrono::milliseconds heartbeat_interval{1'000};
  std::chrono::milliseconds call_timeout{600'000};
  std::chrono::milliseconds restart_backoff{500};  // first delay; doubles per restart
  std::chrono::milliseconds restart_backoff_max{30'000};
  int crash_loop_limit = 5;  // restarts within the window
  std::chrono::milliseconds crash_loop_window{60'000};
  // A crash-looping env is failed for this long, then started again; each further failure
  // doubles it, up to an hour (or this, if longer: crash_loop_cool_down). 0: failed until the
  // host restarts.
  std::chrono::milliseconds failed_retry{60'000};
  std::chrono::milliseconds idle_reap{0};  // 0: never reap idle workers
};

struct shm_settings {
  std::uint64_t pinned_pool_size = 256ull << 20;
};

// Where the env workspace root came from, for `envs` output and messages.
enum class env_root_source { deployment, orch_env_root, comfy_env_root, home_default };

struct env_settings {
  std::filesystem::path root;
  env_root_source source = env_root_source::home_default;
  // [env] python: the host's interpreter, whose stack (Python, torch, accelerator) every env is
  // built for. A bare name is looked up on PATH; absent, the host stack comes from
  // ORCH_HOST_PYTHON, else /usr/bin/python3, else python3 on PATH (docs/envs.md).
  std::optional<std::filesystem::path> host_python{};
};

struct pack_settings {
  std::vector<std::filesystem::path> paths;           // explicit pack directories
  std::optional<std::filesystem::path> custom_nodes;  // discover every pack inside
  std::vector<std::filesystem::path> library_paths;   // where native node libraries are found
  // [packs.python]: the interpreter of a Python env, by env name; ahead of the workspace's.
  std::map<std::string, std::filesystem::path> python;
};

// [server]: what `comfy-orch serve` keeps between prompts and where its files live
// (docs/serve.md).
enum class cache_policy {
  classic,  // ComfyUI's default: the outputs of the nodes of the last prompt
  lru,      // the outputs of the nodes of the last `lru_prompts` prompts
  none,     // nothing kept (ComfyUI's --cache-none)
};

struct server_settings {
  cache_policy cache = cache_policy::classic;
  unsigned lru_prompts = 10;
  // GET /view and POST /upload/image; defaults: <comfyui root>/input and /output when [comfyui]
  // root is set (ComfyUI's own), else input/ and output/ beside the deployment file.
  std::filesystem::path input_directory;
  std::filesystem::path output_directory;
};

struct deployment {
  std::filesystem::path file;  // as given
  host_settings host;
  memory_flags memory;
  std::vector<std::filesystem::path> plugin_paths;
  env_settings env;
  // [comfyui] root: a ComfyUI tree. Python workers put it first on sys.path, so packs can import
  // comfy_api (V3 nodes), comfy.utils and comfy.model_management (docs/python.md).
  std::optional<std::filesystem::path> comfyui_root;
  pack_settings packs;
  worker_settings workers;
  shm_settings shm;
  server_settings server;
  // Where checks that need the running machine (orchestrator/preflight.hpp) point their
  // diagnostics: "host.device", "plugins.search_paths", "shm.pinned_pool_size" (when written).
  std::map<std::string, source_position> positions;
};

// The process environment the defaults are read from (ORCH_ENV_ROOT, COMFY_ENV_ROOT, HOME);
// injectable so tests do not depend on the caller's shell.
struct environment_reader {
  virtual ~environment_reader() = default;
  virtual std::optional<std::string> get(const std::string& name) const;
};

// Loads and validates a deployment. Relative paths in it are resolved against the file's
// directory. Returns nullopt when any error was added to `diags`.
std::optional<deployment> load_deployment(const std::filesystem::path& file, diagnostics& diags,
                                          const environment_reader& env = environment_reader{});

std::optional<deployment> parse_deployment_text(
    std::string_view text, const std::filesystem::path& file, diagnostics& diags,
    const environment_reader& env = environment_reader{});

const char* to_string(free_memory_mode mode) noexcept;
const char* to_string(env_root_source source) noexcept;
const char* to_string(cache_policy policy) noexcept;

}  // namespace orch::manifests
