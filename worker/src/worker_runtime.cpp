#include "worker_runtime.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <future>
#include <optional>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <spdlog/spdlog.h>

#include "node_call.hpp"
#include "node_library.hpp"
#include "node_requests.hpp"
#include "orch/ipc/channel.hpp"
#include "orch/ipc/fd_passing.hpp"
#include "orch/ipc/handshake.hpp"
#include "progress_reports.hpp"
#include "worker_errc.hpp"
#include "worker_memory.hpp"

namespace orch::worker {
namespace {

using ipc::json;
using ipc::message_type;
using namespace std::chrono_literals;

class runtime final : public started_worker {
 public:
  explicit runtime(const orch_worker_options& o) : options_(o) {}
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;
  // A runtime left before serve() finished (an exception, a caller that never served) stops
  // its threads rather than leaving them joinable.
  ~runtime() override {
    io_.stop();
    if (io_thread_.joinable()) io_thread_.join();
    heartbeat_stop_.store(true);
    if (beat_thread_.joinable()) beat_thread_.join();
  }

  int run() {
    if (const int status = begin(); status != ORCH_WORKER_EXIT_OK) return status;
    return serve(options_.nodes, options_.setup_error);
  }

  // The handshake and the memory set-up, started on the channel's own thread: a Python worker
  // imports its pack meanwhile (orch_worker_begin). Returns a failure's exit status, or
  // ORCH_WORKER_EXIT_OK once the handshake is under way.
  int begin() {
    auto fds = ipc::recv_fds(options_.fd_socket, 2, 9);
    if (!fds) {
      spdlog::error("worker {}: no segments from the host: {}", options_.env_name,
                    fds.err().message);
      return ORCH_WORKER_EXIT_HANDSHAKE;
    }
    const auto flags = std::to_integer<std::uint8_t>(fds->payload[0]);
    const bool has_sim = (flags & ipc::segments_flags::sim) != 0;
    const bool has_lane = (flags & ipc::segments_flags::lane) != 0;
    const std::size_t pools = std::to_integer<std::size_t>(fds->payload[1]);
    // control (read-only), our own slot, the sim device, the pool, the lane's socket and page
    // (docs/protocol.md).
    const std::size_t expected = 2 + (has_sim ? 1 : 0) + pools + (has_lane ? 2 : 0);
    if (fds->fds.size() != expected) {
      spdlog::error("worker {}: expected {} fds from the host, got {}", options_.env_name,
                    expected, fds->fds.size());
      return ORCH_WORKER_EXIT_HANDSHAKE;
    }
    control_fd_ = std::move(fds->fds[0]);
    slot_fd_ = std::move(fds->fds[1]);
    if (has_sim) sim_fd_ = std::move(fds->fds[2]);
    for (std::size_t i = 0; i < pools; ++i) {
      pool_fds_.push_back(std::move(fds->fds[2 + (has_sim ? 1 : 0) + i]));
    }
    const std::size_t lane_at = fds->fds.size() - 2;
    if (auto st = requests_.open(has_lane ? std::move(fds->fds[lane_at]) : ipc::unique_fd(),
                                 has_lane ? std::move(fds->fds[lane_at + 1]) : ipc::unique_fd(),
                                 options_.generation);
        !st) {
      spdlog::error("worker {}: {}", options_.env_name, st.err().message);
      return ORCH_WORKER_EXIT_SETUP;
    }

    ipc::channel::socket_type socket(io_);
    socket.assign(boost::asio::local::stream_protocol(), options_.channel_fd);
    ipc::channel_options co;
    co.name = std::string("worker ") + options_.env_name;
    co.generation = options_.generation;
    co.accept_generation = options_.generation;  // the generation fence, both ways
    channel_ = ipc::channel::create(std::move(socket), co);
    channel_->start([this](ipc::message m) { on_message(std::move(m)); },
                    [this](const error& e) { on_close(e); });
    channel_->request(message_type::hello,
                      {{"token", options_.token},
                       {"pid", static_cast<std::uint64_t>(::getpid())},
                       {"protocol", std::uint64_t{ipc::protocol_version}},
                       {"generation", std::uint64_t{options_.generation}},
                       {"nodes_abi", std::uint64_t{ORCH_NODES_ABI_MAJOR}}},
                      30s, [this](result<ipc::message> r) { on_hello(std::move(r)); });
    // Nodes run on the calling thread (a Python worker's main thread, as in ComfyUI); the
    // channel gets a thread of its own.
    io_thread_ = std::thread([this] {
      io_.run();
      // A node still running when the host went away is abandoned: the process exits under it.
      if (requests_.stop()) {
        spdlog::warn("worker {}: exiting with a node still running", options_.env_name);
        std::_Exit(exit_code_);
      }
    });
    return ORCH_WORKER_EXIT_OK;
  }

