// The supervisor's router (docs/runtime.md): node calls queued per worker and sent one at a time
// with their deadline, pings, and the interrupt broadcast. A call that outlives its deadline
// loses the worker (its state is unknown afterwards); one whose worker is lost is answered by
// lose() with worker_died; a failed env's queue is answered with pack_failed.
#include <spdlog/spdlog.h>

#include "orch/ipc/response_bodies.hpp"
#include "orch/runtime/errc.hpp"
#include "orch/runtime/supervisor.hpp"

namespace orch::runtime {

using nlohmann::json;

void supervisor::call(const std::string& env, json body, call_done done) {
  auto it = workers_.find(env);
  if (it == workers_.end()) {
    return done(error{runtime_errc::unknown_env, "no worker runs env " + env});
  }
  worker& w = *it->second;
  if (w.info.state == worker_state::failed || w.info.state == worker_state::stopped ||
      w.info.state == worker_state::stopping) {
    return done(error{runtime_errc::pack_failed,
                      "env " + env + " is " + to_string(w.info.state) + ": " + w.info.last_error});
  }
  w.queue.push_back({std::move(body), std::move(done)});
  dispatch(w);
}

void supervisor::dispatch(worker& w) {
  if (w.info.state != worker_state::ready || w.in_flight) return;
  if (w.queue.empty()) return w.lane->release_from_router();
  // While a call on the lane holds the worker, the queue waits: the lane's end dispatches it.
  if (!w.lane->take_for_router()) return;
  w.in_flight = std::make_unique<queued_call>(std::move(w.queue.front()));
  w.queue.pop_front();
  const std::uint32_t generation = w.info.generation;
  std::weak_ptr<worker> weak = w.self;
  const auto sent = std::chrono::steady_clock::now();
  w.channel->request(ipc::message_type::call, w.in_flight->body, w.spec.call_timeout,
                     [this, weak, generation, sent](result<ipc::message> r) {
                       auto wp = weak.lock();
                       if (!wp || wp->info.generation != generation || !wp->in_flight) return;
                       call_durations_[wp->spec.env].observe(
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - sent)
                               .count());
                       if (!r && r.err().code == ipc::channel_errc::deadline_exceeded) {
                         // The worker's state is unknown after a call it never finished.
                         auto call = std::move(wp->in_flight);
                         lose(*wp, generation, "did not answer a call within its deadline");
                         call->done(r.err());
                         return;
                       }
                       if (!r && r.err().code == ipc::channel_errc::peer_lost) {
                         return;  // lose() answers the call with worker_died
                       }
                       auto call = std::move(wp->in_flight);
                       // Free for the lane before the caller hears of the answer: its next call
                       // may be on the lane (dispatch releases it too, later).
                       if (wp->queue.empty()) wp->lane->release_from_router();
                       if (!r) {
                         call->done(r.err());
                       } else if (auto st = ipc::check_call_response(r->body); !st) {
                         // A worker is a process we do not trust: a body without the shape of
                         // docs/protocol.md fails the call, and nothing in it is believed, its
                         // models report included.
                         call->done(error{runtime_errc::bad_response, st.err().message});
                       } else {
                         report_models(wp->spec.env, r->body);
                         call->done(std::move(r->body));
                       }
                       dispatch(*wp);
                     });
}

void supervisor::fail_queue(worker& w) {
  auto queue = std::move(w.queue);
  w.queue.clear();
  for (auto& q : queue)
    q.done(error{runtime_errc::pack_failed, "env " + w.spec.env + " failed: " + w.info.last_error});
  if (on_state) on_state(w.info);
}

void supervisor::ping(const std::string& env, call_done done) {
  auto it = workers_.find(env);
  if (it == workers_.end() || it->second->info.state != worker_state::ready) {
    return done(error{runtime_errc::not_ready, "no ready worker runs env " + env});
  }
  it->second->channel->request(ipc::message_type::ping, json::object(), std::chrono::seconds(10),
                               [done](result<ipc::message> r) {
                                 if (r) return done(std::move(r->body));
                                 done(r.err());
                               });
}

void supervisor::interrupt(std::uint64_t epoch) {
  for (auto& [env, w] : workers_) {
    if (w->info.state == worker_state::ready) {
      w->channel->notify(ipc::message_type::interrupt, {{"epoch", epoch}});
    }
  }
}

}  // namespace orch::runtime
