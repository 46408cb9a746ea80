#include "orch/gateway/host_source.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <regex>

#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>
#include <nlohmann/json.hpp>

#include "orch/gateway/errc.hpp"
#include "orch/process/install_layout.hpp"
#include "orch/process/python_environment.hpp"
#include "orch/process/worker_environment.hpp"
#include "orch/support/untrusted_text.hpp"

namespace orch::gateway {

status static_host_source::start(boost::asio::io_context& io, event_handler on_event) {
  boost::asio::post(io, [hosts = hosts_, on_event = std::move(on_event)] {
    for (std::size_t i = 0; i < hosts.size(); ++i)
      on_event(
          {host_event::kind::up, "host-" + std::to_string(i), hosts[i].host, hosts[i].port, {}});
  });
  return ok_status();
}

std::optional<host_event> driver_event(const std::string& line, std::string& why) {
  // The driver's line is read like anything from outside: a field is taken only as a string.
  const auto m = nlohmann::json::parse(line, nullptr, false);
  if (m.is_discarded() || !m.is_object()) {
    why = "not a JSON object";
    return std::nullopt;
  }
  const auto text = [&m](const char* key) {
    const auto it = m.find(key);
    return it != m.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  const std::string event = text("event");
  const std::string host = text("host");
  if (event == "host_up" || event == "host_down") {
    // The driver names its hosts host-0 .. host-N-1: anything else is not one of the fleet's.
    static const std::regex host_name("host-[0-9]{1,6}");
    if (!std::regex_match(host, host_name)) {
      why = event + " without a host named host-<n>";
      return std::nullopt;
    }
    host_event e;
    e.host = host;
    if (event == "host_down") {
      e.what = host_event::kind::down;
      e.reason = "Ray reports it down";
      if (const std::string reason = text("reason"); !reason.empty()) e.reason += ": " + reason;
      return e;
    }
    static_host at;
    const std::string url = text("url");
    if (!parse_host_url(url, at)) {
      why = "host_up of " + host + " without an http://HOST:PORT url";
      return std::nullopt;
    }
    e.address = at.host;
    e.port = at.port;
    if (m.contains("pid") && m["pid"].is_number_integer()) e.pid = m["pid"].get<long>();
    return e;
  }
  if (event == "error") {
    const std::string message = text("message");
    why = "the Ray driver failed: " + (message.empty() ? std::string("(no message)") : message);
    return std::nullopt;
  }
  why = "an event the gateway does not know: " + printable(event.substr(0, 64));
  return std::nullopt;
}

std::vector<std::string> ray_host_source::command() const {
  std::vector<std::string> args = {ray_.python.string(),
                                   "-m",
                                   "comfy_orch.fleet.driver",
                                   "--ray-address",
                                   ray_.address,
                                   "--hosts",
                                   std::to_string(ray_.hosts),
                                   "--deployment",
                                   ray_.deployment.string(),
                                   "--comfy-orch",
                                   ray_.comfy_orch.string(),
                                   "--resource",
                                   ray_.resource};
  if (ray_.gpus_per_host > 0) {
    args.push_back("--gpus-per-host");
    args.push_back(std::to_string(ray_.gpus_per_host));
  }
  if (secret_file_) {
    args.push_back("--secret-file");
    args.push_back(secret_file_->string());
  }
  return args;
}

result<ray_host_source::driver_run> ray_host_source::spawn() const {
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return error{gateway_errc::driver_failed, std::strerror(errno)};
  if (::pipe2(out, O_CLOEXEC) != 0) {
    const int failed = errno;
    for (const int fd : in) ::close(fd);
    return error{gateway_errc::driver_failed, std::strerror(failed)};
  }
  if (::pipe2(err, O_CLOEXEC) != 0) {
    const int failed = errno;
    for (const int fd : {in[0], in[1], out[0], out[1]}) ::close(fd);
    return error{gateway_errc::driver_failed, std::strerror(failed)};
  }
  // Ray's interpreter, with the comfy_orch package of this install ahead of nothing else:
  // the one rule for a Python process's environment (python_environment.hpp), then its path.
  auto env = process::current_environment();
  process::scrub_python_environment(env);
  env["PYTHONPATH"] = process::this_install_layout().python_package_root.string();
  const auto envp_text = process::to_envp(env);
  std::vector<char*> envp;
  for (const auto& e : envp_text) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  auto args = command();
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  // Nothing else of the gateway's: Asio's sockets (the listener, clients, hosts) are not
  // close-on-exec, and a driver holding the listener would keep the port after the gateway.
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);  // a group of its own: stop() signals all it started
  driver_run run;
  const int spawned = ::posix_spawn(&run.pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  if (spawned != 0) {
    ::close(in[1]);
    ::close(out[0]);
    ::close(err[0]);
    return error{gateway_errc::driver_failed,
                 "cannot start the Ray driver " + ray_.python.string() + ": " +
                     std::strerror(spawned) +
                     "\n  fix: [ray] python names the interpreter of the "
                     "venv Ray is installed in (the README's set-up makes .deps/ray)"};
  }
  run.stdin_fd = in[1];
  run.out_fd = out[0];
  run.err_fd = err[0];
  spdlog::info("gateway: the Ray driver runs as pid {} ({} hosts on {})", run.pid, ray_.hosts,
               ray_.address);
  return run;
}

status ray_host_source::start(boost::asio::io_context& io, event_handler on_event) {
  auto run = spawn();
  if (!run) return run.err();
  {
    std::lock_guard lock(mutex_);
    pid_ = run->pid;
    stdin_fd_ = run->stdin_fd;
  }
  supervisor_ = std::thread([this, first = *run, &io, on_event = std::move(on_event)] {
    supervise(first, io, on_event);
  });
  return ok_status();
}

namespace {

// Reads `fd` a line at a time until end of file or `stopping`, each line (without its newline)
// to `line`; a line past `max` bytes is dropped, and `too_long` told its first bytes.
template <typename Line, typename TooLong>
void read_lines(int fd, const std::atomic<bool>& stopping, std::size_t max, Line line,
                TooLong too_long) {
  std::string pending;
  bool dropping = false;
  char buffer[8192];
  // `stopping` is asked every turn, not only when the pipe is quiet: whatever else holds its
  // write end (a child the driver left outside its group) could keep it busy for ever.
  while (!stopping.load()) {
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, 200);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      const char c = buffer[i];
      if (c == '\n') {
        if (!dropping) line(pending);
        pending.clear();
        dropping = false;
      } else if (!dropping) {
        pending.push_back(c);
        if (pending.size() > max) {
          too_long(pending.substr(0, 80));
          pending.clear();
          dropping = true;
        }
      }
    }
  }
  ::close(fd);
}

}  // namespace

