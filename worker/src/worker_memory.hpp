// worker_memory: what shapes memory in one worker, set up from the host's handshake settings
// (DESIGN.md §4.2 to §4.5): the pinned pool's segments mapped here, the worker's slot of the one
// pinned budget and its control block, and the injected pager and allocator plugins with their
// device and the regions node code keeps across calls.
//
// Issue 5's rule is simple: the host injects its backend's pager and allocator and the worker
// runs them at the level the host says. Issue 6 adds manager resolution (ledger fallback) here.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/ipc/control_segment.hpp"
#include "orch/ipc/pin_registrar.hpp"
#include "orch/ipc/segment_table.hpp"
#include "orch/ipc/unique_fd.hpp"
#include "orch/plugin/allocator.h"
#include "orch/plugins/backend_device.hpp"
#include "orch/plugins/loader.hpp"
#include "orch/support/result.hpp"

namespace orch::worker {

// The host settings of the handshake, read back from the hello response (docs/protocol.md).
struct host_settings {
  std::uint32_t slot = 0;
  std::string device = "cpu";
  int ordinal = 0;
  std::string backend_plugin;    // path the pool is registered through; empty: not registered
  std::uint32_t level = 0;
  std::string pager_plugin;      // path, empty: none
  std::string allocator_plugin;  // path, empty: none
  std::string manager_reason;
  std::uint32_t streams = 0;
  std::uint64_t page_size = 0;
  std::uint64_t reserve_vram = 0;
  bool pinned_memory = true;
  std::uint32_t heartbeat_ms = 1000;
  struct pool_segment_info {
    std::uint32_t segment = 0;
    std::uint64_t total_size = 0;
  };
  std::vector<pool_segment_info> pool_segments;  // in the order the fds were sent
  static result<host_settings> from_json(const nlohmann::json& j);
};

class worker_memory {
 public:
  // control_fd and pool fds come from the host's fd socket; sim_fd is -1 off sim.
  static result<std::unique_ptr<worker_memory>> setup(const host_settings& s,
                                                      ipc::unique_fd control_fd,
                                                      std::vector<ipc::unique_fd> pool_fds,
                                                      ipc::unique_fd sim_fd);
  worker_memory(const worker_memory&) = delete;
  worker_memory& operator=(const worker_memory&) = delete;
  ~worker_memory();  // regions, allocator and pager closed, plugins shut down, then segments

  ipc::segment_table& segments() noexcept { return *segments_; }
  ipc::budget_account& budget() noexcept { return *budget_; }
  ipc::control_block& block() noexcept { return control_->block(settings_.slot); }
  const host_settings& settings() const noexcept { return settings_; }
  bool has_pager() const noexcept { return pager_ != nullptr; }

  // The region named `key`, created on first use. Errors: "unsupported" (no pager), plugin status.
  result<orch_region*> region(const std::string& key, std::uint64_t bytes, bool& created);
  orch_status fault(orch_region* r, std::uint64_t offset, std::uint64_t size);
  orch_status unpin(orch_region* r, std::uint64_t offset, std::uint64_t size);
  orch_status cast_buffer(std::uint32_t stream, std::uint64_t size, std::uint64_t* address);

  // Publishes a stats snapshot into the control block (single writer: the caller serialises).
  void publish(std::uint64_t epoch, std::uint64_t calls) noexcept;
  // The plugin names and levels for the ready message.
  nlohmann::json describe_plugins() const;

 private:
  worker_memory() = default;
  host_settings settings_;
  ipc::unique_fd sim_fd_;
  // Declared before the registrar and the segments: they unregister before the device closes.
  std::unique_ptr<plugins::backend_device> backend_;
  std::unique_ptr<ipc::pin_registrar> registrar_;
  std::unique_ptr<ipc::segment_table> segments_;
  std::optional<ipc::control_segment> control_;
  std::unique_ptr<ipc::budget_account> budget_;
  std::unique_ptr<plugins::plugin_library> pager_lib_;
  std::unique_ptr<plugins::plugin_library> allocator_lib_;
  const orch_pager_api* pager_api_ = nullptr;
  const orch_allocator_api* allocator_api_ = nullptr;
  orch_pager* pager_ = nullptr;
  orch_allocator* allocator_ = nullptr;
  std::map<std::string, orch_region*> regions_;
};

}  // namespace orch::worker
