#include "fake_worker.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "orch/ipc/channel.hpp"
#include "orch/ipc/control_block.hpp"
#include "orch/ipc/control_segment.hpp"
#include "orch/ipc/errc.hpp"
#include "orch/ipc/fd_passing.hpp"
#include "orch/ipc/handshake.hpp"
#include "orch/ipc/memfd_segment.hpp"
#include "orch/plugins/applied_settings.hpp"

namespace orch::runtime_testing {
namespace {

using nlohmann::json;
using ipc::message_type;
using namespace std::chrono_literals;

// comfy-orch-worker's exit statuses (worker/include/orch/worker/worker.h; not linked here).
constexpr int exit_handshake = 65;
constexpr int exit_setup = 66;

int duplicate(int fd) { return fd < 0 ? -1 : ::fcntl(fd, F_DUPFD_CLOEXEC, 0); }

void close_fd(int& fd) noexcept {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

std::string read_all(int fd) {
  std::string out;
  char buf[64];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

// The value after `flag` in a worker's command line (supervisor_spawn.cpp builds it).
std::string argument(const process::spawn_request& r, const std::string& flag) {
  for (std::size_t i = 0; i + 1 < r.args.size(); ++i) {
    if (r.args[i] == flag) return r.args[i + 1];
  }
  return {};
}

}  // namespace

// The protocol side of one fake worker: everything here runs on the worker's own thread (its
// io context's one thread), except stop(). Handlers hold `this`: they run only inside run(), and
// the session outlives run() (a handler holding a shared_ptr would keep it alive forever from
// inside its own stopped io context).
class fake_worker::session {
 public:
  session(fake_worker& owner, std::string token, ipc::received_fds fds)
      : owner_(owner), token_(std::move(token)), fds_(std::move(fds)), beat_timer_(io_) {}

  void run() {
    if (!map_own_slot()) {
      owner_.set_status(exited_with(exit_handshake));
      return;
    }
    ipc::channel::socket_type socket(io_);
    socket.assign(boost::asio::local::stream_protocol(), owner_.channel_fd_);
    owner_.channel_fd_ = -1;  // the socket's now
    ipc::channel_options co;
    co.name = "fake worker " + owner_.env_;
    co.generation = owner_.generation_;
    co.accept_generation = owner_.generation_;
    channel_ = ipc::channel::create(std::move(socket), co);
    channel_->start([this](ipc::message m) { on_message(std::move(m)); },
                    [this](const error&) { io_.stop(); });
    if (owner_.script_.answer_hello) send_hello();
    io_.run();
  }

  void stop() noexcept { io_.stop(); }

 private:
  bool map_own_slot() {
    // control (read-only), own slot, then the sim device and pool segments (docs/protocol.md).
    if (fds_.fds.size() < 2) return false;
    struct stat st {};
    if (::fstat(fds_.fds[1].get(), &st) != 0) return false;
    auto map = ipc::mapping::map(fds_.fds[1].get(), 0, static_cast<std::uint64_t>(st.st_size),
                                 /*writable=*/true);
    if (!map) return false;
    slot_ = std::move(*map);
    // The slot memfd's layout: slot_counters, then this process's control block
    // (control_segment.hpp).
    block_ = reinterpret_cast<ipc::control_block*>(slot_.data() + sizeof(ipc::slot_counters));
    return true;
  }

  void send_hello() {
    const auto& script = owner_.script_;
    channel_->request(message_type::hello,
                      {{"token", script.hello_token.empty() ? token_ : script.hello_token},
                       {"pid", static_cast<std::uint64_t>(owner_.pid_)},
                       {"protocol", std::uint64_t{ipc::protocol_version}},
                       {"generation", std::uint64_t{owner_.generation_}}},
                      5s, [this](result<ipc::message> r) { on_settings(std::move(r)); });
  }

  void on_settings(result<ipc::message> r) {
    auto settings =
        r ? ipc::handshake_from_json(r->body) : result<ipc::handshake_settings>(r.err());
    if (!settings) return exit_now(exited_with(exit_handshake));
    const auto& script = owner_.script_;
    if (!script.setup_failure.empty()) {
      channel_->request(message_type::setup_failed,
                        {{"code", script.setup_failure_code}, {"message", script.setup_failure}},
                        5s, [this](result<ipc::message>) { exit_now(exited_with(exit_setup)); });
      return;
    }
    // What a ledger worker publishes before ready: the host compares the settings hash.
    ipc::stats_snapshot stats{};
    stats.memory_manager = ipc::memory_manager_kind::ledger;
    stats.settings_hash =
        plugins::applied_settings_hash(settings->memory, plugins::memory_manager::ledger, 0);
    block_->publish(stats);
    block_->beat();
    beat_every_ = std::max(std::chrono::milliseconds(settings->heartbeat_ms) / 4, 1ms);
    if (script.heartbeat) arm_beat();
    channel_->request(message_type::ready,
                      {{"nodes", script.nodes},
                       {"plugins", {{"manager", "ledger"}, {"reason", "a fake worker"}}}},
                      5s, [this](result<ipc::message> answer) {
                        if (!answer) return exit_now(exited_with(exit_handshake));
                        if (owner_.script_.crash_after_ready) crash();
                      });
  }

  void arm_beat() {
    beat_timer_.expires_after(beat_every_);
    beat_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      block_->beat();
      arm_beat();
    });
  }