  // Supplies the node set (or why there is none) and serves calls on the calling thread until
  // the host shuts the worker down. The set-up finishes, and `ready` goes out, once both the
  // host's settings and the node set are here, whichever comes second.
  int serve(const orch_node_set* nodes, const char* setup_error) override {
    boost::asio::post(io_, [this, nodes, setup_error] {
      options_.nodes = nodes;
      options_.setup_error = setup_error;
      nodes_supplied_ = true;
      if (settings_) finish_setup();
    });
    node_loop();
    io_thread_.join();
    heartbeat_stop_.store(true);
    if (beat_thread_.joinable()) beat_thread_.join();
    channel_.reset();
    memory_.reset();
    library_.reset();
    return exit_code_;
  }

 private:
  void on_hello(result<ipc::message> r) {
    if (!r) {
      spdlog::error("worker {}: handshake refused: [{}] {}", options_.env_name, r.err().code,
                    r.err().message);
      exit_code_ = ORCH_WORKER_EXIT_HANDSHAKE;
      channel_->close("handshake refused");
      return;
    }
    auto settings = ipc::handshake_from_json(r->body);
    if (!settings) return fail_setup(settings.err());
    auto memory = worker_memory::setup(*settings, std::move(control_fd_), std::move(slot_fd_),
                                       std::move(pool_fds_),
                                       std::move(sim_fd_));
    if (!memory) return fail_setup(memory.err());
    memory_ = std::move(*memory);
    memory_->ask_grants_over(channel_);  // pinned reservations beyond the grant
    settings_ = std::move(*settings);
    if (nodes_supplied_) finish_setup();
  }

  // The rest of the set-up, on the io thread: the node set, the heartbeat, then ready.
  void finish_setup() {
    if (options_.setup_error != nullptr) {
      // The first line is the cause; the lines after it (a traceback) go to the log.
      const std::string text = options_.setup_error;
      const auto first = text.find('\n');
      for (std::size_t at = first; at != std::string::npos && at + 1 < text.size();) {
        const auto next = text.find('\n', at + 1);
        spdlog::error("worker {}: {}", options_.env_name, text.substr(at + 1, next - at - 1));
        at = next;
      }
      return fail_setup({worker_errc::pack_import_failed, text.substr(0, first)});
    }
    if (options_.nodes != nullptr) {
      auto nodes =
          node_set::check(options_.nodes, std::string("the node set of env ") + options_.env_name);
      if (!nodes) return fail_setup(nodes.err());
      supplied_nodes_ = std::move(*nodes);
      nodes_ = &*supplied_nodes_;
    } else {
      auto library = node_library::open(options_.library);
      if (!library) return fail_setup(library.err());
      library_ = std::move(*library);
      nodes_ = &library_->nodes();
    }
    memory_->publish(0, 0);
    memory_->block().beat();
    requests_.serve_lane();
    const auto interval =
        std::chrono::milliseconds(std::max<std::uint32_t>(settings_->heartbeat_ms, 4));
    beat_thread_ = std::thread([this, interval] { beat_loop(interval); });
    channel_->request(message_type::ready,
                      {{"nodes", nodes_->describe()},
                       {"plugins", memory_->describe_plugins()},
                       {"lane", requests_.has_lane()}},
                      30s, [this](result<ipc::message> r2) {
                        if (!r2) {
                          spdlog::error("worker {}: ready refused: {}", options_.env_name,
                                        r2.err().message);
                          exit_code_ = ORCH_WORKER_EXIT_HANDSHAKE;
                          channel_->close("ready refused");
                        }
                      });
  }

