// bench_web_routes: a pack's aiohttp routes served from its worker (docs/performance.md, "A pack's
// web side", issue 56), each figure against a floor from the same run. Real processes: a
// ComfyUI-like process (web_routes_comfyui.py: the fixture ComfyUI tree, the packs loaded as
// ComfyUI loads them, its route table served by aiohttp), `comfy-orch serve` on the same
// deployment, each with its worker of the bench pack (packs/ComfyUI-OrchBenchWeb), and this
// process as their HTTP client.
//
//   bench_web_routes [transfers] [calls]     (defaults 10, 500)
//
//   1. GET of a 64 MiB web.FileResponse from the worker, forwarded by ComfyUI's process
//      (comfy_orch/comfyui/_web_proxy.py), against the same file from a FileResponse route of
//      ComfyUI's process itself (goal <= 1.5x); the same route through serve's relay
//      (serve_upstream.hpp), against serve's own /view of the same file; both against this
//      process's read of the file from the page cache. With each transfer, the peak RSS growth
//      of every process on the way (VmHWM after a reset, less VmRSS before): streaming means
//      none of them holds the file, and that figure no load can move.
//   2. GET of a small web.json_response route of the worker on a kept-alive connection, through
//      ComfyUI's process and through serve, against Host.call of an empty node in the same
//      worker from ComfyUI's process (as its prompt thread calls a node), and against a JSON
//      route of ComfyUI's process itself.
//
// The interpreter is ORCH_TEST_PYTHON, else /usr/bin/python3 (with numpy, torch and aiohttp).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench_support.hpp"
#include "interleaved_floors.hpp"
#include "serve_client.hpp"

namespace {

using namespace orch::bench;
using orch::bench_floors::interleave;
using orch::bench_floors::measured_kind;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

constexpr std::size_t file_bytes = std::size_t{64} << 20;
const char* const pack_name = "ComfyUI-OrchBenchWeb";

std::string python() {
  const char* chosen = std::getenv("ORCH_TEST_PYTHON");
  return chosen != nullptr && *chosen != '\0' ? chosen : "/usr/bin/python3";
}

[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "bench_web_routes: %s\n", why.c_str());
  std::exit(2);
}

// The ComfyUI tree (custom_nodes/ with the bench pack and its 64 MiB file, the same file hard
// linked into serve's input directory) and the deployment both processes run.
fs::path write_tree(const fs::path& dir) {
  const fs::path nodes = dir / "ComfyUI/custom_nodes";
  fs::create_directories(nodes);
  fs::create_directories(dir / "envs");
  fs::create_directories(dir / "input");
  fs::copy(fs::path(ORCH_BENCH_PYTHON_PACKS) / pack_name, nodes / pack_name,
           fs::copy_options::recursive);
  const fs::path file = nodes / pack_name / "nodes/orchbench-file.bin";
  {
    std::vector<std::uint64_t> words(file_bytes / 8);
    std::uint64_t x = 0x9e3779b97f4a7c15ULL;  // xorshift: bytes no layer could compress
    for (auto& w : words) w = x ^= (x ^= (x ^= x << 13) >> 7) << 17;
    std::ofstream(file, std::ios::binary)
        .write(reinterpret_cast<const char*>(words.data()), static_cast<long>(file_bytes));
  }
  fs::create_hard_link(file, dir / "input/orchbench-file.bin");
  const fs::path deployment = dir / "deployment.toml";
  std::ofstream(deployment) << "[host]\ndevice = \"sim\"\n[host.sim]\ncapacity = \"1GiB\"\n"
                            << "[plugins]\nsearch_paths = [\"" << ORCH_BENCH_PLUGIN_DIR << "\"]\n"
                            << "[comfyui]\nroot = \"" << ORCH_BENCH_SOURCE_DIR
                            << "/tests/integration/python/comfyui\"\n[env]\nroot = \""
                            << (dir / "envs").string() << "\"\n[packs]\ncustom_nodes = \""
                            << nodes.string() << "\"\n[packs.python]\n\"orchbenchweb-nodes\" = \""
                            << python() << "\"\n[workers]\nhandshake_timeout = \"60s\"\n"
                            << "[shm]\npinned_pool_size = \"64MiB\"\n[server]\n"
                            << "input_directory = \"" << (dir / "input").string() << "\"\n"
                            << "output_directory = \"" << (dir / "output").string() << "\"\n";
  return deployment;
}

