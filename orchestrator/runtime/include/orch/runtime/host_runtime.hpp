// host_runtime: one running host for a deployment (docs/runtime.md): its shared memory, the io
// thread that owns every channel, the supervisor, and the node catalogue the workers reported.
// Public calls come from the caller's thread and are run on the io thread, so the supervisor,
// pool and lease table need no locks.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "orch/manifests/deployment.hpp"
#include "orch/manifests/diagnostic.hpp"
#include "orch/manifests/inventory.hpp"
#include "orch/runtime/host_memory.hpp"
#include "orch/runtime/memory_plan.hpp"
#include "orch/runtime/node_catalogue.hpp"
#include "orch/runtime/stand_in_table.hpp"
#include "orch/runtime/supervisor.hpp"
#include "orch/runtime/worker_specs.hpp"

namespace orch::runtime {

// A pack env that runs no worker, and why (env missing, Python pack, not built).
struct host_options {
  std::string worker_executable;  // comfy-orch-worker
  std::uint32_t max_workers = 64;  // control slots kept: at least the deployment's envs
  // What a Python env's worker needs (install_layout.hpp); empty: Python packs are skipped with
  // that reason.
  std::filesystem::path worker_library;       // liborch_worker.so
  std::filesystem::path python_package_root;  // the directory holding comfy_orch/
  // The supervisor's process launcher (supervisor_options::launcher); null: real processes.
  std::shared_ptr<process::process_launcher> launcher{};
};

class host_runtime {
 public:
  // Creates shared memory and spawns one worker per usable env, native or Python. A pack whose env
  // is missing is skipped (reported, never fatal). Errors: host_memory errors.
  static result<std::unique_ptr<host_runtime>> start(const manifests::deployment& d,
                                                     const manifests::inventory& inv,
                                                     host_options options);
  host_runtime(const host_runtime&) = delete;
  host_runtime& operator=(const host_runtime&) = delete;
  ~host_runtime();  // shutdown(), if not done

  // Waits until every worker is ready or failed, up to `limit`; then builds the catalogue.
  // Returns false when the limit passed first.
  bool wait_settled(std::chrono::milliseconds limit);
  const node_catalogue& catalogue() const noexcept { return catalogue_; }
  const std::vector<skipped_env>& skipped() const noexcept { return skipped_; }
  std::vector<std::string> catalogue_clashes() const { return clashes_; }

  // ComfyUI's free_memory over processes (docs/memory-semantics.md), for a load of `required` bytes
  // that `requester`'s worker could not make: walks the host's models and the stand-ins of
  // every worker's models in ComfyUI's order until `required` bytes are free on the device,
  // evicting a stand-in by an evict request to its worker and counting what the worker's
  // receipt says it freed. Only the host's own device can be polled here, so only a requester
  // on it is served, and only stand-ins on it are candidates (a cpu pack's models free no
  // device bytes). Call from any thread but the io thread.
  std::vector<eviction_step> free_through_stand_ins(const std::string& requester,
                                                    std::uint64_t required);
  // One worker's evict request for `bytes`, answered with its receipt ({freed, resident,
  // models}). With a generation, a worker replaced since is refused ("stale_generation") rather
  // than asked: what a stand-in of the old one stood for is gone. Errors: "not_ready", the
  // call's; "wrong_thread" on the io thread (an event callback), which the answer needs.
  result<nlohmann::json> evict_env(const std::string& env, std::optional<std::uint32_t> generation,
                                   std::uint64_t bytes);
  // ComfyUI's POST /free, broadcast: each ready worker's receipt by env. With `wait_for_busy`
  // false, a worker inside a call is asked all the same, but not waited for: its entry is
  // {"deferred": true}, and its receipt, after its node, goes to the log and the memory events.
  std::map<std::string, result<nlohmann::json>> free_all(bool unload_models, bool drop_caches,
                                                         bool wait_for_busy = true);