  // The host is told why before the worker exits: a set-up that failed here (a library that is
  // no pack, a plugin that does not load) fails the same way on a retry, so the host keeps the
  // cause as the env's error instead of restarting it. Closed once answered (or refused).
  void fail_setup(const error& e) {
    spdlog::error("worker {}: setup failed: [{}] {}", options_.env_name, e.code, e.message);
    exit_code_ = ORCH_WORKER_EXIT_SETUP;
    channel_->request(message_type::setup_failed, {{"code", e.code}, {"message", e.message}}, 5s,
                      [this](result<ipc::message>) { channel_->close("setup failed"); });
  }

  // The heartbeat thread: a liveness tick the host reads without a message (docs/runtime.md).
  // It only beats: a hung node thread must not stop it from proving the process alive, and a
  // stopped process (SIGSTOP) stops it. Stats are published by the node thread after each call,
  // before the response, so the host reads them fresh (one writer at a time: the io thread
  // publishes once during set-up, before any call).
  void beat_loop(std::chrono::milliseconds interval) {
    const auto tick = std::max(interval / 4, std::chrono::milliseconds(1));
    while (!heartbeat_stop_.load()) {
      memory_->block().beat();
      std::this_thread::sleep_for(tick);
    }
  }

  void on_message(ipc::message m) {
    switch (static_cast<message_type>(m.header.type)) {
      case message_type::ping:
        channel_->respond(m.header, json::object());
        break;
      case message_type::call: {
        if (nodes_ == nullptr) {
          channel_->respond_error(m.header,
                                  {worker_errc::not_ready, "the worker is not set up yet"});
          break;
        }
        requests_.enqueue({message_type::call, m.header, std::move(m.body)});
        break;
      }
      case message_type::free_memory:
      case message_type::evict:
        if (!memory_) {
          channel_->respond_error(m.header,
                                  {worker_errc::not_ready, "the worker is not set up yet"});
          break;
        }
        requests_.enqueue({static_cast<message_type>(m.header.type), m.header, std::move(m.body)});
        break;
      case message_type::interrupt: {
        // Kept as an epoch, not a flag: the interrupt may overtake the call it is meant for.
        const auto epoch = m.body["epoch"].get<std::uint64_t>();
        auto seen = interrupted_epoch_.load();
        while (epoch > seen && !interrupted_epoch_.compare_exchange_weak(seen, epoch)) {
        }
        break;
      }
      case message_type::prompt_start:
        break;  // the epoch arrives with every call; cast_epoch_boundary reads it there
      case message_type::shutdown:
        spdlog::info("worker {}: shutdown requested", options_.env_name);
        channel_->respond(m.header, json::object());
        break;  // the host closes its end; on_close then stops us
      default:
        channel_->respond_error(
            m.header, {ipc::body_errc::unknown_type,
                       std::string("worker does not serve ") +
                           std::string(ipc::to_string(static_cast<message_type>(m.header.type)))});
    }
  }

  void on_close(const error& e) {
    spdlog::info("worker {}: channel closed ({}), exiting", options_.env_name, e.code);
    io_.stop();
  }

  void node_loop() {
    while (auto call = requests_.next()) {
      json response = call->type == message_type::call ? execute(call->body) : release(*call);
      // Every report of models is numbered, so the host can drop one that arrives late.
      if (response.contains("models")) response["sequence"] = ++reports_;
      memory_->publish(epoch_.load(), calls_.load());
      requests_.answer(*call, std::move(response), *channel_);
    }
  }

  // The host's free (broadcast) and evict (one worker) requests, answered with a receipt of the
  // bytes actually released on the device.
  json release(const pending_call& call) {
    release_receipt r;
    if (call.type == message_type::evict) {
      r = memory_->evict(call.body["bytes"].get<std::uint64_t>());
    } else {
      r = memory_->free(call.body["unload_models"].get<bool>(), call.body["free_memory"].get<bool>());
    }
    spdlog::info("worker {}: {} released {} bytes ({} still resident)", options_.env_name,
                 ipc::to_string(call.type), r.freed, r.resident);
    return {{"freed", r.freed}, {"resident", r.resident}, {"models", memory_->describe_models()}};
  }

