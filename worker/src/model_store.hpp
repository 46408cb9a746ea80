// model_store: where a worker keeps the models its nodes ask for by key (docs/nodes.md), behind
// one interface with one implementation per memory manager (docs/memory-semantics.md):
//   - pager_model_store: a pager region per model; pages fault in and are evicted one by one, and
//     what a node pins is unpinned at its node boundary;
//   - ledger_model_store: a ledger model per model, loaded whole on the backend device in
//     ComfyUI's order and unloaded whole.
// worker_memory talks to the store only, never to the plugins behind it.
//
// Threading: the node thread only (worker_memory.hpp).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "orch/ipc/control_block.hpp"
#include "orch/plugin/ledger.h"
#include "orch/plugin/pager.h"
#include "orch/plugins/backend_device.hpp"
#include "orch/support/result.hpp"

namespace orch::worker {

// A model node code keeps across calls: pager pages, or a whole ledger model on the device.
struct model_region {
  std::string key;
  std::uint64_t size = 0;
  orch_region* pager_region = nullptr;        // pager store
  orch_ledger_model* ledger_model = nullptr;  // ledger store
  std::uint64_t held = 0;                     // ledger: device bytes held for it
  std::uint64_t handle = 0;                   // ledger: the physical allocation (held > 0)
};

class model_store {
 public:
  model_store() = default;
  model_store(const model_store&) = delete;
  model_store& operator=(const model_store&) = delete;
  virtual ~model_store() = default;

  // The model named `key`, created (and on the ledger loaded) on first use; a model asked for
  // again is loaded again (reused(): on the pager its pages may come back). Errors carry the
  // plugin host's codes (orch/plugins/errc.hpp), so plugins::error_status() gives a node its
  // status back: out_of_memory (the device cannot hold it: see last_required()), or what the
  // pager or the ledger answered.
  result<model_region*> region(const std::string& key, std::uint64_t bytes, bool& created);
  virtual orch_status fault(model_region& r, std::uint64_t offset, std::uint64_t size) = 0;
  virtual orch_status unpin(model_region& r, std::uint64_t offset, std::uint64_t size) = 0;

  // docs/memory-semantics.md. The node boundary: what the node left pinned is unpinned, and the
  // pager's watermark limits reset; returns how many pins were released.
  virtual std::size_t release_node_boundary() noexcept { return 0; }
  // The host's free with unload_models: every model leaves the device.
  virtual void unload_all() noexcept = 0;
  // The host's evict: at least `bytes` of model memory freed, if it can be.
  virtual void evict(std::uint64_t bytes) noexcept = 0;
  // Model bytes on the device now.
  virtual std::uint64_t resident_bytes() const noexcept = 0;

  // Each model: key, size, resident bytes (the host's stand-ins).
  nlohmann::json describe_models() const;
  // The device's figures for the stats snapshot, as this store sees them.
  virtual void publish(ipc::stats_snapshot& s) const noexcept = 0;

  void begin_call() noexcept { last_required_ = 0; }
  // Bytes the last refused model load needed (0: none since the last call began).
  std::uint64_t last_required() const noexcept { return last_required_; }

 protected:
  // Creates the model and lists it in regions_ (the ledger lists it before it loads).
  virtual result<model_region*> create(const std::string& key, std::uint64_t bytes) = 0;
  virtual std::uint64_t resident_bytes(const model_region& r) const noexcept = 0;
  // A node asked for an existing model: a load, as ComfyUI's model load is.
  virtual void reused(model_region&) noexcept {}

  std::map<std::string, std::unique_ptr<model_region>> regions_;
  std::uint64_t last_required_ = 0;
};

// The pager's store: owns the pager device `pager` (closed with the store) but not its plugin.
std::unique_ptr<model_store> make_pager_store(const orch_pager_api& api, orch_pager* pager);

// The ledger's store: owns the ledger `ledger` (closed with the store), whose budget is
// `budget` bytes, and the device memory of its models on `backend` (which outlives it).
// `reserve_vram` is ComfyUI's extra reserve a model load must leave free.
std::unique_ptr<model_store> make_ledger_store(const orch_ledger_api& api, orch_ledger* ledger,
                                               std::uint64_t budget,
                                               plugins::backend_device& backend,
                                               std::uint64_t reserve_vram);

}  // namespace orch::worker
