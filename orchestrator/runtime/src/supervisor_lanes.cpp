// The supervisor's side of its workers' call lanes (call_lane.hpp; docs/runtime.md, "The call
// lane"): each env's lane for other threads, what a lane asks of the io thread, and the call
// durations of both paths. Opening and closing a generation's lane is the spawn's and the loss's
// (supervisor_spawn.cpp, supervisor.cpp); the router's share of the worker, the router's.
#include <boost/asio/post.hpp>

#include "orch/runtime/supervisor.hpp"

namespace orch::runtime {

using nlohmann::json;

std::shared_ptr<call_lane> supervisor::make_lane(const std::string& env) {
  auto made = std::make_shared<call_lane>(env, lane_handlers(env));
  std::lock_guard lock(lanes_mutex_);
  lanes_[env] = made;
  return made;
}

std::shared_ptr<call_lane> supervisor::lane(const std::string& env) const {
  std::lock_guard lock(lanes_mutex_);
  auto it = lanes_.find(env);
  return it == lanes_.end() ? nullptr : it->second;
}

call_lane::handlers supervisor::lane_handlers(const std::string& env) {
  // Each posts to the io thread, where the worker's state lives; the supervisor may be gone by
  // the time it runs (its alive_ flag says so).
  auto on_io = [this, alive = std::weak_ptr<bool>(alive_), env](std::function<void(worker&)> fn) {
    boost::asio::post(io_, [this, alive, env, fn = std::move(fn)] {
      if (alive.expired()) return;
      if (auto it = workers_.find(env); it != workers_.end()) fn(*it->second);
    });
  };
  call_lane::handlers h;
  h.lose = [this, on_io](std::uint32_t generation, std::string why) {
    on_io([this, generation, why = std::move(why)](worker& w) { lose(w, generation, why); });
  };
  h.dispatch = [this, on_io] { on_io([this](worker& w) { dispatch(w); }); };
  h.report_models = [this, on_io](std::uint32_t generation, json answer) {
    on_io([this, generation, answer = std::move(answer)](worker& w) {
      // Not for a worker lost since: its stand-ins went with it.
      if (w.info.generation == generation && w.info.state == worker_state::ready)
        report_models(w.spec.env, answer);
    });
  };
  return h;
}

std::map<std::string, call_histogram> supervisor::call_durations() const {
  std::map<std::string, call_histogram> out = call_durations_;
  std::lock_guard lock(lanes_mutex_);
  for (const auto& entry : lanes_) {
    const call_histogram on_lane = entry.second->durations();
    if (on_lane.count > 0) out[entry.first].add(on_lane);
  }
  return out;
}

}  // namespace orch::runtime