// The ComfyUI-like process (web_routes_comfyui.py): its port, and its Host.call figures asked on
// its stdin. Its stderr goes to `log`.
class comfyui_process {
 public:
  comfyui_process(const fs::path& deployment, const fs::path& log) : log_(log) {
    ::setenv("COMFY_ORCH_DEPLOYMENT", deployment.c_str(), 1);
    ::setenv(
        "PYTHONPATH",
        ORCH_BENCH_PYTHON_PACKAGE ":" ORCH_BENCH_SOURCE_DIR "/tests/integration/python/comfyui", 1);
    ::setenv("ORCH_HOST_LIBRARY", ORCH_BENCH_HOST_LIBRARY, 1);
    ::setenv("ORCH_WORKER_EXECUTABLE", ORCH_BENCH_WORKER, 1);
    ::setenv("PYTHONDONTWRITEBYTECODE", "1", 1);
    std::vector<std::string> args = {python(),
                                     ORCH_BENCH_SOURCE_DIR "/bench/runtime/web_routes_comfyui.py",
                                     ORCH_BENCH_SOURCE_DIR "/tests/integration/host/comfyui",
                                     (deployment.parent_path() / "ComfyUI/custom_nodes").string()};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int in[2], out[2];
    if (::pipe(in) != 0 || ::pipe(out) != 0) fail("pipe");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addclose(&actions, in[1]);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    if (::posix_spawn(&pid_, args[0].c_str(), &actions, nullptr, argv.data(), environ) != 0)
      fail("cannot start " + args[0]);
    posix_spawn_file_actions_destroy(&actions);
    ::close(in[0]);
    ::close(out[1]);
    in_ = ::fdopen(in[1], "w");
    out_ = ::fdopen(out[0], "r");
    const std::string listening = line_starting("listening on http://");
    port_ = static_cast<unsigned short>(std::stoi(listening.substr(listening.rfind(':') + 1)));
  }
  ~comfyui_process() {
    std::fputs("quit\n", in_);
    std::fclose(in_);
    for (int i = 0; i < 3000 && ::waitpid(pid_, nullptr, WNOHANG) == 0; ++i) ::usleep(10000);
    if (::kill(pid_, 0) == 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::fclose(out_);
  }
  comfyui_process(const comfyui_process&) = delete;
  comfyui_process& operator=(const comfyui_process&) = delete;

  pid_t pid() const { return pid_; }
  unsigned short port() const { return port_; }

  // `n` Host.call of the empty node, one after the other: each call's microseconds.
  std::vector<double> calls(int n) {
    std::fprintf(in_, "calls %d\n", n);
    std::fflush(in_);
    std::istringstream words(line_starting("calls").substr(5));
    std::vector<double> samples;
    for (double us = 0; words >> us;) samples.push_back(us);
    if (samples.size() != static_cast<std::size_t>(n)) fail("ComfyUI's process: calls failed");
    return samples;
  }

 private:
  std::string line_starting(const std::string& prefix) {
    std::string line;
    for (int c = 0; (c = std::fgetc(out_)) != EOF;) {
      if (c != '\n') {
        line += static_cast<char>(c);
      } else if (line.rfind(prefix, 0) == 0) {
        return line;
      } else {
        line.clear();
      }
    }
    std::ifstream f(log_);
    std::fprintf(stderr, "%s", std::string((std::istreambuf_iterator<char>(f)), {}).c_str());
    fail("ComfyUI's process ended without \"" + prefix + "\" (its log is above)");
  }

  fs::path log_;
  pid_t pid_ = 0;
  unsigned short port_ = 0;
  FILE* in_ = nullptr;
  FILE* out_ = nullptr;
};

// One kept-alive connection to 127.0.0.1:port. get() reads the answer's body a piece at a time
// into one buffer and keeps none of it, as a browser's download does: this client's memory and
// copies are no part of the figures.
class http_client {
 public:
  explicit http_client(unsigned short port) : port_(port), stream_(io_), piece_(256 << 10) {}

  // The body's size; exits the benchmark unless the answer is 200.
  std::size_t get(const std::string& target) {
    if (!open_) {
      stream_.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port_));
      stream_.socket().set_option(tcp::no_delay(true));
      open_ = true;
    }
    http::request<http::empty_body> req{http::verb::get, target, 11};
    req.set(http::field::host, "127.0.0.1:" + std::to_string(port_));
    http::write(stream_, req);
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    http::read_header(stream_, buffer_, parser);
    std::size_t bytes = 0;
    while (!parser.is_done()) {
      parser.get().body().data = piece_.data();
      parser.get().body().size = piece_.size();
      beast::error_code ec;
      http::read(stream_, buffer_, parser, ec);
      if (ec == http::error::need_buffer) ec = {};
      if (ec) fail("GET " + target + ": " + ec.message());
      bytes += piece_.size() - parser.get().body().size;
    }
    if (parser.get().result_int() != 200)
      fail("GET " + target + " answered " + std::to_string(parser.get().result_int()));
    if (!parser.get().keep_alive()) {
      beast::error_code ec;
      stream_.socket().close(ec);
      open_ = false;
    }
    return bytes;
  }

 private:
  unsigned short port_;
  boost::asio::io_context io_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::vector<char> piece_;
  bool open_ = false;
};

