// serve_api: ComfyUI's HTTP routes over a running host (docs/serve.md, "Routes"; server.py's
// request and response shapes), listed once in add_routes (route_table.hpp): the prompt, queue,
// history, object_info, interrupt, free and system_stats routes, /view and the uploads (over the
// deployment's input, output and temp directories, serve_files.hpp), and the WebSocket's
// messages (status on connect and on every queue change, the executor's events to the client
// that queued the prompt). Requests are answered on the server's API thread, or on the io
// thread when that needs no wait: POST /prompt is; a prompt with a node whose
// VALIDATE_INPUTS runs in its worker is parsed there and validated on the server's waiting
// thread (http_reply::later), so a busy worker holds up no other route. The queue's prompts run one at a time, in order, as
// coroutines on the io thread (executor.hpp): from a POST to its node's call, and from the
// node's answer to the client's execution_success, no other thread is woken.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "orch/executor/events.hpp"
#include "orch/executor/executor.hpp"
#include "orch/manifests/host_stack.hpp"
#include "orch/runtime/awaitable.hpp"
#include "orch/runtime/host_runtime.hpp"
#include "orch/serve/frontend_routes.hpp"
#include "orch/serve/route_table.hpp"
#include "orch/serve/serve_files.hpp"
#include "orch/serve/serve_http.hpp"
#include "orch/serve/serve_queue.hpp"

namespace orch::serve {

// Who answers GET /system_stats: comfy-orch's version, and the Python stack its workers run on
// (the host's interpreter, as ComfyUI shows its own), where it was read.
struct server_identity {
  std::string version;
  std::optional<manifests::host_stack> stack;
};

class comfy_api {
 public:
  // `server` gets the WebSocket messages; it must outlive this.
  // `web`: the frontend's files and the routes it reads beyond the prompt API.
  comfy_api(runtime::host_runtime& host, http_server& server, std::size_t history_size,
            server_identity identity, queue_limits limits, frontend_routes web);
  ~comfy_api();  // stop()
  comfy_api(const comfy_api&) = delete;
  comfy_api& operator=(const comfy_api&) = delete;

  // Adds ComfyUI's routes to `table`, each with the thread that answers it, and after them the
  // jobs API, the packs' aiohttp routes and the frontend's; the handlers use this, which must
  // outlive the table's use.
  void add_routes(route_table& table);
  // The first WebSocket messages of client `sid`: the status, and as ComfyUI does for a client
  // that reconnects while its prompt runs, an `executing` for the running node.
  std::vector<std::string> greeting(const std::string& sid) const;
  // The queue, to read (GET /orch/fleet/host: whether a prompt runs, how many wait).
  const prompt_queue& queue() const noexcept { return queue_; }
  // Interrupts the running prompt (if `interrupt_running`), drops the pending ones and waits
  // for the running one to end: for `grace` at most when interrupting, after which the workers
  // still inside a call (a node that ignores interrupts) are killed. Idempotent; not on the io
  // thread, which must still run.
  void stop(bool interrupt_running,
            std::chrono::milliseconds grace = std::chrono::milliseconds(5000));

 private:
  class events;  // the executor's sink: to the WebSocket and the history
  // On the io thread: runs the next queued prompt unless one runs; its end starts the next.
  void start_next();
  boost::asio::awaitable<void> run_item(queued_prompt item);
  // The answer, or (a node's VALIDATE_INPUTS to run in its worker) a reply `later`.
  http_reply post_prompt(const http_request& req);
  // Validates a parsed prompt and queues it: the answer to its POST.
  http_reply queue_validated(queued_prompt item);
  http_reply post_queue(const http_request& req);
  http_reply history(const std::string& path, const http_request& req);
  http_reply post_history(const http_request& req);
  http_reply object_info(const std::string& path) const;
  http_reply interrupt(const http_request& req);
  http_reply free(const http_request& req);
  http_reply system_stats();
  // The jobs API (serve_jobs.hpp), or nullopt for another route; in serve_api_jobs.cpp.
  std::optional<http_reply> jobs(const http_request& req);
  bool cancel_jobs(const std::vector<std::string>& ids);
  nlohmann::json status_message(bool with_sid, const std::string& sid) const;

  runtime::host_runtime& host_;
  http_server& server_;
  prompt_queue queue_;
  std::unique_ptr<events> events_;
  std::unique_ptr<executor::executor> executor_;
  // VALIDATE_INPUTS runs on the waiting thread while a prompt runs on the io thread: on an
  // executor of its own, so the two never share the running prompt's leases (held_).
  executor::recording_event_sink validation_events_;
  std::unique_ptr<executor::executor> validator_;
  server_identity identity_;
  file_routes files_;
  frontend_routes web_;
  // A prompt runs (or start_next looks for one): stop() waits for it to clear.
  std::mutex busy_mutex_;
  std::condition_variable idle_;
  bool busy_ = false;
  bool stopped_ = false;
  std::atomic<bool> stopping_{false};  // stop() began: no prompt is taken from the queue
  std::atomic<bool> interrupt_on_stop_{true};
};

}  // namespace orch::serve