void ray_host_source::read_events(int fd, boost::asio::io_context& io,
                                  const event_handler& on_event, std::set<std::string>& up) {
  read_lines(
      fd, stopping_, max_line_bytes,
      [&](const std::string& line) {
        std::string why;
        if (auto e = driver_event(line, why)) {
          if (e->what == host_event::kind::up)
            up.insert(e->host);
          else
            up.erase(e->host);
          boost::asio::post(io, [on_event, e = std::move(*e)] { on_event(e); });
        } else if (why.rfind("the Ray driver failed", 0) == 0) {
          spdlog::error("gateway: {}", printable(why));
        } else if (!line.empty()) {
          spdlog::warn("gateway: the Ray driver said {} ({}): ignored",
                       printable(line.substr(0, 200)), why);
        }
      },
      [](const std::string& start) {
        spdlog::warn("gateway: the Ray driver wrote a line of more than {} bytes ({}...): dropped",
                     max_line_bytes, printable(start));
      });
}

namespace {

std::string exit_text(int st) {
  if (WIFEXITED(st)) return "exited with code " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return "was killed by signal " + std::to_string(WTERMSIG(st));
  return "ended";
}

}  // namespace

int ray_host_source::reap(const driver_run& run, std::thread& log) {
  // Its stdout has ended: it is exiting, or it closed it and lives on until stop() signals its
  // group. Either way this is the one place it is waited for.
  int st = 0;
  while (::waitpid(run.pid, &st, 0) < 0 && errno == EINTR) {
  }
  ::kill(-run.pid, SIGKILL);  // whatever it left in its group
  // Its stderr ends with it (its last lines say why it exited), unless something outside its
  // group holds the pipe: then stop() ends the reader.
  log.join();
  ::close(run.stdin_fd);
  return st;
}

