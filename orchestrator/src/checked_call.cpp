#include "checked_call.hpp"

#include <future>

#include <spdlog/spdlog.h>

#include "json_fields.hpp"
#include "orch/ipc/response_bodies.hpp"
#include "orch/orchestrator/errc.hpp"
#include "output_tensors.hpp"

namespace orch::orchestrator {

using nlohmann::json;

namespace {

// One call in flight: what its answer's callback needs, owned jointly by the caller and the
// callback, so that a callback the supervisor runs late (a worker lost after an error here)
// touches nothing the caller has freed.
struct pending_checked_call {
  pending_checked_call(std::string e, const json& b) : env(std::move(e)), body(b) {}
  std::string env;
  json body;
  std::promise<checked_call_result> done;
  bool answered = false;  // io thread only
  void answer(checked_call_result r) {
    if (answered) return;
    answered = true;
    done.set_value(std::move(r));
  }
};

// On the io thread: checks the call's input tensors, sends it, and answers `call` with the
// checked response (or the reason there is none).
void start_checked_call(host_runtime& host, const std::vector<ipc::buffer_descriptor>& held,
                        const std::shared_ptr<pending_checked_call>& call) {
  const json& body = call->body;
  if (auto st = check_input_tensors(body.value("inputs", json::object()), host.memory().leases(),
                                    host_slot, held);
      !st) {
    return call->answer({st.err(), {}});
  }
  host.workers().call(call->env, body, [&host, call](result<json> response) {
    // A worker is a process we do not trust: its body has the shape of docs/protocol.md, or
    // the call fails here, before anything below reads it on the io thread.
    checked_call_result c{std::move(response), {}};
    result<json>& r = c.response;
    if (r) {
      if (auto st = ipc::check_call_response(*r); !st) {
        r = error{runtime_errc::bad_response, st.err().message};
      }
    }
    // Leases move on the io thread, before anyone sees the result (supervisor_leases.cpp).
    if (r) c.handed = host.workers().hand_over_outputs(call->env, *r);
    // Before any consumer sees them, the producer's tensors must fit the blocks the host holds
    // for them: a lie is this node's error, not a crash in the next worker.
    if (r && (*r)["status"] == "ok") {
      const std::string producer = "node " + text_field(call->body, "node") + " (" +
                                   text_field(call->body, "class_type") + ", env " + call->env +
                                   ")";
      auto st = check_output_tensors((*r)["outputs"], host.memory().leases(), host_slot, producer);
      if (!st) r = st.err();
    }
    call->answer(std::move(c));
  });
}

}  // namespace

checked_call_result checked_call(host_runtime& host, const std::string& env, const json& body,
                                 const std::vector<ipc::buffer_descriptor>& held) {
  auto call = std::make_shared<pending_checked_call>(env, body);
  auto future = call->done.get_future();
  // Posted, not run-and-waited-for: the caller wakes once, for the answer, instead of once more
  // when the call has been sent. `held` lives until future.get() returns, and only the start
  // reads it, before any answer.
  host.post_to_io_thread([&host, &held, call]() noexcept {
    try {
      start_checked_call(host, held, call);
    } catch (...) {  // an allocation failure: this call fails, not the io thread
      try {
        call->answer(
            {error{runtime_errc::not_ready, "the call could not be sent (out of memory)"}, {}});
      } catch (...) {
      }
    }
  });
  return future.get();
}

checked_call_result call_with_retry(host_runtime& host, const std::string& env, const json& body,
                                    const std::vector<ipc::buffer_descriptor>& held) {
  checked_call_result c = checked_call(host, env, body, held);
  const std::uint64_t required = c.response ? supervisor::device_bytes_required(*c.response) : 0;
  if (required == 0) return c;
  std::uint64_t freed = 0;
  for (const auto& step : host.free_through_stand_ins(env, required)) freed += step.freed;
  spdlog::info("node {} ({}) needs {} bytes on the device: {} freed through stand-ins{}",
               text_field(body, "node"), text_field(body, "class_type"), required, freed,
               freed > 0 ? ", retrying" : "");
  if (freed == 0) return c;
  checked_call_result again = checked_call(host, env, body, held);
  again.handed.insert(again.handed.begin(), c.handed.begin(), c.handed.end());
  return again;
}

}  // namespace orch::orchestrator
