// The host runtime's releases (docs/memory-semantics.md): the stand-ins that follow every
// worker's models reports, ComfyUI's free_memory walked over them, an eviction from one worker,
// and the /free broadcast.
#include <algorithm>
#include <future>
#include <mutex>
#include <optional>
#include <set>

#include <spdlog/spdlog.h>

#include "orch/runtime/errc.hpp"
#include "orch/runtime/host_runtime.hpp"
#include "orch/support/json_fields.hpp"

namespace orch::runtime {

void host_runtime::update_stand_ins(const std::string& env, const nlohmann::json& models,
                                    std::uint64_t seq) {
  // A lost worker (empty list, sequence 0) takes its stand-ins with it; its replacement counts
  // from 1 again.
  if (seq == 0) {
    stand_ins_.remove_env(env);
    models_seq_.erase(env);
    reported_models_.erase(env);
    return;
  }
  // A report older than one already applied would resurrect what a newer one removed.
  auto& last = models_seq_[env];
  if (seq <= last) return;
  last = seq;
  reported_models_[env] = models;
  std::vector<std::string> present;
  for (const auto& m : models) {  // validated by the supervisor
    const std::string id = env + "/" + m["key"].get<std::string>();
    present.push_back(id);
    const auto resident = m["resident"].get<std::uint64_t>();
    if (stand_ins_.find(id) == nullptr) {
      model_entry e;
      e.id = id;
      e.env = env;
      e.size = m["size"].get<std::uint64_t>();
      e.resident = resident;
      e.receipt_seq = seq;
      stand_ins_.load(std::move(e));
    } else {
      stand_ins_.apply_receipt(id, resident, seq);
    }
  }
  std::vector<std::string> gone;
  for (const auto& e : stand_ins_.entries()) {
    if (e.env == env && std::find(present.begin(), present.end(), e.id) == present.end()) {
      gone.push_back(e.id);
    }
  }
  for (const auto& id : gone) stand_ins_.remove(id);
}

void host_runtime::label_new_stand_ins(const std::string& env, const std::set<std::string>& before,
                                       const std::vector<std::string>& asked) {
  std::vector<std::string> created;
  for (const auto& e : stand_ins_.entries())
    if (e.env == env && before.count(e.id) == 0) created.push_back(e.id);
  for (const auto& id : created) stand_ins_.set_asked(id, asked);
}

const nlohmann::json& host_runtime::reported_models(const std::string& env) const {
  static const nlohmann::json none;
  const auto it = reported_models_.find(env);
  return it == reported_models_.end() ? none : it->second;
}

std::vector<eviction_step> host_runtime::free_through_stand_ins(const std::string& requester,
                                                                std::uint64_t required) {
  const manifests::device_spec& device = deployment_.host.device;
  auto on_host_device = [&](const std::string& env) {
    const auto it = env_devices_.find(env);
    return env.empty() || it == env_devices_.end() || it->second == device;
  };
  if (!on_host_device(requester)) {
    spdlog::info("env {} runs on {}, not on the host's device {}: no stand-in can make room there",
                 requester, env_devices_.at(requester).to_string(), device.to_string());
    return {};
  }
  // More than the device holds cannot be made free; evicting everyone would only cost them.
  // (An unreadable total is no limit: the free reading below then decides.)
  const std::uint64_t device_total = on_io_thread([this]() -> std::uint64_t {
    auto* dev = memory_->backend();
    std::uint64_t bytes = 0;
    if (dev == nullptr || dev->api().device_total_mem(dev->device(), &bytes) != ORCH_OK)
      return UINT64_MAX;
    return bytes;
  });
  if (required > device_total) {
    spdlog::warn("env {} needs {} bytes, more than device {} holds ({}): nothing evicted",
                 requester, required, device.to_string(), device_total);
    return {};
  }
  // The walk runs here on a copy: each eviction waits for a worker's receipt, which the io
  // thread delivers. The receipts update the real stand-ins (sequence-checked) as they arrive.
  stand_in_table walk = on_io_thread([this] { return stand_ins_; });
  std::vector<std::string> elsewhere;
  for (const auto& e : walk.entries()) {
    if (!on_host_device(e.env)) elsewhere.push_back(e.id);
  }
  for (const auto& id : elsewhere) walk.remove(id);
  // An unreadable device reads as "enough": evicting every stand-in on a failed poll would be
  // worse than refusing the one load that asked.
  auto free_now = [this]() -> std::uint64_t {
    return on_io_thread([this]() -> std::uint64_t {
      auto* dev = memory_->backend();
      std::uint64_t free_bytes = 0, total = 0;
      if (dev == nullptr || dev->api().mem_get_info(dev->device(), &free_bytes, &total) != ORCH_OK)
        return UINT64_MAX;
      return free_bytes;
    });
  };
  auto evict = [this](const model_entry& e, std::uint64_t bytes) -> std::uint64_t {
    if (!e.is_stand_in()) return 0;  // headless: the host has no models of its own
    auto r = evict_env(e.env, std::nullopt, bytes);
    if (!r) {
      spdlog::warn("evicting {} bytes of {} failed: {}", bytes, e.id, r.err().message);
      return 0;
    }
    const auto freed = unsigned_field(*r, "freed");
    spdlog::info("evicted {} of {} bytes asked from {} through its stand-in (receipt {})", freed,
                 bytes, e.id, unsigned_field(*r, "sequence"));
    return freed;
  };
  return walk.free_memory(required, /*for_dynamic=*/false, free_now, evict);
}

std::map<std::string, result<nlohmann::json>> host_runtime::free_all(bool unload_models,
                                                                     bool drop_caches,
                                                                     bool wait_for_busy) {
  // On the io thread (an event callback) the receipts could never arrive: nothing is asked.
  if (on_the_io_thread()) {
    spdlog::warn("free was called from an event callback, on the io thread: nothing freed");
    return {};
  }
  // Shared with the handlers: they may run after this call returned only if a worker never
  // answers, which its call deadline (and the loss that follows) rules out.
  struct state {
    std::mutex mutex;
    std::set<std::string> deferred;  // busy when asked, and not waited for
    std::map<std::string, result<nlohmann::json>> receipts;
    std::optional<std::size_t> expected;  // set once every request went out
    std::promise<void> all;
  };
  auto st = std::make_shared<state>();
  auto finished = st->all.get_future();
  on_io_thread([&] {
    if (!wait_for_busy) st->deferred = supervisor_->busy_envs();
    // No lock is held while the requests go out, so a handler may never wait on this one.
    const std::size_t sent = supervisor_->free_memory(
        unload_models, drop_caches, [st](const std::string& env, result<nlohmann::json> r) {
          std::lock_guard lock(st->mutex);
          if (st->deferred.count(env) > 0) {  // answered after its node: said, not waited for
            spdlog::info("free: worker {}: {}", env,
                         r ? "freed " + std::to_string(unsigned_field(*r, "freed")) + " bytes"
                           : "failed: " + r.err().message);
            return;
          }
          st->receipts.emplace(env, std::move(r));
          if (st->expected && st->receipts.size() == *st->expected) st->all.set_value();
        });
    std::lock_guard lock(st->mutex);
    st->expected = sent - std::min(sent, st->deferred.size());  // a busy worker is ready: asked
    if (st->receipts.size() == sent) st->all.set_value();
    // A worker busy in a long node answers after it: say what the wait is for.
    if (sent > 0) spdlog::info("free: waiting for {} workers' receipts", sent);
  });
  finished.get();
  std::lock_guard lock(st->mutex);
  for (const auto& env : st->deferred) st->receipts.emplace(env, nlohmann::json{{"deferred", true}});
  if (memory_events_) {
    for (const auto& [env, r] : st->receipts) {
      memory_events_(r ? "free" : "free_failed", env,
                     r ? "freed " + std::to_string(unsigned_field(*r, "freed")) +
                             " bytes (receipt " + std::to_string(unsigned_field(*r, "sequence")) +
                             ")"
                       : "free failed: " + r.err().message);
    }
  }
  return std::move(st->receipts);
}

result<nlohmann::json> host_runtime::evict_env(const std::string& env,
                                               std::optional<std::uint32_t> generation,
                                               std::uint64_t bytes) {
  if (on_the_io_thread())
    return error{runtime_errc::wrong_thread,
                 "evict was called from an event callback, on the thread that delivers the "
                 "worker's receipt: call it from another thread"};
  std::promise<result<nlohmann::json>> done;
  auto receipt = done.get_future();
  on_io_thread([&] {
    // Checked and sent in one io-thread task: the worker cannot be replaced in between.
    if (generation) {
      const auto& all = supervisor_->workers();
      const auto it =
          std::find_if(all.begin(), all.end(), [&](const worker_info& w) { return w.env == env; });
      if (it == all.end() || it->generation != *generation) {
        return done.set_value(
            error{runtime_errc::stale_generation, "env " + env + "'s worker generation " +
                                                      std::to_string(*generation) +
                                                      " is gone: its models went with it"});
      }
    }
    supervisor_->evict(env, bytes,
                       [&done](result<nlohmann::json> r) { done.set_value(std::move(r)); });
  });
  auto r = receipt.get();
  if (memory_events_ && r) {
    memory_events_("eviction", env,
                   "asked " + std::to_string(bytes) + " bytes, freed " +
                       std::to_string(unsigned_field(*r, "freed")) + " (receipt " +
                       std::to_string(unsigned_field(*r, "sequence")) + ")");
  }
  return r;
}

}  // namespace orch::runtime