bool ray_host_source::pause(std::chrono::milliseconds d) {
  std::unique_lock lock(mutex_);
  return !changed_.wait_for(lock, d, [this] { return stop_requested_.load(); });
}

void ray_host_source::supervise(driver_run run, boost::asio::io_context& io,
                                const event_handler& on_event) {
  auto backoff = first_restart_;
  while (true) {
    const auto began = std::chrono::steady_clock::now();
    std::thread log([this, fd = run.err_fd] {
      read_lines(
          fd, stopping_, max_line_bytes,
          [](const std::string& line) { spdlog::info("ray driver: {}", printable(line)); },
          [](const std::string&) {});
    });
    std::set<std::string> up;
    read_events(run.out_fd, io, on_event, up);
    const int st = reap(run, log);
    {
      std::lock_guard lock(mutex_);
      pid_ = 0;
      stdin_fd_ = -1;
    }
    if (stop_requested_.load()) break;
    // Its actors were not detached: its hosts ended with it.
    const std::string why = "the Ray driver " + exit_text(st);
    for (const auto& name : up)
      boost::asio::post(io, [on_event, e = host_event{host_event::kind::down, name, {}, 0, why, 0}] {
        on_event(e);
      });
    if (std::chrono::steady_clock::now() - began > std::chrono::minutes(1)) backoff = first_restart_;
    std::optional<driver_run> next;
    while (!next) {
      spdlog::error("gateway: {}; starting it again in {} ms", why, backoff.count());
      if (!pause(backoff)) break;
      backoff = std::min<std::chrono::milliseconds>(backoff * 2, longest_restart);
      auto spawned = spawn();
      if (spawned)
        next = *spawned;
      else
        spdlog::error("gateway: {}", spawned.err().message);
    }
    if (!next) break;
    std::lock_guard lock(mutex_);
    run = *next;
    pid_ = run.pid;
    stdin_fd_ = run.stdin_fd;
    // stop() came while it started: it sees the end of its input at once.
    if (stop_requested_.load()) {
      ::close(run.stdin_fd);
      run.stdin_fd = stdin_fd_ = -1;
    }
  }
  std::lock_guard lock(mutex_);
  done_ = true;
  changed_.notify_all();
}

void ray_host_source::stop() {
  if (!supervisor_.joinable()) return;
  pid_t pid = 0;
  {
    std::lock_guard lock(mutex_);
    stop_requested_.store(true);
    // End of file on its stdin: it stops its hosts and exits, and the supervisor reaps it.
    if (stdin_fd_ >= 0) ::close(stdin_fd_);
    stdin_fd_ = -1;
    pid = pid_;
    changed_.notify_all();
  }
  const auto reaped_within = [this](std::chrono::milliseconds limit) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, limit, [this] { return done_; });
  };
  if (!reaped_within(stop_grace_) && pid > 0) {
    spdlog::warn("gateway: the Ray driver did not stop within {} ms of its end of input: SIGTERM",
                 stop_grace_.count());
    ::kill(-pid, SIGTERM);
    if (!reaped_within(std::chrono::seconds(5))) ::kill(-pid, SIGKILL);
  }
  stopping_.store(true);  // the readers stop, whoever else holds the driver's pipes
  supervisor_.join();
}

}  // namespace orch::gateway