  void on_message(ipc::message m) {
    switch (static_cast<message_type>(m.header.type)) {
      case message_type::call:
        return on_call(std::move(m));
      case message_type::interrupt:
        return on_interrupt(m.body["epoch"].get<std::uint64_t>());
      case message_type::ping:
      case message_type::shutdown:
        return channel_->respond(m.header, json::object());
      case message_type::free_memory:
      case message_type::evict:
        return channel_->respond(m.header, {{"freed", 0}, {"resident", 0}});
      case message_type::prompt_start:
      case message_type::node_end:
        return;
      default:
        if (m.header.request_id != 0) {
          channel_->respond_error(m.header, {ipc::body_errc::unknown_type, "not served here"});
        }
    }
  }

  void on_call(ipc::message m) {
    owner_.journal_->record_call(owner_.env_, owner_.generation_, m.body);
    const auto& script = owner_.script_;
    fake_call_answer answer = script.on_call ? script.on_call(m.body) : fake_call_answer{};
    if (answer.crash) return crash();
    held_call held{m.header, m.body["node"].get<std::string>(), 0};
    if (auto it = m.body.find("epoch"); it != m.body.end()) held.epoch = it->get<std::uint64_t>();
    if (answer.until_interrupted) {
      if (held.epoch != 0 && held.epoch <= interrupted_epoch_) return answer_interrupted(held);
      held_.push_back(std::move(held));
      return;
    }
    json body = response_for(held.node, answer);
    if (answer.delay.count() == 0) return channel_->respond(m.header, std::move(body));
    auto timer = std::make_shared<boost::asio::steady_timer>(io_, answer.delay);
    timer->async_wait([this, timer, header = m.header,
                       body = std::move(body)](const boost::system::error_code& ec) mutable {
      if (!ec) channel_->respond(header, std::move(body));
    });
  }

  // Kept as an epoch, not a flag, as the real worker does: it may overtake its call.
  void on_interrupt(std::uint64_t epoch) {
    owner_.journal_->record_interrupt(epoch);
    interrupted_epoch_ = std::max(interrupted_epoch_, epoch);
    auto held = std::move(held_);
    held_.clear();
    for (auto& h : held) {
      if (h.epoch != 0 && h.epoch <= interrupted_epoch_) {
        answer_interrupted(h);
      } else {
        held_.push_back(std::move(h));
      }
    }
  }

  struct held_call {
    ipc::frame_header header;
    std::string node;
    std::uint64_t epoch = 0;
  };

  void answer_interrupted(const held_call& h) {
    channel_->respond(h.header, {{"status", "error"},
                                 {"error",
                                  {{"node", h.node},
                                   {"type", ipc::node_error_type::interrupted},
                                   {"message", "the prompt was interrupted"}}},
                                 {"allocations", json::array()}});
  }

  static json response_for(const std::string& node, const fake_call_answer& a) {
    if (!a.error_type.empty()) {
      return {{"status", "error"},
              {"error", {{"node", node}, {"type", a.error_type}, {"message", a.error_message}}},
              {"allocations", json::array()}};
    }
    json body = {{"status", "ok"},
                 {"outputs", a.outputs},
                 {"inputs_seen", json::object()},
                 {"allocations", json::array()}};
    if (a.ui) body["ui"] = *a.ui;
    return body;
  }

  // A crash as the host sees one: the exit status is there by the time its channel closes.
  void crash() { exit_now(owner_.script_.exit_status); }

  void exit_now(int status) {
    owner_.set_status(status);
    channel_->close("the fake worker exits");  // on_close stops the io context
  }

