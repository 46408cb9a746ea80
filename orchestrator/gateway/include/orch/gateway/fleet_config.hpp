// fleet_config: the gateway's fleet file (docs/fleet.md, "The gateway"), strict TOML read with
// toml++ as the deployment is (manifests/toml_source.hpp): every problem names its file, line
// and key, and says what to do. Hosts come from exactly one of two places: [ray], which has the
// Ray driver start one `comfy-orch serve` a host, or [[host]] entries, hosts already running at
// fixed addresses (a fixed set of machines; the seam the gateway's own tests use).
//
//   [gateway]
//   listen = "127.0.0.1"         # loopback unless told otherwise (docs/security.md)
//   port = 8188
//   secret_file = "fleet.secret" # sent to every host as "Authorization: Bearer <secret>"
//   history_size = 10000
//   fingerprint = "sha256:..."   # pinned; default: the first host's to report
//   placement = "resident"       # or "round_robin", the baseline placement is measured against
//   pressure_window_ms = 1500    # SwarmUI's: how long a busy warm host is waited for
//   state_file = "fleet.gateway-state.sqlite"  # the queue and history across a restart; this
//                                # default: beside the fleet file, named after it
//   user_directory = "user"      # the frontend's user data and settings (ComfyUI's
//                                # --user-directory); default: "user" beside the fleet file
//   input_directory = "input"    # uploads, sent on to the hosts that need them
//   output_directory = "output"  # every prompt's outputs, copied from its host
//   temp_directory = "temp"      # its temp outputs (previews), copied likewise
//   max_output_file = "4GiB"     # the most one output file copied from a host may hold
//   max_outputs_per_prompt = 10000
//
//   [[host]]
//   url = "http://127.0.0.1:8190"
//
//   # or
//   [ray]
//   address = "127.0.0.1:6379"
//   python = ".deps/ray/bin/python"
//   hosts = 3
//   resource = "comfy_orch_host"
//   gpus_per_host = 1            # Ray gives each host its GPU (CUDA_VISIBLE_DEVICES); default 0
//   deployment = "deployment.toml"
//   comfy_orch = "/usr/local/bin/comfy-orch"   # on the nodes; default: this executable
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "orch/manifests/diagnostic.hpp"

namespace orch::gateway {

struct static_host {
  std::string url;   // "http://HOST:PORT", as written
  std::string host;  // its address
  std::uint16_t port = 0;
};

struct ray_hosts {
  std::string address;                       // the Ray cluster's (ray start --address)
  std::filesystem::path python;              // the interpreter of the venv Ray is installed in
  unsigned hosts = 1;                        // how many serve hosts the driver keeps up
  std::string resource = "comfy_orch_host";  // the custom resource a host actor asks for
  // GPUs Ray gives each host (its actor's num_gpus; Ray sets CUDA_VISIBLE_DEVICES, which serve
  // inherits, so "cuda:0" is the host's own card); 0: none asked for.
  unsigned gpus_per_host = 0;
  std::filesystem::path deployment;          // the deployment every host serves
  std::filesystem::path comfy_orch;          // comfy-orch on the nodes; empty: this executable
};

struct fleet_config {
  std::filesystem::path file;
  std::string listen = "127.0.0.1";
  std::uint16_t port = 8188;
  std::optional<std::filesystem::path> secret_file;  // relative paths: to the fleet file
  std::size_t history_size = 10000;                  // ComfyUI's MAXIMUM_HISTORY_SIZE
  // The fleet's fingerprint, pinned ("sha256:<64 hex>", a host's GET /orch/fleet/host);
  // empty: the first host's to report.
  std::string fingerprint;
  // "resident" (orch::fleet::place, docs/fleet.md "Placement") or "round_robin" (the baseline
  // it is measured against: the next free capable host, whatever it holds).
  bool round_robin = false;
  // How long a model's waiting prompts wait for its busy warm hosts before a free cold host loads
  // it (placement's pressure window, in the gateway's clock of milliseconds).
  std::uint64_t pressure_window_ms = 1500;
  // Where the queue and history are kept across a restart (gateway_state.hpp); relative paths:
  // to the fleet file. Default: beside the fleet file, "<its stem>.gateway-state.sqlite".
  std::filesystem::path state_file;
  // The official frontend's user data and settings at the gateway (ComfyUI's --user-directory:
  // the default user's files are in its default/); relative paths: to the fleet file; default:
  // "user" beside the fleet file.
  std::filesystem::path user_directory;
  // The gateway's own file store (docs/fleet.md, "Files across hosts"); relative paths: to the
  // fleet file, whose directory holds input/, output/, temp/ (and user/) by default, as a
  // deployment's does.
  std::filesystem::path input_directory;
  std::filesystem::path output_directory;
  std::filesystem::path temp_directory;
  // A host is untrusted: the most bytes one output file it names may hold, and the most files one
  // prompt's history entry may name, before the prompt ends with an error naming the host.
  std::uint64_t max_output_file_bytes = std::uint64_t{4} << 30;
  std::size_t max_outputs_per_prompt = 10000;
  std::vector<static_host> hosts;  // [[host]]
  std::optional<ray_hosts> ray;    // [ray]
};

// Reads `file`. Every problem goes to `diags` (file, line, key, message, fix); nullopt when
// there was an error. Relative paths in it are taken relative to the file's directory.
std::optional<fleet_config> load_fleet_config(const std::filesystem::path& file,
                                              manifests::diagnostics& diags);

// The same from text, `display_name` standing for the file (tests).
std::optional<fleet_config> parse_fleet_config(const std::string& text,
                                               const std::filesystem::path& display_name,
                                               manifests::diagnostics& diags);

// "http://HOST:PORT" (a trailing "/" at most) as `out`'s address and port; false for any other.
bool parse_host_url(const std::string& url, static_host& out);

}  // namespace orch::gateway
