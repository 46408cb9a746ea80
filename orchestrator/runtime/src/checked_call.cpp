#include "orch/runtime/checked_call.hpp"

#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <thread>

#include <boost/asio/async_result.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include "orch/runtime/errc.hpp"
#include "orch/support/json_fields.hpp"
#include "output_tensors.hpp"

namespace orch::runtime {

using nlohmann::json;

namespace {

// One call in flight: what its answer's callback needs, owned jointly by the caller and the
// callback, so that a callback the supervisor runs late (a worker lost after an error here)
// touches nothing the caller has freed. `deliver` resumes the coroutine that waits.
struct pending_checked_call {
  pending_checked_call(std::string e, const json& b,
                       std::function<void(checked_call_result)> to)
      : env(std::move(e)), body(b), deliver(std::move(to)) {}
  std::string env;
  json body;
  std::function<void(checked_call_result)> deliver;
  bool answered = false;  // io thread only
  void answer(checked_call_result r) {
    if (answered) return;
    answered = true;
    deliver(std::move(r));
  }
};

// On the io thread, before anyone reads a call's answer: the leases of the blocks it returned
// move to the host (supervisor_leases.cpp), and the producer's tensors must fit the blocks the
// host holds for them: a lie is this node's error, not a crash in the next worker.
void settle_answer(host_runtime& host, const std::string& env, const json& body,
                   checked_call_result& c) {
  result<json>& r = c.response;
  if (r) c.handed = host.workers().hand_over_outputs(env, *r);
  if (r && (*r)["status"] == "ok") {
    const std::string producer = "node " + text_field(body, "node") + " (" +
                                 text_field(body, "class_type") + ", env " + env + ")";
    auto st = check_output_tensors((*r)["outputs"], host.memory().leases(), host_slot, producer);
    if (!st) r = st.err();
  }
}

// Whether settle_answer has anything to do: the answer returned a tensor or allocated a block.
bool needs_settling(const json& response) {
  const auto allocations = response.find("allocations");
  if (allocations != response.end() && !allocations->empty()) return true;
  const auto outputs = response.find("outputs");
  return outputs != response.end() && !tensor_descriptors(*outputs).empty();
}

// Whether a call's inputs name a tensor: those are checked against the lease table, on the io
// thread, before the call is sent.
bool names_a_tensor(const json& body) {
  const auto inputs = body.find("inputs");
  if (inputs == body.end() || !inputs->is_object()) return false;
  for (const auto& value : *inputs)
    if (!tensor_descriptors(value).empty()) return true;
  return false;
}

// The call on the env's lane (call_lane.hpp), written and answered on this thread, when the
// lane is free and the call needs nothing of the io thread before it is sent; nullopt: the
// router's path. An answer that moved blocks is settled on the io thread.
std::optional<checked_call_result> call_on_lane(host_runtime& host, const std::string& env,
                                                const json& body) {
  if (host.stopped() || host.on_the_io_thread() || names_a_tensor(body)) return std::nullopt;
  const auto lane = host.workers().lane(env);
  if (!lane) return std::nullopt;
  auto answer = lane->call(body);
  if (!answer) return std::nullopt;
  checked_call_result c{std::move(*answer), {}};
  if (c.response && needs_settling(*c.response)) {
    host.on_io_thread([&] { settle_answer(host, env, body, c); });
  }
  return c;
}

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
    // The supervisor has checked the body's shape (docs/protocol.md) before anything reads it.
    checked_call_result c{std::move(response), {}};
    settle_answer(host, call->env, call->body, c);
    call->answer(std::move(c));
  });
}

// start_checked_call, with an allocation failure turned into this call's error rather than an
// exception on the io thread.
void start_or_fail(host_runtime& host, const std::vector<ipc::buffer_descriptor>& held,
                   const std::shared_ptr<pending_checked_call>& call) noexcept {
  try {
    start_checked_call(host, held, call);
  } catch (...) {
    try {
      call->answer(
          {error{runtime_errc::not_ready, "the call could not be sent (out of memory)"}, {}});
    } catch (...) {
    }
  }
}

// The call's answer for a coroutine on the io thread. The handler resumes the coroutine, so it
// is posted rather than run inside the supervisor's callback: the coroutine's next call must
// not reach the supervisor from within the answer to this one.
template <typename Handler>
std::function<void(checked_call_result)> resume_later(host_runtime& host, Handler handler) {
  auto shared = std::make_shared<Handler>(std::move(handler));
  return [&host, shared](checked_call_result r) {
    boost::asio::post(host.io(), [shared, r = std::move(r)]() mutable { (*shared)(std::move(r)); });
  };
}

}  // namespace