  fake_worker& owner_;
  boost::asio::io_context io_;  // first: destroyed last, after everything that uses it
  std::string token_;
  ipc::received_fds fds_;
  ipc::mapping slot_;
  ipc::control_block* block_ = nullptr;
  std::shared_ptr<ipc::channel> channel_;
  boost::asio::steady_timer beat_timer_;
  std::chrono::milliseconds beat_every_{1};
  std::vector<held_call> held_;
  std::uint64_t interrupted_epoch_ = 0;
};

fake_worker::fake_worker(const process::spawn_request& request, pid_t pid,
                         fake_worker_script script, std::shared_ptr<fake_journal> journal)
    : pid_(pid),
      env_(argument(request, "--env")),
      script_(std::move(script)),
      journal_(std::move(journal)) {
  const std::string generation = argument(request, "--generation");
  generation_ = generation.empty() ? 0 : static_cast<std::uint32_t>(std::stoul(generation));
  for (const auto& fd : request.fds) {
    if (fd.target == process::worker_channel_fd) channel_fd_ = duplicate(fd.source);
    if (fd.target == process::worker_fd_socket) fd_socket_ = duplicate(fd.source);
    if (fd.target == process::worker_token_fd) token_fd_ = duplicate(fd.source);
  }
  output_fd_ = duplicate(request.output_fd);
  thread_ = std::thread([this] { run(); });
}

fake_worker::~fake_worker() {
  kill(SIGKILL);
  if (thread_.joinable()) thread_.join();
}

bool fake_worker::set_status(int status) noexcept {
  std::lock_guard lock(mutex_);
  if (status_) return false;
  status_ = status;
  return true;
}

void fake_worker::kill(int signal) noexcept {
  std::lock_guard lock(mutex_);
  if (status_) return;  // ended, or ending with a status of its own
  status_ = killed_by(signal);
  // Wherever it is: blocked on its fd socket, or in its io context.
  if (fd_socket_ >= 0) ::shutdown(fd_socket_, SHUT_RDWR);
  if (session_) session_->stop();
}

std::optional<int> fake_worker::wait(std::chrono::milliseconds limit) noexcept {
  {
    std::unique_lock lock(mutex_);
    if (!ended_cv_.wait_for(lock, limit, [this] { return ended_; })) return std::nullopt;
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mutex_);
  return status_;
}

void fake_worker::run() noexcept {
  try {
    if (output_fd_ >= 0) {
      const std::string line = "fake worker " + env_ + " generation " +
                               std::to_string(generation_) + " started\n";
      (void)!::write(output_fd_, line.data(), line.size());
    }
    const std::string token = token_fd_ >= 0 ? read_all(token_fd_) : std::string();
    if (script_.crash_before_hello) {
      set_status(script_.exit_status);
    } else if (auto fds = ipc::recv_fds(fd_socket_, 2, 8); !fds) {
      set_status(exited_with(exit_handshake));  // no segments: the host is gone
    } else {
      std::shared_ptr<session> s;
      {
        std::lock_guard lock(mutex_);
        if (!status_) s = session_ = std::make_shared<session>(*this, token, std::move(*fds));
      }
      if (s) s->run();
    }
  } catch (const std::exception&) {
    set_status(exited_with(exit_setup));
  }
  std::lock_guard lock(mutex_);
  session_.reset();  // its channel closes with it, as a dead process's socket does
  if (!status_) status_ = exited_with(0);  // the host closed the channel: a clean exit
  close_fd(channel_fd_);
  close_fd(fd_socket_);
  close_fd(token_fd_);
  close_fd(output_fd_);
  ended_ = true;
  ended_cv_.notify_all();
}

void fake_journal::record_call(const std::string& env, std::uint32_t generation,
                               const nlohmann::json& body) {
  {
    std::lock_guard lock(mutex_);
    calls_.push_back({env, generation, body});
  }
  changed_.notify_all();
}

void fake_journal::record_interrupt(std::uint64_t epoch) {
  {
    std::lock_guard lock(mutex_);
    interrupts_.push_back(epoch);
  }
  changed_.notify_all();
}

std::vector<fake_journal::call> fake_journal::calls() const {
  std::lock_guard lock(mutex_);
  return calls_;
}

std::vector<std::string> fake_journal::node_calls() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  for (const auto& c : calls_) {
    if (!c.body.contains("method")) out.push_back(c.body["node"].get<std::string>());
  }
  return out;
}

std::vector<std::uint64_t> fake_journal::interrupts() const {
  std::lock_guard lock(mutex_);
  return interrupts_;
}

bool fake_journal::wait_for_call(const std::string& node, std::size_t count,
                                 std::chrono::milliseconds limit) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, limit, [&] {
    return static_cast<std::size_t>(std::count_if(calls_.begin(), calls_.end(), [&](const call& c) {
             return c.body.value("node", std::string()) == node;
           })) >= count;
  });
}

}  // namespace orch::runtime_testing