// /proc/<pid>/status's `field` (VmRSS, VmHWM) in KiB; -1 when unreadable.
long status_kib(pid_t pid, const std::string& field) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  return -1;
}

// Resets the process's peak RSS (VmHWM) to its RSS now: proc(5), clear_refs "5".
bool reset_peak(pid_t pid) {
  std::ofstream f("/proc/" + std::to_string(pid) + "/clear_refs");
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

// The processes whose parent is `parent` (each host's workers).
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> found;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(e.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(f)), {});
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state = 0;
    long ppid = 0;
    if (rest >> state >> ppid && ppid == parent) found.push_back(std::stoi(name));
  }
  return found;
}

struct watched {
  const char* name;
  pid_t pid;
};

// One way of getting the file, with the peak RSS growth of each watched process over its
// transfers (KiB; the warm-up's included, as a peak should be).
struct transfer_kind {
  const char* name;
  std::function<std::size_t()> fetch;
  std::vector<long> growth_kib = {};
};

double p50(const std::vector<double>& v) {
  return percentile(v, 0.5);
}

void bench_transfers(const fs::path& file, comfyui_process& comfyui, unsigned short serve_port,
                     const std::vector<watched>& procs, int transfers) {
  http_client to_comfyui(comfyui.port()), to_serve(serve_port);
  std::vector<char> piece(256 << 10);
  auto read_file = [&] {
    const int fd = ::open(file.c_str(), O_RDONLY);
    std::size_t bytes = 0;
    for (ssize_t n = 0; (n = ::read(fd, piece.data(), piece.size())) > 0;) bytes += n;
    ::close(fd);
    return bytes;
  };
  std::vector<transfer_kind> kinds = {
      {"ComfyUI's own FileResponse route (floor)",
       [&] { return to_comfyui.get("/orchbench-direct/file"); }},
      {"the worker's route, forwarded by ComfyUI",
       [&] { return to_comfyui.get("/orchbench/file"); }},
      {"serve's /view of the same file (floor)",
       [&] { return to_serve.get("/view?filename=orchbench-file.bin&type=input"); }},
      {"the worker's route through serve's relay", [&] { return to_serve.get("/orchbench/file"); }},
      {"this process's read of the file (page cache)", read_file}};
  std::vector<measured_kind> timed;
  bool peaks = true;
  for (auto& k : kinds) {
    k.growth_kib.assign(procs.size(), 0);
    timed.push_back({k.name, [&k, &procs, &peaks] {
                       std::vector<long> before;
                       for (const auto& p : procs) {
                         peaks = reset_peak(p.pid) && peaks;
                         before.push_back(status_kib(p.pid, "VmRSS"));
                       }
                       const auto t0 = clock_type::now();
                       if (k.fetch() != file_bytes) fail(std::string(k.name) + ": not 64 MiB");
                       const double t = us(clock_type::now() - t0);
                       for (std::size_t i = 0; i < procs.size(); ++i)
                         k.growth_kib[i] = std::max(k.growth_kib[i],
                                                    status_kib(procs[i].pid, "VmHWM") - before[i]);
                       return t;
                     }});
  }
  interleave(timed, transfers, 1);
  auto ms = [&](std::size_t i) { return p50(timed[i].samples) / 1000; };
  auto rate = [](double t_ms) { return static_cast<double>(file_bytes >> 20) / (t_ms / 1000); };
  std::printf(
      "64 MiB web.FileResponse, GET on a kept-alive connection (p50 of %d transfers of "
      "each, interleaved)\n",
      transfers);
  for (std::size_t i = 0; i < kinds.size(); ++i)
    std::printf("  %-46s p50 %7.1f ms (%5.0f MiB/s)\n", kinds[i].name, ms(i), rate(ms(i)));
  const double via = ms(1) / ms(0);
  std::printf("  forwarded by ComfyUI / ComfyUI's own route: ratio %.2f (goal <= 1.5: %s)\n", via,
              via <= 1.5 ? "met" : "NOT met");
  std::printf("  serve's relay / serve's /view: ratio %.2f\n", ms(3) / ms(2));
  std::printf(
      "  against this process's read of the file: ComfyUI's own %.2f, forwarded by "
      "ComfyUI %.2f, serve's /view %.2f, serve's relay %.2f\n",
      ms(0) / ms(4), ms(1) / ms(4), ms(2) / ms(4), ms(3) / ms(4));
  std::printf("  peak RSS growth during a transfer, MiB (the most over %d transfers%s):\n",
              transfers + 1, peaks ? "" : "; peaks NOT reset, so these are since start");
  std::printf("    %-46s", "");
  for (const auto& p : procs) std::printf(" %16s", p.name);
  std::printf("\n");
  for (const auto& k : kinds) {
    std::printf("    %-46s", k.name);
    for (long g : k.growth_kib) std::printf(" %16.2f", static_cast<double>(g) / 1024);
    std::printf("\n");
  }
}