  // Told of every eviction and free with its receipt (kind "eviction", "free", or "free_failed"
  // when a worker could not free), the env, and a line that says what was freed, on the thread
  // that asked for it: the timeline's markers (memory_sampler.hpp). Set before anything is
  // evicted or freed.
  using memory_event_sink =
      std::function<void(const std::string& kind, const std::string& env, const std::string& text)>;
  void set_memory_event_sink(memory_event_sink sink) { memory_events_ = std::move(sink); }

  // Kills the workers that are inside a call (supervisor::kill_busy). Not on the io thread.
  std::size_t kill_busy_workers(const std::string& why);

  // Graceful (shutdown requests, `grace` for workers to exit), then forced. Idempotent.
  void shutdown(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));

  // Runs `fn` on the io thread and returns its result.
  // On the io thread itself (a callback that calls back in), `fn` runs at once: waiting for
  // the thread to run it would wait on itself forever.
  template <typename F>
  auto on_io_thread(F&& fn) -> decltype(fn()) {
    using R = decltype(fn());
    if (on_the_io_thread()) return fn();
    std::packaged_task<R()> task(std::forward<F>(fn));
    auto future = task.get_future();
    boost::asio::post(io_, [&task] { task(); });
    return future.get();
  }
  // True on the io thread, where a call that waits for a worker's answer would wait on itself.
  bool on_the_io_thread() const noexcept {
    return std::this_thread::get_id() == io_thread_id_.load();
  }
  // True once shutdown() began: on_io_thread() must not be called after it.
  bool stopped() const noexcept { return stopped_; }
  boost::asio::io_context& io() noexcept { return io_; }
  supervisor& workers() noexcept { return *supervisor_; }  // io thread only
  host_memory& memory() noexcept { return *memory_; }      // io thread only
  const stand_in_table& stand_ins() const noexcept { return stand_ins_; }  // io thread only
  // A worker's models report (validated by the supervisor, which calls this on the io thread):
  // the env's stand-ins become exactly `models`, unless a report with a sequence number at least
  // `seq` was applied already. Sequence 0 is the worker's loss: its stand-ins go.
  void update_stand_ins(const std::string& env, const nlohmann::json& models, std::uint64_t seq);
  // After a node's call in `env` that named the model files `asked` (orch/fleet/prompt_needs.hpp):
  // each stand-in of the env whose id is not in `before` (the env's ids before the call) was
  // created by that call, and is labelled with them (model_entry::asked). io thread only.
  void label_new_stand_ins(const std::string& env, const std::set<std::string>& before,
                           const std::vector<std::string>& asked);
  // The newest models report applied for `env` ([{key, size, resident}]), null when none: what
  // `diverge` holds the stand-ins against. io thread only.
  const nlohmann::json& reported_models(const std::string& env) const;
  const memory_plan& plan() const noexcept { return *plan_; }
  const manifests::deployment& deployment() const noexcept { return deployment_; }

 private:
  host_runtime() = default;
  manifests::deployment deployment_;
  boost::asio::io_context io_;
  std::unique_ptr<host_memory> memory_;
  std::unique_ptr<memory_plan> plan_;
  std::unique_ptr<supervisor> supervisor_;
  stand_in_table stand_ins_;  // the host's models (none when headless) and every worker's
  std::map<std::string, manifests::device_spec> env_devices_;  // each worker's device
  std::map<std::string, std::uint64_t> models_seq_;  // the newest models report applied per env
  std::map<std::string, nlohmann::json> reported_models_;  // and its models
  memory_event_sink memory_events_;
  std::thread io_thread_;
  std::atomic<std::thread::id> io_thread_id_{};  // set by the io thread itself as it starts
  node_catalogue catalogue_;
  std::vector<skipped_env> skipped_;
  std::vector<std::string> clashes_;
  bool stopped_ = false;
};

// The catalogue entries of one worker's ready message (docs/protocol.md).
std::vector<node_class> classes_from_ready(const nlohmann::json& nodes, const std::string& env);

}  // namespace orch::runtime
