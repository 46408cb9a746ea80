// The worker's command line, shared by comfy-orch-worker and the Python worker
// (`python -m comfy_orch.worker`, which passes its own node set): docs/runtime.md. The startup
// token comes on a pipe (--token-fd), read once and closed: an environment variable would stay
// readable in /proc/<pid>/environ for the life of the process, whatever unsetenv does.
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/spdlog.h>

#include "log_level.hpp"
#include "orch/support/logging.hpp"
#include "orch/worker/worker.h"
#include "worker_runtime.hpp"

namespace {

constexpr const char* help_text =
    "comfy-orch-worker: a comfy-orch worker process. The host (`comfy-orch run`) starts one per\n"
    "pack env (this program for a native pack, `python -m comfy_orch.worker` for a Python pack,\n"
    "with the same flags) and hands it inherited sockets and a startup token; it is not meant to\n"
    "be run by hand (docs/runtime.md).\n"
    "\n"
    "Usage:\n"
    "  comfy-orch-worker --channel-fd N --fd-socket M --token-fd T --generation G --env NAME\n"
    "                    --library PATH\n"
    "  comfy-orch-worker --probe-plugins FD DIR...\n"
    "  comfy-orch-worker --help\n"
    "\n"
    "Flags:\n"
    "  --channel-fd N        inherited socket of the framed channel to the host (the host uses 3)\n"
    "  --fd-socket M         inherited socket the host sends segment fds on (4)\n"
    "  --token-fd T          inherited pipe holding the startup token; read once, then closed (5)\n"
    "  --generation G        this worker's generation, stamped on every frame\n"
    "  --env NAME            the env this worker runs; every log line carries it\n"
    "  --library PATH        the native node library (the pack) to load (a Python worker has\n"
    "                        its node set instead)\n"
    "  --probe-plugins FD DIR...\n"
    "                        load the plugins in each DIR, write their tables as JSON to FD, exit\n"
    "  -h, --help            print this help and exit\n"
    "\n"
    "Environment: ORCH_LOG_LEVEL (trace, debug, info, warn, error, critical, off; default info).\n"
    "Exit status: 0 shut down by the host; 64 usage error; 65 the handshake failed; 66 the set-up\n"
    "failed (a plugin, a segment or the node library). The host does not restart a worker that\n"
    "exits with 64 or 66 while starting.\n";

int usage_error(const std::string& what) {
  std::fprintf(stderr, "comfy-orch-worker: %s; see comfy-orch-worker --help\n", what.c_str());
  return ORCH_WORKER_EXIT_USAGE;
}

std::optional<long> parse_number(std::string_view text) {
  long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

// The env name as it goes into the log pattern: spdlog reads '%' as a flag, and a log line is no
// place for control bytes, so anything unusual becomes '?'.
std::string log_name(std::string_view env) {
  std::string out = "comfy-orch-worker ";
  for (const char c : env) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '-' || c == '_' || c == '.';
    out.push_back(plain ? c : '?');
  }
  return out;
}

// Reads the startup token to end of file and closes the pipe. Empty: no token.
std::string read_token(int fd, std::string& problem) {
  std::string token;
  char buffer[128];
  while (token.size() <= 256) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      problem = "cannot read the startup token from fd " + std::to_string(fd) + ": " +
                std::strerror(errno);
      ::close(fd);
      return {};
    }
    if (n == 0) break;
    token.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  if (token.empty() || token.size() > 256) {
    problem = "fd " + std::to_string(fd) + " held no startup token of at most 256 bytes";
    return {};
  }
  return token;
}

// The command line, parsed: `options` points into the strings beside it.
struct command_line {
  orch_worker_options options{};
  std::string token, env, library;
};

// Parses argv (docs/runtime.md) into `cl`, reads the startup token and sets up the log. `nodes`:
// the caller supplies the node set, so --library is not required. Returns an exit status to end
// with at once (--help, a usage error), or -1 to go on.
int parse_command_line(int argc, const char* const* argv, bool nodes, command_line& cl) {
  if (argv == nullptr || argc < 1) return usage_error("no command line (argv[0] is the program)");
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  for (const auto a : args) {
    if (a == "--help" || a == "-h") {
      std::fputs(help_text, stdout);
      return ORCH_WORKER_EXIT_OK;
    }
  }
  orch_worker_options& o = cl.options;
  o.struct_size = sizeof(o);
  o.channel_fd = -1;
  o.fd_socket = -1;
  std::optional<long> token_fd;
  bool has_generation = false;
  for (std::size_t i = 0; i < args.size(); i += 2) {
    const std::string key(args[i]);
    if (key != "--channel-fd" && key != "--fd-socket" && key != "--token-fd" &&
        key != "--generation" && key != "--env" && key != "--library") {
      return usage_error("unknown argument '" + key + "'");
    }
    if (i + 1 >= args.size()) return usage_error(key + " needs a value");
    const std::string_view value = args[i + 1];
    if (key == "--env") {
      cl.env = value;
      continue;
    }
    if (key == "--library") {
      cl.library = value;
      continue;
    }
    const auto n = parse_number(value);
    if (!n || *n > 0x7fffffff) {
      return usage_error(key + " needs a non-negative number, not '" + std::string(value) + "'");
    }
    if (key == "--channel-fd")
      o.channel_fd = static_cast<int32_t>(*n);
    else if (key == "--fd-socket")
      o.fd_socket = static_cast<int32_t>(*n);
    else if (key == "--token-fd")
      token_fd = *n;
    else {
      o.generation = static_cast<uint32_t>(*n);
      has_generation = true;
    }
  }
  std::string missing;
  for (const auto& [given, flag] :
       {std::pair{o.channel_fd >= 0, "--channel-fd"}, std::pair{o.fd_socket >= 0, "--fd-socket"},
        std::pair{token_fd.has_value(), "--token-fd"}, std::pair{has_generation, "--generation"},
        std::pair{!cl.env.empty(), "--env"},
        std::pair{!cl.library.empty() || nodes, "--library"}}) {
    if (!given) missing += (missing.empty() ? "" : ", ") + std::string(flag);
  }
  if (!missing.empty()) {
    return usage_error("missing " + missing +
                       " (the host starts this program; it is not run by hand)");
  }
  std::string problem;
  cl.token = read_token(static_cast<int>(*token_fd), problem);
  if (cl.token.empty()) return usage_error(problem);
  // Every line this process logs says which worker wrote it.
  orch::init_logging(log_name(cl.env));
  o.token = cl.token.c_str();
  o.env_name = cl.env.c_str();
  o.library = cl.library.empty() ? nullptr : cl.library.c_str();
  return -1;
}

}  // namespace

