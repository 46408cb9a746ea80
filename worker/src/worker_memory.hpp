// worker_memory: what shapes memory in one worker, set up from the host's handshake settings
// (docs/memory-semantics.md): the pool's segments mapped and registered here, the worker's
// slot of the one pinned budget and its control block, the memory manager this worker resolved
// (pager or ledger) with its plugins, the model regions node code keeps across
// calls, and the release mirroring (node boundary for pager workers, prompt epoch for
// ledger workers, the host's free and evict requests).
//
// Threading: every member but block() is used by the node thread only (the runtime queues the
// host's free/evict requests there), so node code and releases never race.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/ipc/channel.hpp"
#include "orch/ipc/control_segment.hpp"
#include "orch/ipc/handshake.hpp"
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

#include "model_store.hpp"

namespace orch::worker {

// What a host free or evict request actually released, measured on the device.
struct release_receipt {
  std::uint64_t freed = 0;     // device bytes given back
  std::uint64_t resident = 0;  // model bytes still on the device afterwards
};

class worker_memory {
 public:
  // control_fd (read-only to us), slot_fd (our own slot: counters and control block) and pool
  // fds come from the host's fd socket; sim_fd is -1 off sim.
  static result<std::unique_ptr<worker_memory>> setup(const ipc::handshake_settings& s,
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
  const ipc::handshake_settings& settings() const noexcept { return settings_; }
  const plugins::manager_choice& manager() const noexcept { return manager_; }
  bool is_pager() const noexcept { return manager_.manager == plugins::memory_manager::pager; }

  // The model named `key`, created (and on the ledger loaded) on first use. Errors carry the
  // plugin host's codes (orch/plugins/errc.hpp), so plugins::error_status() gives the node its
  // status back: unsupported (no pager and no ledger), out_of_memory (the device cannot hold it:
  // see last_required()), or what the pager or the ledger answered.
  result<model_region*> region(const std::string& key, std::uint64_t bytes, bool& created);
  orch_status fault(model_region* r, std::uint64_t offset, std::uint64_t size);
  orch_status unpin(model_region* r, std::uint64_t offset, std::uint64_t size);
  orch_status cast_buffer(std::uint32_t stream, std::uint64_t size, std::uint64_t* address);
  // Bytes the last refused model load needed (0: none since the last call began).
  std::uint64_t last_required() const noexcept { return models_ ? models_->last_required() : 0; }

  // Pager workers: after every node, failed or not: unpins what the node left pinned,
  // resets the cast buffers and the watermark limits.
  void release_node_boundary() noexcept;
  // Ledger workers: at the start of every call; resets the cast buffers when the prompt
  // epoch changed, and on every call when the epoch is missing.
  void cast_epoch_boundary(std::optional<std::uint64_t> epoch) noexcept;
  void begin_call() noexcept {
    if (models_) models_->begin_call();
  }

  // Host requests (docs/memory-semantics.md): free unloads every model and/or drops caches (cast
  // buffers); evict frees at least `bytes` of model memory if it can.
  release_receipt free(bool unload_models, bool drop_caches) noexcept;
  release_receipt evict(std::uint64_t bytes) noexcept;
  // Each model: key, size, resident bytes (the host's stand-ins).
  nlohmann::json describe_models() const;

  // Publishes a stats snapshot into the control block (single writer: the caller serialises).
  void publish(std::uint64_t epoch, std::uint64_t calls) noexcept;
  // The plugins, manager and applied-settings hash for the ready message.
  nlohmann::json describe_plugins() const;
  // The pinned budget this worker uses and the RAM and cgroup it sees itself (describe_plugins).
  nlohmann::json memory_view() const;
  std::uint64_t settings_hash() const noexcept { return settings_hash_; }

 private:
  worker_memory() = default;
  status open_pager();
  void close_pager() noexcept;
  status open_ledger();
  status open_allocator();
  // The memory settings this process runs with, as its plugins report them.
  plugins::host_memory_settings applied_settings() const;
  // The plugins' names, versions and levels into the stats snapshot.
  void report_plugins(ipc::stats_snapshot& s) const noexcept;
  std::uint64_t resident_bytes() const noexcept { return models_ ? models_->resident_bytes() : 0; }
  std::uint64_t reset_cast_buffers() noexcept;  // returns the bytes the buffers held

  ipc::handshake_settings settings_;
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
  orch_pager* pager_ = nullptr;  // the allocator's source under the pager; models_ owns it
  orch_allocator* allocator_ = nullptr;
  // The models node code keeps (pager or ledger store); null without either plugin.
  std::unique_ptr<model_store> models_;
  std::optional<std::uint64_t> cast_epoch_;
  bool cast_epoch_seen_ = false;
  std::uint64_t boundary_releases_ = 0;
  std::uint64_t last_boundary_ns_ = 0;
  std::uint64_t settings_hash_ = 0;
  bool pool_pinned_ = false;  // the pool is registered with the device (page-locked on GPUs)
};

}  // namespace orch::worker