void bench_json(comfyui_process& comfyui, unsigned short serve_port, int calls) {
  http_client to_comfyui(comfyui.port()), to_serve(serve_port);
  constexpr int block = 100;
  std::vector<double> pending;
  auto get_us = [](http_client& c, const char* target) {
    return [&c, target] {
      const auto t0 = clock_type::now();
      c.get(target);
      return us(clock_type::now() - t0);
    };
  };
  std::vector<measured_kind> kinds = {
      {"Host.call of the empty node (floor)",
       [&] {
         const double t = pending.back();
         pending.pop_back();
         return t;
       },
       [&] { pending = comfyui.calls(block); }},
      {"ComfyUI's own JSON route", get_us(to_comfyui, "/orchbench-direct/json")},
      {"the worker's route, forwarded by ComfyUI", get_us(to_comfyui, "/orchbench/json")},
      {"the worker's route through serve's relay", get_us(to_serve, "/orchbench/json")}};
  interleave(kinds, calls, block);
  std::printf(
      "small JSON route, GET on a kept-alive connection, against an empty node's "
      "Host.call in the same worker (%d of each, interleaved blocks of %d)\n",
      calls, block);
  const double floor = p50(kinds[0].samples), own = p50(kinds[1].samples);
  for (const auto& k : kinds)
    std::printf("  %-46s p50 %7.1f us  p99 %7.1f us  %.2fx Host.call\n", k.name.c_str(),
                p50(k.samples), percentile(k.samples, 0.99), p50(k.samples) / floor);
  std::printf("  forwarded by ComfyUI / ComfyUI's own JSON route: ratio %.2f\n",
              p50(kinds[2].samples) / own);
}

pid_t only_child(pid_t parent, const char* what) {
  const auto children = children_of(parent);
  if (children.size() != 1)
    fail(std::string(what) + " has " + std::to_string(children.size()) + " children, not 1");
  return children[0];
}

}  // namespace

int main(int argc, char** argv) {
  const int transfers = argc > 1 ? std::atoi(argv[1]) : 10;
  const int calls = argc > 2 ? std::atoi(argv[2]) : 500;
  ::setenv("ORCH_LOG_LEVEL", "warn", 0);
  if (std::system((python() + " -c 'import aiohttp, numpy, torch' 2>/dev/null").c_str()) != 0)
    fail(python() + " cannot import aiohttp, numpy and torch (./scripts/install-deps)");
  temp_dir dir;
  const fs::path deployment = write_tree(dir.path);
  std::optional<comfyui_process> comfyui;
  comfyui.emplace(deployment, dir.path / "comfyui.log");
  orch::testing::serve_process serve(ORCH_BENCH_COMFY_ORCH, deployment.string(),
                                     {"--no-control-socket"});
  if (serve.port() == 0) fail("comfy-orch serve did not start");
  // serve listens before its worker has reported its routes: wait for the route.
  for (int i = 0; serve.get("/orchbench/json").status != 200; ++i) {
    if (i == 1200) fail("serve never served the worker's route");
    ::usleep(100000);
  }
  const std::vector<watched> procs = {{"ComfyUI process", comfyui->pid()},
                                      {"its worker", only_child(comfyui->pid(), "ComfyUI")},
                                      {"serve", serve.pid()},
                                      {"serve's worker", only_child(serve.pid(), "serve")}};
  std::printf("bench_web_routes: a pack's aiohttp routes from its worker, %ld CPUs online\n",
              ::sysconf(_SC_NPROCESSORS_ONLN));
  bench_transfers(deployment.parent_path() / "input/orchbench-file.bin", *comfyui, serve.port(),
                  procs, transfers);
  bench_json(*comfyui, serve.port(), calls);
  comfyui.reset();
  return serve.stop() == 0 ? 0 : 2;
}