boost::asio::awaitable<checked_call_result> async_checked_call(
    host_runtime& host, const std::string& env, const json& body,
    const std::vector<ipc::buffer_descriptor>& held) {
  auto start = [&host, &env, &body, &held](auto handler) {
    auto call =
        std::make_shared<pending_checked_call>(env, body, resume_later(host, std::move(handler)));
    start_or_fail(host, held, call);
  };
  co_return co_await boost::asio::async_initiate<decltype(boost::asio::use_awaitable),
                                                 void(checked_call_result)>(
      std::move(start), boost::asio::use_awaitable);
}

namespace {

// What a call that could not fit a model on the device makes free through the stand-ins, for a
// retry (0: no retry). Off the io thread: every eviction waits for a worker's receipt.
std::uint64_t free_for_retry(host_runtime& host, const std::string& env, const json& body,
                             std::uint64_t required) {
  std::uint64_t freed = 0;
  for (const auto& step : host.free_through_stand_ins(env, required)) freed += step.freed;
  spdlog::info("node {} ({}) needs {} bytes on the device: {} freed through stand-ins{}",
               text_field(body, "node"), text_field(body, "class_type"), required, freed,
               freed > 0 ? ", retrying" : "");
  return freed;
}

std::uint64_t device_bytes_required(const checked_call_result& c) {
  return c.response ? supervisor::device_bytes_required(*c.response) : 0;
}

// free_for_retry for a coroutine on the io thread: on a thread of its own, which the io thread
// joins as it resumes the coroutine with the result (the thread has posted it as its last act).
boost::asio::awaitable<std::uint64_t> free_for_retry_off_io_thread(host_runtime& host,
                                                                   const std::string& env,
                                                                   const json& body,
                                                                   std::uint64_t required) {
  auto start = [&](auto handler) {
    auto resume = std::make_shared<decltype(handler)>(std::move(handler));
    auto thread = std::make_shared<std::thread>();
    // The io thread runs this start: the posted resumption cannot run before `thread` is set.
    *thread = std::thread([&host, &env, &body, required, resume, thread]() mutable {
      std::uint64_t freed = 0;
      try {
        freed = free_for_retry(host, env, body, required);
      } catch (const std::exception& e) {
        spdlog::error("freeing through stand-ins failed: {}", e.what());
      }
      boost::asio::post(host.io(), [resume, thread = std::move(thread), freed]() {
        thread->join();
        (*resume)(freed);
      });
    });
  };
  co_return co_await boost::asio::async_initiate<decltype(boost::asio::use_awaitable),
                                                 void(std::uint64_t)>(
      std::move(start), boost::asio::use_awaitable);
}

}  // namespace

boost::asio::awaitable<checked_call_result> async_call_with_retry(
    host_runtime& host, const std::string& env, const json& body,
    const std::vector<ipc::buffer_descriptor>& held) {
  checked_call_result c = co_await async_checked_call(host, env, body, held);
  const std::uint64_t required = device_bytes_required(c);
  if (required == 0) co_return c;
  const std::uint64_t freed = co_await free_for_retry_off_io_thread(host, env, body, required);
  if (freed == 0) co_return c;
  checked_call_result again = co_await async_checked_call(host, env, body, held);
  again.handed.insert(again.handed.begin(), c.handed.begin(), c.handed.end());
  co_return again;
}

namespace {

// The blocking calls are the coroutines, run on the io thread while the caller waits for their
// result: one call path. The caller wakes once, for the answer.
template <typename Call>
checked_call_result run_and_wait(host_runtime& host, Call call) {
  std::promise<checked_call_result> done;
  auto answer = done.get_future();
  boost::asio::co_spawn(
      host.io(),
      [&]() -> boost::asio::awaitable<void> {
        try {
          done.set_value(co_await call());
        } catch (...) {
          done.set_exception(std::current_exception());
        }
      },
      boost::asio::detached);
  return answer.get();
}

}  // namespace

checked_call_result checked_call(host_runtime& host, const std::string& env, const json& body,
                                 const std::vector<ipc::buffer_descriptor>& held) {
  if (auto c = call_on_lane(host, env, body)) return std::move(*c);
  return run_and_wait(host, [&] { return async_checked_call(host, env, body, held); });
}

checked_call_result call_with_retry(host_runtime& host, const std::string& env, const json& body,
                                    const std::vector<ipc::buffer_descriptor>& held) {
  if (names_a_tensor(body) || host.on_the_io_thread()) {
    return run_and_wait(host, [&] { return async_call_with_retry(host, env, body, held); });
  }
  // The same steps as async_call_with_retry, each call on the lane where it is free.
  checked_call_result c = checked_call(host, env, body, held);
  const std::uint64_t required = device_bytes_required(c);
  if (required == 0) return c;
  if (free_for_retry(host, env, body, required) == 0) return c;
  checked_call_result again = checked_call(host, env, body, held);
  again.handed.insert(again.handed.begin(), c.handed.begin(), c.handed.end());
  return again;
}

}  // namespace orch::runtime