  json execute(const json& body) {
    node_call_state state{*memory_,
                          epoch_,
                          interrupted_epoch_,
                          calls_,
                          [this](std::uint64_t size) { return allocate(size); },
                          [this](const std::string& node, std::uint64_t value, std::uint64_t max) {
                            progress_.report(*channel_, node, value, max);
                          }};
    json response = run_node_call(*nodes_, body, state);
    progress_.flush(*channel_);  // the node's last report, if it was kept back
    return response;
  }

  // A message for ComfyUI's clients, after the node's progress it follows; held to half the
  // channel's queue, so that a pack's flood of them drops its own messages, never the channel.
  int message(json body) override {
    const auto channel = channel_;
    if (!channel) return 1;
    if (ipc::encode_body(body).size() > ipc::default_max_body) return -1;
    progress_.flush(*channel);
    const std::size_t room = ipc::channel_options{}.max_queue / 2;
    return channel->notify_if_room(message_type::ui_message, body, room) ? 0 : 1;
  }

  result<ipc::buffer_descriptor> allocate(std::uint64_t size) {
    auto done = std::make_shared<std::promise<result<ipc::buffer_descriptor>>>();
    auto future = done->get_future();
    channel_->request(message_type::allocate, {{"size", size}}, 30s,
                      [done](result<ipc::message> r) {
                        if (!r) return done->set_value(r.err());
                        done->set_value(ipc::descriptor_from_json(r->body["descriptor"]));
                      });
    return future.get();
  }

  orch_worker_options options_;
  boost::asio::io_context io_;
  std::shared_ptr<ipc::channel> channel_;
  progress_reports progress_;
  ipc::unique_fd control_fd_, slot_fd_, sim_fd_;
  std::vector<ipc::unique_fd> pool_fds_;
  std::unique_ptr<worker_memory> memory_;
  std::unique_ptr<node_library> library_;
  std::optional<node_set> supplied_nodes_;  // options.nodes, checked
  // Set once on the io thread before any call is queued; the queue's lock orders the node
  // thread's reads after it.
  const node_set* nodes_ = nullptr;
  std::thread io_thread_;
  std::thread beat_thread_;
  // The host's settings and whether the node set was supplied: both io thread only.
  std::optional<ipc::handshake_settings> settings_;
  bool nodes_supplied_ = false;
  node_requests requests_{options_.env_name != nullptr ? options_.env_name : "worker"};  // the node thread's queue and call lane
  std::atomic<bool> heartbeat_stop_{false};
  std::atomic<std::uint64_t> interrupted_epoch_{0};
  std::atomic<std::uint64_t> epoch_{0};
  std::uint64_t reports_ = 0;  // node thread only
  std::atomic<std::uint64_t> calls_{0};
  int exit_code_ = ORCH_WORKER_EXIT_OK;
};

}  // namespace

std::unique_ptr<started_worker> begin_worker(const orch_worker_options& options, int& status) {
  try {
    auto r = std::make_unique<runtime>(options);
    status = r->begin();
    if (status != ORCH_WORKER_EXIT_OK) return nullptr;
    return r;
  } catch (const std::exception& e) {
    spdlog::error("worker {}: {}", options.env_name ? options.env_name : "?", e.what());
    status = ORCH_WORKER_EXIT_SETUP;
    return nullptr;
  }
}

int run_worker(const orch_worker_options& options) {
  try {
    runtime r(options);
    return r.run();
  } catch (const std::exception& e) {
    spdlog::error("worker {}: {}", options.env_name ? options.env_name : "?", e.what());
    return ORCH_WORKER_EXIT_SETUP;
  }
}

}  // namespace orch::worker

extern "C" int32_t orch_worker_run(const orch_worker_options* options) {
  // The options of the first version end before `nodes`.
  if (options == nullptr || options->struct_size < offsetof(orch_worker_options, nodes) ||
      options->token == nullptr) {
    return ORCH_WORKER_EXIT_USAGE;
  }
  // Appended fields are read only when the caller's struct has them; the rest stay NULL.
  orch_worker_options o{};
  std::memcpy(&o, options, std::min<std::size_t>(options->struct_size, sizeof o));
  o.struct_size = sizeof o;
  if (o.library == nullptr && o.nodes == nullptr && o.setup_error == nullptr) {
    return ORCH_WORKER_EXIT_USAGE;
  }
  if (o.env_name == nullptr) o.env_name = "worker";
  return orch::worker::run_worker(o);
}
