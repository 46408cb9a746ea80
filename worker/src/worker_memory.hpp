// worker_memory: what shapes memory in one worker, set up from the host's handshake settings
// (DESIGN.md §4.2 to §4.7): the pinned pool's segments mapped and registered here, the worker's
// slot of the one pinned budget and its control block, the memory manager this worker resolved
// (pager or ledger, DESIGN.md §4.6) with its plugins, the model regions node code keeps across
// calls, and the release mirroring of §4.7 (node boundary for pager workers, prompt epoch for
// ledger workers, the host's free and evict requests).
//
// Threading: every member but block() is used by the node thread only (the runtime queues the
// host's free/evict requests there), so node code and releases never race.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/ipc/channel.hpp"
#include "orch/ipc/control_segment.hpp"
#include "orch/ipc/pin_registrar.hpp"
#include "orch/ipc/segment_table.hpp"
#include "orch/ipc/unique_fd.hpp"
#include "orch/plugin/allocator.h"
#include "orch/plugin/ledger.h"
#include "orch/plugins/applied_settings.hpp"
#include "orch/plugins/backend_device.hpp"
#include "orch/plugins/loader.hpp"
#include "orch/plugins/memory_manager.hpp"
#include "orch/support/result.hpp"

namespace orch::worker {

// Byte sums that cannot wrap: a model size plus the reserve, a free reading plus a request.
inline std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) noexcept {
  return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

// The host settings of the handshake, read back from the hello response (docs/protocol.md).
struct host_settings {
  std::uint32_t slot = 0;
  std::string device = "cpu";
  int ordinal = 0;
  std::string backend_plugin;    // the device's backend; empty: none (cpu without its plugin)
                                 // (the pool is registered with it when pinned_memory is on)
  std::string host_manager;      // "pager" or "ledger": what the host itself runs
  std::uint32_t level = 0;       // the level the pager runs at (the host's, or the adapter's)
  std::string pager_plugin;      // path, empty: no pager plugin serves this backend
  std::string ledger_plugin;     // path, empty: none
  std::string allocator_plugin;  // path, empty: none
  std::string no_pager_reason;   // why pager_plugin is empty ("no pager plugin for backend X")
  plugins::host_memory_settings memory;
  std::uint32_t heartbeat_ms = 1000;
  struct pool_segment_info {
    std::uint32_t segment = 0;
    std::uint64_t total_size = 0;
  };
  std::vector<pool_segment_info> pool_segments;  // in the order the fds were sent
  static result<host_settings> from_json(const nlohmann::json& j);
};

// A model node code keeps across calls: pager pages, or a whole ledger model on the device.
struct model_region {
  std::string key;
  std::uint64_t size = 0;
  orch_region* pager_region = nullptr;        // pager workers
  orch_ledger_model* ledger_model = nullptr;  // ledger workers
  std::uint64_t held = 0;                     // ledger: device bytes held for it
  std::uint64_t handle = 0;                   // ledger: the physical allocation (held > 0)
};

// What a host free or evict request actually released, measured on the device.
struct release_receipt {
  std::uint64_t freed = 0;     // device bytes given back
  std::uint64_t resident = 0;  // model bytes still on the device afterwards
};

class worker_memory {
 public:
  // control_fd (read-only to us), slot_fd (our own slot: counters and control block) and pool
  // fds come from the host's fd socket; sim_fd is -1 off sim.
  static result<std::unique_ptr<worker_memory>> setup(const host_settings& s,
                                                      ipc::unique_fd control_fd,
                                                      ipc::unique_fd slot_fd,
                                                      std::vector<ipc::unique_fd> pool_fds,
                                                      ipc::unique_fd sim_fd);
  worker_memory(const worker_memory&) = delete;
  worker_memory& operator=(const worker_memory&) = delete;
  ~worker_memory();  // regions, allocator and pager closed, plugins shut down, then segments

  ipc::segment_table& segments() noexcept { return *segments_; }
  ipc::budget_account& budget() noexcept { return *budget_; }
  // The slow path of this worker's pinned reservations: a pinned_grant request to the host over
  // `channel`, waited for. Call it from the node thread only, never from the io thread that
  // delivers the answer. Set before the first call.
  void ask_grants_over(std::shared_ptr<ipc::channel> channel);
  ipc::control_block& block() noexcept { return control_->block(settings_.slot); }
  const host_settings& settings() const noexcept { return settings_; }
  const plugins::manager_choice& manager() const noexcept { return manager_; }
  bool is_pager() const noexcept { return manager_.manager == plugins::memory_manager::pager; }

  // The model named `key`, created (and on the ledger loaded) on first use. Errors:
  // "unsupported" (no pager and no ledger), "out_of_memory" (the device cannot hold it: see
  // last_required()), a plugin status name.
  result<model_region*> region(const std::string& key, std::uint64_t bytes, bool& created);
  orch_status fault(model_region* r, std::uint64_t offset, std::uint64_t size);
  orch_status unpin(model_region* r, std::uint64_t offset, std::uint64_t size);
  orch_status cast_buffer(std::uint32_t stream, std::uint64_t size, std::uint64_t* address);
  // Bytes the last refused model load needed (0: none since the last call began).
  std::uint64_t last_required() const noexcept { return last_required_; }

  // §4.7, pager workers: after every node, failed or not: unpins what the node left pinned,
  // resets the cast buffers and the watermark limits.
  void release_node_boundary() noexcept;
  // §4.7, ledger workers: at the start of every call; resets the cast buffers when the prompt
  // epoch changed, and on every call when the epoch is missing.
  void cast_epoch_boundary(std::optional<std::uint64_t> epoch) noexcept;
  void begin_call() noexcept { last_required_ = 0; }

  // The host's requests (DESIGN.md §4.7): free unloads every model and/or drops caches (cast
  // buffers); evict frees at least `bytes` of model memory if it can.
  release_receipt free(bool unload_models, bool drop_caches) noexcept;
  release_receipt evict(std::uint64_t bytes) noexcept;
  // Each model: key, size, resident bytes (the host's stand-ins).
  nlohmann::json describe_models() const;

  // Publishes a stats snapshot into the control block (single writer: the caller serialises).
  void publish(std::uint64_t epoch, std::uint64_t calls) noexcept;
  // The plugins, manager and applied-settings hash for the ready message.
  nlohmann::json describe_plugins() const;
  std::uint64_t settings_hash() const noexcept { return settings_hash_; }

 private:
  worker_memory() = default;
  status open_pager();
  void close_pager() noexcept;
  status open_ledger();
  status open_allocator();
  status load_ledger_model(model_region& r);
  // The memory settings this process runs with, as its plugins report them.
  plugins::host_memory_settings applied_settings() const;
  // The device memory of every ledger model follows the ledger's figures; the first failed
  // allocation's status (ORCH_OK when every one succeeded).
  orch_status sync_ledger_memory() noexcept;
  std::uint64_t resident_bytes() const noexcept;
  std::uint64_t reset_cast_buffers() noexcept;  // returns the bytes the buffers held

  host_settings settings_;
  ipc::unique_fd sim_fd_;
  // Declared before the registrar and the segments: they unregister before the device closes.
  std::unique_ptr<plugins::backend_device> backend_;
  std::unique_ptr<ipc::pin_registrar> registrar_;
  std::unique_ptr<ipc::segment_table> segments_;
  std::optional<ipc::control_segment> control_;
  std::unique_ptr<ipc::budget_account> budget_;
  plugins::manager_choice manager_;
  std::uint32_t level_ = 0;  // the level the plugins run at (0 under the ledger)
  std::unique_ptr<plugins::plugin_library> pager_lib_;
  std::unique_ptr<plugins::plugin_library> ledger_lib_;
  std::unique_ptr<plugins::plugin_library> allocator_lib_;
  const orch_pager_api* pager_api_ = nullptr;
  const orch_ledger_api* ledger_api_ = nullptr;
  const orch_allocator_api* allocator_api_ = nullptr;
  orch_pager* pager_ = nullptr;
  orch_ledger* ledger_ = nullptr;
  std::uint64_t ledger_budget_ = 0;
  orch_allocator* allocator_ = nullptr;
  std::map<std::string, std::unique_ptr<model_region>> regions_;
  struct pin {
    model_region* region;
    std::uint64_t offset;
    std::uint64_t size;
  };
  std::vector<pin> pins_;  // faulted by the node now running and not yet unpinned
  std::optional<std::uint64_t> cast_epoch_;
  bool cast_epoch_seen_ = false;
  std::uint64_t boundary_releases_ = 0;
  std::uint64_t last_boundary_ns_ = 0;
  std::uint64_t last_required_ = 0;
  std::uint64_t settings_hash_ = 0;
  bool pool_pinned_ = false;  // the pool is registered with the device (page-locked on GPUs)
};

}  // namespace orch::worker