// The worker orch_worker_serve runs, for orch_worker_message from the pack's other threads.
// Its messages after serve() returns are dropped: the process is exiting.
namespace {
std::atomic<orch::worker::started_worker*> serving{nullptr};
}  // namespace

// A worker begun by orch_worker_begin: its command line and its runtime.
struct orch_worker {
  command_line cl;
  std::unique_ptr<orch::worker::started_worker> started;
};

extern "C" int32_t orch_worker_main(int argc, const char* const* argv, const orch_node_set* nodes,
                                    const char* setup_error) try {
  command_line cl;
  const int status = parse_command_line(argc, argv, nodes != nullptr || setup_error != nullptr, cl);
  if (status >= 0) return status;
  cl.options.nodes = nodes;
  cl.options.setup_error = setup_error;
  return orch_worker_run(&cl.options);
} catch (const std::exception& e) {
  std::fprintf(stderr, "comfy-orch-worker: cannot start: %s\n", e.what());
  return ORCH_WORKER_EXIT_SETUP;
} catch (...) {
  std::fputs("comfy-orch-worker: cannot start: an unknown exception\n", stderr);
  return ORCH_WORKER_EXIT_SETUP;
}

extern "C" orch_worker* orch_worker_begin(int argc, const char* const* argv, int32_t* status) try {
  int32_t ignored = 0;
  int32_t& out = status != nullptr ? *status : ignored;
  auto w = std::make_unique<orch_worker>();
  const int parsed = parse_command_line(argc, argv, /*nodes=*/true, w->cl);
  if (parsed >= 0) {
    out = parsed;
    return nullptr;
  }
  int begun = ORCH_WORKER_EXIT_OK;
  w->started = orch::worker::begin_worker(w->cl.options, begun);
  out = begun;
  return w->started ? w.release() : nullptr;
} catch (const std::exception& e) {
  std::fprintf(stderr, "comfy-orch-worker: cannot start: %s\n", e.what());
  if (status != nullptr) *status = ORCH_WORKER_EXIT_SETUP;
  return nullptr;
} catch (...) {
  if (status != nullptr) *status = ORCH_WORKER_EXIT_SETUP;
  return nullptr;
}

extern "C" int32_t orch_worker_serve(orch_worker* worker, const orch_node_set* nodes,
                                     const char* setup_error) try {
  if (worker == nullptr) return ORCH_WORKER_EXIT_USAGE;
  const std::unique_ptr<orch_worker> owned(worker);
  if (nodes == nullptr && setup_error == nullptr) {
    setup_error = "the worker was given neither a node set nor the reason it has none";
  }
  serving.store(owned->started.get());
  const int status = owned->started->serve(nodes, setup_error);
  serving.store(nullptr);
  return status;
} catch (const std::exception& e) {
  spdlog::error("worker: {}", e.what());
  return ORCH_WORKER_EXIT_SETUP;
} catch (...) {
  return ORCH_WORKER_EXIT_SETUP;
}

extern "C" void orch_worker_log(int32_t level, const char* message) try {
  if (message == nullptr) return;
  spdlog::log(orch::worker::spdlog_level(level), "{}", message);
} catch (...) {
}

extern "C" int32_t orch_worker_message(const char* body, const char* binary_key,
                                       const uint8_t* binary, size_t binary_size) try {
  auto* worker = serving.load();
  if (body == nullptr) return -1;
  auto parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object() || (binary != nullptr && binary_key == nullptr)) return -1;
  if (binary != nullptr) {
    nlohmann::json bytes = nlohmann::json::binary({binary, binary + binary_size});
    auto preview = parsed.find("preview");
    auto& into = preview != parsed.end() && preview->is_object() ? *preview : parsed;
    into[binary_key] = std::move(bytes);
  }
  return worker == nullptr ? 1 : worker->message(std::move(parsed));
} catch (...) {
  return -1;
}
