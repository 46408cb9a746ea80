// bench_serve_attacks: issue 41's and issue 55's attacks on a live `comfy-orch serve` with its
// default limits, each measured as docs/security.md ("Measured") reports it: the server's resident
// memory at its peak (sampled every 20 ms) and once the attack is over, a legitimate client's
// slowest answer during it (each request on a new connection from 127.0.0.1, the attacker's from
// 127.0.0.2 and .3 where it must be another address), and how long a stop takes.
//
//   bench_serve_attacks [ATTACK...]     (S5/S6 S9 S13 S14 H5 slow-senders slow-readers settings
//                                        progress-state ws-slots batch-cancel; all by default)
//
//   S5/S6  300 connections from the attacker (half sending a header, half a body, a byte a
//          second each, reconnecting as soon as they are closed) for 15 s, while a legitimate
//          client asks GET /prompt every 100 ms on a new connection: its slowest answer, and
//          how many were not 200.
//   S9     3 WebSocket clients that never read, while 400 prompts each send one of them a
//          900 KB `ui`: RSS at the peak, and after they closed.
//   S13    20 uploads of 60 MiB stalled 100 bytes before their end: RSS at the peak, how many
//          were refused; then each ended: RSS after.
//   S14    100 prompts of 7 MiB posted behind a busy one: RSS at the peak, GET /queue's size and
//          time; then the queue cleared: RSS after.
//   H5     SIGTERM while a node ignores its interrupt (--stop-grace-ms 5000): the time to exit,
//          and whether a worker outlived serve.
//
//   Issue 55 (the API thread's stall is the slowest GET /history?max_items=1, a route it answers;
//   GET /prompt and POST /interrupt are the io thread's):
//   slow-senders    for 20 s, 24 POST /prompt from 127.0.0.2 announcing 8 MiB, 16 uploads from
//                   127.0.0.3 announcing 64 MiB, each sending 256 KiB at once and then 1.1 KB/s,
//                   while a client posts /interrupt, a queue clear, a small prompt and GET
//                   /history?max_items=1 every 100 ms, and a 1 MiB upload every second: their
//                   statuses and slowest answers, and RSS.
//   slow-readers    a history of 16 prompts of 6 MiB (--max-history-bytes 256 MiB), then 8
//                   clients from 127.0.0.1 and 64 from 127.0.0.2 that ask GET /history with a
//                   4 KiB receive buffer and never read, for 20 s: RSS against before, and the
//                   probes' answers (GET /prompt and GET /history?max_items=1 every 100 ms from
//                   .1, GET /prompt every second from .2).
//   settings        POST /api/settings of 1 MiB, then 4 MiB, of arrays nested 200 deep: its
//                   status and time, VmHWM's growth, and a probe's slowest answer every 10 ms.
//   progress-state  a chain of 10,000 nodes (SolidImage, 9,998 InvertImage, ImageChecksum; the
//                   example ImageOps pack) with a WebSocket client of its client_id reading as
//                   fast as it can: POST to the prompt's end, bytes of progress_state, whether
//                   the client heard the end; and the same prompt under `comfy-orch run`.
//   ws-slots        64 WebSocket clients from 127.0.0.2, then a tab from 127.0.0.1: its
//                   handshake's status and its status greeting.
//   batch-cancel    1,000 pending prompts behind a busy node (--stop-grace-ms 300), then
//                   POST /api/jobs/cancel of their ids and random UUIDs, 200,000 in all: the
//                   answer's time, and a probe's slowest answer every 10 ms.
//
// Each line says the bound the issue set beside the figure; nothing here passes or fails a run.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "serve_client.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using orch::testing::serve_process;
using tcp = boost::asio::ip::tcp;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

// `pid`'s resident memory (VmRSS:), or its peak so far (VmHWM:).
double rss_mib(pid_t pid, const std::string& field = "VmRSS:") {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string key; in >> key;) {
    if (key == field) {
      double kib = 0;
      in >> kib;
      return kib / 1024;
    }
    std::getline(in, key);
  }
  return 0;
}

// The most `pid` held while this lived, sampled every 20 ms on its own thread.
class rss_peak {
 public:
  explicit rss_peak(pid_t pid) : thread_([this, pid] {
    while (!done_) {
      const double now = rss_mib(pid);
      if (now > peak_) peak_ = now;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }) {}
  ~rss_peak() { stop(); }
  double stop() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
    return peak_;
  }

 private:
  std::atomic<bool> done_{false};
  std::atomic<double> peak_{0};
  std::thread thread_;
};

double ms_since(clock_type::time_point start) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - start).count();
}

void line(const char* attack, const std::string& figure, const std::string& bound) {
  std::printf("%-14s %-62s %s\n", attack, figure.c_str(), bound.c_str());
  std::fflush(stdout);
}

std::string mib(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f MiB", v);
  return buf;
}

// The native test pack (TestBusy, TestSleep) and the Python bench pack (BigUi).
fs::path write_deployment(const fs::path& dir) {
  fs::create_directories(dir / "packs/Native/nodes");
  std::ofstream(dir / "packs/Native/nodes/comfy-env.toml")
      << "[worker]\nlibrary = \"liborch_pack_test_nodes.so\"\n";
  fs::copy(fs::path(ORCH_BENCH_PYTHON_PACKS) / "PyBench", dir / "packs/PyBench",
           fs::copy_options::recursive);
  const fs::path file = dir / "deployment.toml";
  std::ofstream(file) << "[host]\ndevice = \"sim\"\n[host.sim]\ncapacity = \"4GiB\"\n"
                      << "[plugins]\nsearch_paths = [\"" << ORCH_BENCH_PLUGIN_DIR << "\"]\n"
                      << "[packs]\npaths = [\"packs/Native\", \"packs/PyBench\"]\n"
                      << "library_paths = [\"" << ORCH_BENCH_PACKS_DIR << "\"]\n"
                      << "[packs.python]\n\"pybench-nodes\" = \"/usr/bin/python3\"\n"
                      << "[workers]\nhandshake_timeout = \"60s\"\n"
                      << "[shm]\npinned_pool_size = \"64MiB\"\n[server]\ncache = \"none\"\n";
  return file;
}

std::unique_ptr<tcp::socket> connect(boost::asio::io_context& io, unsigned short port) {
  auto sock = std::make_unique<tcp::socket>(io);
  sock->connect({boost::asio::ip::make_address("127.0.0.1"), port});
  return sock;
}

void wait_until_idle(const serve_process& s) {
  for (int i = 0; i < 60000; ++i) {
    const auto r = s.get("/prompt");
    if (r.status == 200 && r.json()["exec_info"]["queue_remaining"] == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// The example ImageOps pack (SolidImage, InvertImage, ImageChecksum) beside the native test
// pack, for the progress-state chain; empty when its library is not built.
fs::path write_image_ops_deployment(const fs::path& dir) {
  const fs::path source = ORCH_BENCH_SOURCE_DIR;
  const fs::path libraries = ORCH_BENCH_EXAMPLES_DIR;
  if (!fs::exists(libraries / "liborch_pack_image_ops.so")) return {};
  const fs::path file = dir / "image-ops.toml";
  std::ofstream(file) << "[host]\ndevice = \"sim\"\n[host.sim]\ncapacity = \"4GiB\"\n"
                      << "[plugins]\nsearch_paths = [\"" << ORCH_BENCH_PLUGIN_DIR << "\"]\n"
                      << "[packs]\npaths = [\"packs/Native\", \""
                      << (source / "examples/packs/ComfyUI-ImageOps").string() << "\"]\n"
                      << "library_paths = [\"" << ORCH_BENCH_PACKS_DIR << "\", \""
                      << libraries.string() << "\"]\n"
                      << "[workers]\nhandshake_timeout = \"60s\"\n"
                      << "[shm]\npinned_pool_size = \"64MiB\"\n[server]\ncache = \"none\"\n";
  return file;
}

// A connection to the server from `from`, a loopback address: 127.0.0.2 and .3 are other
// peers to the server than the legitimate client's 127.0.0.1. `receive_buffer` 4096 makes a
// client that reads nothing take no more than the server's send buffer.
std::unique_ptr<tcp::socket> connect_from(boost::asio::io_context& io, unsigned short port,
                                          const std::string& from, int receive_buffer = 0) {
  auto sock = std::make_unique<tcp::socket>(io);
  sock->open(tcp::v4());
  if (receive_buffer > 0)
    sock->set_option(boost::asio::socket_base::receive_buffer_size(receive_buffer));
  sock->bind({boost::asio::ip::make_address(from), 0});
  sock->connect({boost::asio::ip::make_address("127.0.0.1"), port});
  return sock;
}

// Whether the server has closed `sock` (now, without waiting).
bool closed_by_server(tcp::socket& sock) {
  pollfd p{sock.native_handle(), POLLRDHUP, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

// A request's answer as the client saw it: its status (0: none came, the connection failed or
// `limit` passed) and the time from connecting to its last byte.
struct answer {
  unsigned status = 0;
  double ms = 0;
  std::string body;
};

// One request on a new connection from `from`, whatever the server does (a synchronous read
// has no timeout: this one gives up after `limit`). A body the server refuses before it is all
// written may still have its answer read.
answer ask(unsigned short port, http::verb method, const std::string& target,
           const std::string& body = {}, const std::string& from = "127.0.0.1",
           const std::string& content_type = "application/json",
           std::chrono::seconds limit = 60s) {
  boost::asio::io_context io;
  beast::tcp_stream stream(io);
  answer a;
  http::request<http::string_body> req{method, target, 11};
  req.set(http::field::host, "127.0.0.1");
  if (!body.empty() || method == http::verb::post) {
    req.set(http::field::content_type, content_type);
    req.body() = body;
    req.prepare_payload();
  }
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(std::size_t{1} << 30);
  const auto start = clock_type::now();
  boost::system::error_code ec;
  stream.socket().open(tcp::v4(), ec);
  stream.socket().bind({boost::asio::ip::make_address(from), 0}, ec);
  stream.expires_after(limit);
  const tcp::endpoint server{boost::asio::ip::make_address("127.0.0.1"), port};
  stream.async_connect(server, [&](beast::error_code e) {
    if (e) return;
    http::async_write(stream, req, [&](beast::error_code, std::size_t) {
      http::async_read(stream, buffer, parser, [&](beast::error_code r, std::size_t) {
        if (r) return;
        a.status = parser.get().result_int();
        a.body = parser.get().body();
      });
    });
  });
  io.run();
  a.ms = ms_since(start);
  return a;
}

// What a legitimate client asks during an attack, and what it got.
struct probe {
  std::string name;  // as printed, "POST /interrupt"
  http::verb method;
  std::string target;
  std::string body = {};
  std::string from = "127.0.0.1";
  std::string content_type = "application/json";
};

struct probe_figures {
  int asked = 0;
  double slowest = 0;
  double slowest_at = 0;  // seconds from the probe's start to the slowest request's
  std::map<unsigned, int> statuses;  // 0: no answer
};

// "slowest of 66 POST /interrupt: 3 ms, 0 not 200", and the statuses that were not.
std::string describe(const probe& p, const probe_figures& f) {
  int failed = 0;
  std::string which;
  for (const auto& [status, count] : f.statuses) {
    if (status == 200) continue;
    failed += count;
    which += (which.empty() ? " (" : ", ") + std::to_string(count) + " x " +
             (status == 0 ? std::string("no answer") : std::to_string(status));
  }
  char at[32];
  std::snprintf(at, sizeof at, " (at %.1f s)", f.slowest_at);
  return "slowest of " + std::to_string(f.asked) + " " + p.name + ": " +
         std::to_string(static_cast<int>(f.slowest)) + " ms" + at + ", " +
         std::to_string(failed) + " not 200" + (which.empty() ? "" : which + ")");
}

// A legitimate client on its own thread: every `every`, each of `probes` in turn, each on a
// new connection.
class prober {
 public:
  prober(unsigned short port, std::vector<probe> probes, std::chrono::milliseconds every)
      : probes_(std::move(probes)), figures_(probes_.size()), thread_([this, port, every] {
          const auto began = clock_type::now();
          while (!done_) {
            for (std::size_t i = 0; i < probes_.size(); ++i) {
              const probe& p = probes_[i];
              const double at = ms_since(began) / 1000;
              const answer a = ask(port, p.method, p.target, p.body, p.from, p.content_type);
              const std::lock_guard lock(mutex_);
              figures_[i].asked += 1;
              if (a.ms > figures_[i].slowest) {
                figures_[i].slowest = a.ms;
                figures_[i].slowest_at = at;
              }
              figures_[i].statuses[a.status] += 1;
            }
            std::this_thread::sleep_for(every);
          }
        }) {}
  ~prober() { stop(); }
  prober(const prober&) = delete;
  prober& operator=(const prober&) = delete;
  void stop() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
  }
  // One line per probe, each with `attack` and `bound`; call after stop().
  void print(const char* attack, const std::string& bound) const {
    for (std::size_t i = 0; i < probes_.size(); ++i)
      line(attack, describe(probes_[i], figures_[i]), bound);
  }

 private:
  std::vector<probe> probes_;
  std::vector<probe_figures> figures_;
  std::mutex mutex_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

const probe get_prompt{"GET /prompt", http::verb::get, "/prompt"};
// A route the API thread answers: its slowest answer is that thread's stall.
const probe get_history_1{"GET /history?max_items=1", http::verb::get, "/history?max_items=1"};

const std::string form_boundary = "b0undary";
const std::string form_type = "multipart/form-data; boundary=" + form_boundary;

// The start of a multipart/form-data upload as a browser sends it, its file part's bytes next.
std::string form_start(const std::string& filename) {
  return "--" + form_boundary + "\r\nContent-Disposition: form-data; name=\"image\"; filename=\"" +
         filename + "\"\r\nContent-Type: image/png\r\n\r\n";
}

std::string upload_form(const std::string& filename, std::size_t bytes) {
  return form_start(filename) + std::string(bytes, 'i') + "\r\n--" + form_boundary +
         "\r\nContent-Disposition: form-data; name=\"overwrite\"\r\n\r\ntrue\r\n--" +
         form_boundary + "--\r\n";
}

// A WebSocket client of /ws?clientId=`id` from `from`, reading raw text messages.
class ws_reader {
 public:
  ws_reader(unsigned short port, const std::string& id, const std::string& from = "127.0.0.1")
      : ws_(io_) {
    auto& s = beast::get_lowest_layer(ws_);
    boost::system::error_code ec;
    s.socket().open(tcp::v4(), ec);
    s.socket().bind({boost::asio::ip::make_address(from), 0}, ec);
    s.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port), ec);
    if (ec) return;
    websocket::response_type res;
    ws_.handshake(res, "127.0.0.1", "/ws?clientId=" + id, ec);
    status_ = res.result_int();
    open_ = !ec;
  }
  unsigned status() const { return status_; }  // the handshake's: 101, or the refusal's
  // The next text message, or nullopt when the connection closed or `limit` passed (which
  // closes it).
  std::optional<std::string> next(std::chrono::milliseconds limit = 60s) {
    if (!open_) return std::nullopt;
    buffer_.clear();
    bool done = false;
    beast::error_code ec;
    ws_.async_read(buffer_, [&](beast::error_code e, std::size_t) {
      ec = e;
      done = true;
    });
    io_.restart();
    io_.run_for(limit);
    if (!done) {
      open_ = false;
      beast::get_lowest_layer(ws_).close();
      io_.restart();
      io_.run();
      return std::nullopt;
    }
    if (ec) {
      open_ = false;
      return std::nullopt;
    }
    return beast::buffers_to_string(buffer_.data());
  }

 private:
  boost::asio::io_context io_;
  websocket::stream<beast::tcp_stream> ws_;
  beast::flat_buffer buffer_;
  unsigned status_ = 0;
  bool open_ = false;
};

void slow_clients(const fs::path& file) {
  serve_process s(ORCH_BENCH_COMFY_ORCH, file.string());
  boost::asio::io_context io;
  std::atomic<bool> done{false};
  std::atomic<int> reconnects{0};
  std::thread attacker([&] {
    std::vector<std::unique_ptr<tcp::socket>> socks(300);
    const auto open = [&](std::size_t i) {
      boost::system::error_code ec;
      socks[i] = connect(io, s.port());
      const std::string start = i % 2 == 0 ? "GET /prompt HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                           : "POST /prompt HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                             "Content-Length: 100000\r\n\r\n{";
      boost::asio::write(*socks[i], boost::asio::buffer(start), ec);
    };
    for (std::size_t i = 0; i < socks.size(); ++i) open(i);
    while (!done) {
      for (std::size_t i = 0; i < socks.size() && !done; ++i) {
        boost::system::error_code ec;
        pollfd p{socks[i]->native_handle(), POLLRDHUP, 0};
        if (::poll(&p, 1, 0) == 1) {  // closed by the server: come back at once
          open(i);
          ++reconnects;
          continue;
        }
        boost::asio::write(*socks[i], boost::asio::buffer(std::string(1, ' ')), ec);
      }
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(1));  // the 300 are in
  double slowest = 0;
  int failed = 0, asked = 0;
  const auto end = clock_type::now() + std::chrono::seconds(15);
  while (clock_type::now() < end) {
    const auto start = clock_type::now();
    const auto r = s.get("/prompt");
    slowest = std::max(slowest, ms_since(start));
    ++asked;
    if (r.status != 200) ++failed;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  done = true;
  attacker.join();
  line("S5/S6", "slowest of " + std::to_string(asked) + " GET /prompt: " +
                    std::to_string(static_cast<int>(slowest)) + " ms, " + std::to_string(failed) +
                    " not 200 (" + std::to_string(reconnects.load()) + " attacker reconnects)",
       "(bound: 200 within 1 s)");
  s.stop();
}

void ws_readers_that_never_read(const fs::path& file) {
  serve_process s(ORCH_BENCH_COMFY_ORCH, file.string());
  const double before = rss_mib(s.pid());
  boost::asio::io_context io;
  std::vector<std::unique_ptr<tcp::socket>> readers;
  for (int i = 0; i < 3; ++i) {
    auto sock = std::make_unique<tcp::socket>(io);
    sock->open(tcp::v4());
    sock->set_option(boost::asio::socket_base::receive_buffer_size(4096));
    sock->connect({boost::asio::ip::make_address("127.0.0.1"), s.port()});
    boost::asio::write(*sock, boost::asio::buffer(
                                  "GET /ws?clientId=slow" + std::to_string(i) +
                                  " HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                                  "Connection: Upgrade\r\nSec-WebSocket-Key: "
                                  "dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"));
    readers.push_back(std::move(sock));
  }
  rss_peak peak(s.pid());
  orch::testing::http_connection conn(s.port());
  for (int i = 0; i < 400; ++i)
    conn.post("/prompt", {{"prompt", {{"1", {{"class_type", "BigUi"},
                                             {"inputs", {{"kib", 900}, {"seed", i}}}}}}},
                          {"client_id", "slow" + std::to_string(i % 3)}});
  wait_until_idle(s);
  const double top = peak.stop();
  readers.clear();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double closed = rss_mib(s.pid());  // what is left is the history's (128 MiB at most)
  s.post("/history", {{"clear", true}});
  std::this_thread::sleep_for(std::chrono::seconds(1));
  line("S9", "RSS " + mib(before) + " before, " + mib(top) + " at the peak, " + mib(closed) +
                 " once they closed, " + mib(rss_mib(s.pid())) + " with the history cleared",
       "(bound: under 300 MiB, falls back)");
  s.stop();
}

void stalled_uploads(const fs::path& file) {
  serve_process s(ORCH_BENCH_COMFY_ORCH, file.string());
  const double before = rss_mib(s.pid());
  const std::string boundary = "b0undary";
  std::string form = "--" + boundary +
                     "\r\nContent-Disposition: form-data; name=\"image\"; filename=\"big.png\"\r\n"
                     "Content-Type: image/png\r\n\r\n";
  form += std::string(std::size_t{60} << 20, 'x') + "\r\n--" + boundary + "--\r\n";
  boost::asio::io_context io;
  std::vector<std::unique_ptr<tcp::socket>> uploads;
  rss_peak peak(s.pid());
  int refused = 0;
  for (int i = 0; i < 20; ++i) {
    auto sock = connect(io, s.port());
    boost::system::error_code ec;
    boost::asio::write(*sock, boost::asio::buffer(
                                  "POST /upload/image HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                                  "multipart/form-data; boundary=" + boundary +
                                  "\r\nContent-Length: " + std::to_string(form.size()) +
                                  "\r\n\r\n"), ec);
    boost::asio::write(*sock, boost::asio::buffer(form.data(), form.size() - 100), ec);
    if (ec) ++refused;  // answered 503 and closed before the body went in
    uploads.push_back(std::move(sock));
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double stalled = peak.stop();
  int stored = 0;
  for (auto& sock : uploads) {
    boost::system::error_code ec;
    boost::asio::write(*sock, boost::asio::buffer(form.data() + form.size() - 100, 100), ec);
    orch::testing::beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(*sock, buffer, res, ec);
    if (!ec && res.result_int() == 200) ++stored;
  }
  uploads.clear();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  line("S13", "RSS " + mib(before) + " before, " + mib(stalled) + " with 20 x 60 MiB stalled, " +
                  mib(rss_mib(s.pid())) + " after; " + std::to_string(stored) + " stored, " +
                  std::to_string(20 - stored) + " refused",
       "(bound: under 300 MiB, falls back)");
  s.stop();
}

void large_queue(const fs::path& file) {
  serve_process s(ORCH_BENCH_COMFY_ORCH, file.string(), {"--stop-grace-ms", "300"});
  const double before = rss_mib(s.pid());
  s.post("/prompt", {{"prompt", {{"1", {{"class_type", "TestBusy"}, {"inputs", {{"ms", 600000}}}}}}}});
  rss_peak peak(s.pid());
  int accepted = 0;
  for (int i = 0; i < 100; ++i) {
    json prompt = {{"1", {{"class_type", "TestSleep"}, {"inputs", {{"ms", i}}}}}};
    prompt["1"]["_meta"] = {{"title", std::string(std::size_t{7} << 20, 'x')}};
    if (s.post("/prompt", {{"prompt", prompt}}).status == 200) ++accepted;
  }
  const auto start = clock_type::now();
  const auto queue = s.get("/queue");
  const double took = ms_since(start);
  const double top = peak.stop();
  s.post("/queue", {{"clear", true}});
  s.post("/interrupt", json::object());
  std::this_thread::sleep_for(std::chrono::seconds(1));
  line("S14", "RSS " + mib(before) + " before, " + mib(top) + " at the peak, " +
                  mib(rss_mib(s.pid())) + " after the clear; " + std::to_string(accepted) +
                  " of 100 queued; GET /queue " + mib(static_cast<double>(queue.body.size()) / (1 << 20)) +
                  " in " + std::to_string(static_cast<int>(took)) + " ms",
       "(bound: under 300 MiB, falls back)");
  s.stop();
}

void stop_during_a_busy_node(const fs::path& file) {
  serve_process s(ORCH_BENCH_COMFY_ORCH, file.string());
  std::vector<pid_t> workers;
  const json stats = s.get("/system_stats").json();
  for (const auto& row : stats["orch_processes"])
    if (row.value("mode", "") == "worker") workers.push_back(row["pid"].get<pid_t>());
  s.post("/prompt", {{"prompt", {{"1", {{"class_type", "TestBusy"}, {"inputs", {{"ms", 120000}}}}}}}});
  for (int i = 0; i < 500 && s.get("/queue").json()["queue_running"].empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto start = clock_type::now();
  const int code = s.stop(std::chrono::seconds(60));
  const double took = ms_since(start);
  int outlived = 0;
  for (const pid_t pid : workers) outlived += ::kill(pid, 0) == 0 ? 1 : 0;
  line("H5", "SIGTERM to exit " + std::to_string(static_cast<int>(took)) + " ms (exit " +
                 std::to_string(code) + "), " + std::to_string(outlived) + " of " +
                 std::to_string(workers.size()) + " workers outlived serve",
       "(bound: 5000 ms grace + 1 s, none)");
}

// Issue 55, item 3: bodies were charged to the budget as their Content-Length announced them,
// so 24 announcing 8 MiB and trickling in held the whole 192 MiB (16 uploads of 64 MiB the
// 1 GiB on disk) for hours, and every request with a body got 503. Each sends 256 KiB at once,
// so it holds something past its free 64 KiB, then 1.1 KB a second, above --min-body-rate.
void slow_senders(const fs::path& file) {
  serve_process s(ORCH_BENCH_COMFY_ORCH, file.string());
  const double before = rss_mib(s.pid());
  boost::asio::io_context io;
  std::vector<std::unique_ptr<tcp::socket>> senders;
  const std::size_t burst = std::size_t{256} << 10;
  for (int i = 0; i < 24; ++i) {
    const std::string head = "POST /prompt HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                             "application/json\r\nContent-Length: " +
                             std::to_string(std::size_t{8} << 20) +
                             "\r\n\r\n{\"prompt\": {}, \"extra_data\": {\"pad\": \"";
    senders.push_back(connect_from(io, s.port(), "127.0.0.2"));
    boost::asio::write(*senders.back(),
                       boost::asio::buffer(head + std::string(burst - head.size(), 'p')));
  }
  for (int i = 0; i < 16; ++i) {
    const std::string head = "POST /upload/image HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: " +
                             form_type + "\r\nContent-Length: " +
                             std::to_string(std::size_t{64} << 20) + "\r\n\r\n" +
                             form_start("slow" + std::to_string(i) + ".png");
    senders.push_back(connect_from(io, s.port(), "127.0.0.3"));
    boost::asio::write(*senders.back(),
                       boost::asio::buffer(head + std::string(burst - head.size(), 'u')));
  }
  for (auto& sock : senders) sock->non_blocking(true);
  rss_peak peak(s.pid());
  const std::string small_prompt =
      json{{"prompt", {{"1", {{"class_type", "TestEmpty"}, {"inputs", json::object()}}}}}}.dump();
  prober client(s.port(),
                {{"POST /interrupt", http::verb::post, "/interrupt", "{}"},
                 {"POST /queue {clear}", http::verb::post, "/queue", R"({"clear": true})"},
                 {"POST /prompt (TestEmpty)", http::verb::post, "/prompt", small_prompt},
                 get_history_1},
                100ms);
  prober uploader(s.port(),
                  {{"1 MiB POST /upload/image", http::verb::post, "/upload/image",
                    upload_form("probe.png", std::size_t{1} << 20), "127.0.0.1", form_type}},
                  1000ms);
  int closed = 0;
  const std::string trickle(1100, 'p');
  const auto end = clock_type::now() + 20s;
  while (clock_type::now() < end) {
    std::this_thread::sleep_for(1s);
    for (auto& sock : senders) {
      if (!sock) continue;
      if (closed_by_server(*sock)) {  // made room for another, or cut: not sent again
        sock.reset();
        ++closed;
        continue;
      }
      boost::system::error_code ec;
      sock->write_some(boost::asio::buffer(trickle), ec);
    }
  }
  client.stop();
  uploader.stop();
  const double top = peak.stop();
  senders.clear();
  line("slow-senders", "24 x 8 MiB bodies and 16 x 64 MiB uploads at 1.1 KB/s for 20 s: RSS " +
                           mib(before) + " before, " + mib(top) + " at the peak; " +
                           std::to_string(closed) + " of the 40 closed by the server",
       "(bound: small bodies never refused)");
  client.print("slow-senders", "(bound: 200, within 1 s)");
  uploader.print("slow-senders", "(bound: 200)");
  s.stop();
}

// Fills the history with `count` prompts of `pad` bytes each (retried while the pending queue's
// bytes are full), and waits for them to end.
void fill_history(const serve_process& s, int count, std::size_t pad) {
  for (int i = 0; i < count; ++i) {
    const json body = {
        {"prompt", {{"1", {{"class_type", "TestEmpty"}, {"inputs", json::object()}}}}},
        {"extra_data", {{"pad", std::string(pad, static_cast<char>('a' + i % 26))}}}};
    for (int tries = 0; tries < 200 && s.post("/prompt", body).status == 503; ++tries)
      std::this_thread::sleep_for(50ms);
  }
  wait_until_idle(s);
}

// Issue 55, item 4: 8 clients that never read GET /history (a 125 MB history) took the server
// from 180 MB to 1.11 GB and held the API thread 5.2 s while their answers were built; 64 from
// one address held its every slot for 60 s, renewable, and its other requests got 503.
void slow_readers(const fs::path& file) {
  serve_process s(ORCH_BENCH_COMFY_ORCH, file.string(), {"--max-history-bytes", "268435456"});
  fill_history(s, 16, std::size_t{6} << 20);
  const std::size_t entries = s.get("/history").json().size();
  std::this_thread::sleep_for(1s);
  const double before = rss_mib(s.pid());
  rss_peak peak(s.pid());
  boost::asio::io_context io;
  std::vector<std::unique_ptr<tcp::socket>> readers;
  const auto ask_and_never_read = [&](const std::string& from) {
    auto sock = connect_from(io, s.port(), from, 4096);
    boost::system::error_code ec;
    boost::asio::write(*sock, boost::asio::buffer(std::string(
                                  "GET /history HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")), ec);
    return sock;
  };
  for (int i = 0; i < 8; ++i) readers.push_back(ask_and_never_read("127.0.0.1"));
  for (int i = 0; i < 64; ++i) readers.push_back(ask_and_never_read("127.0.0.2"));
  prober client(s.port(), {get_prompt, get_history_1}, 100ms);
  prober neighbour(s.port(), {{"GET /prompt from .2", http::verb::get, "/prompt", {}, "127.0.0.2"}},
                   1000ms);
  // Not asked again when closed: a connection the server closes with its answer unread keeps
  // its FIN behind that answer in the server's send buffer, so this side never sees the close.
  std::this_thread::sleep_for(20s);
  client.stop();
  neighbour.stop();
  const double top = peak.stop();
  const double held = rss_mib(s.pid());
  readers.clear();
  std::this_thread::sleep_for(1s);
  line("slow-readers", "history of " + std::to_string(entries) + " x 6 MiB; 8 + 64 non-reading "
                       "GET /history for 20 s: RSS " + mib(before) + " before, " + mib(top) +
                       " at the peak, " + mib(held) + " at the end, " + mib(rss_mib(s.pid())) +
                       " once they closed",
       "(bound: RSS where it was)");
  client.print("slow-readers", "(bound: 200, within 1 s)");
  neighbour.print("slow-readers", "(bound: 200)");
  s.stop();
}

// Issue 55, item 5: POST /api/settings printed the merged settings, indented, before comparing
// them with the 4 MiB cap: 1 MiB of arrays nested deep took 1.0 GB and 1.3 s, 4 MiB 4.2 GB and
// 12 s of the API thread.
void nested_settings(const fs::path& file) {
  serve_process s(ORCH_BENCH_COMFY_ORCH, file.string());
  const std::string nest = std::string(200, '[') + std::string(200, ']');
  for (const std::size_t size : {std::size_t{1} << 20, std::size_t{4} << 20}) {
    std::string body = "{\"x\": [";
    while (body.size() < size) body += nest + ",";
    body.back() = ']';
    body += '}';
    const double hwm = rss_mib(s.pid(), "VmHWM:");
    prober client(s.port(), {get_prompt, get_history_1}, 10ms);
    std::this_thread::sleep_for(200ms);
    const answer a = ask(s.port(), http::verb::post, "/api/settings", body);
    std::this_thread::sleep_for(200ms);
    client.stop();
    const std::string what = std::to_string(size >> 20) + " MiB";
    line("settings", what + " nested 200 deep: " + std::to_string(a.status) + " in " +
                         std::to_string(static_cast<int>(a.ms)) + " ms; VmHWM " + mib(hwm) +
                         " before, " + mib(rss_mib(s.pid(), "VmHWM:")) + " after",
         "(bound: refused, no growth, not seconds)");
    client.print("settings", "(bound: 200, within 1 s)");
  }
  s.stop();
}

// Issue 55, item 6: every node's event sent the state of every node started so far: a
// 10,000-node chain took 50.3 s under serve (3.2 s under run), and its client, reading as fast
// as it could, was cut at 1,000 nodes.
void progress_state(const fs::path& dir) {
  const fs::path file = write_image_ops_deployment(dir);
  if (file.empty()) {
    line("progress-state", "skipped: build/examples/liborch_pack_image_ops.so is not built",
         "(build orch_pack_image_ops)");
    return;
  }
  json prompt = {{"1", {{"class_type", "SolidImage"},
                        {"inputs", {{"width", 2}, {"height", 2}, {"value", 0.5}}}}}};
  for (int i = 2; i < 10000; ++i)
    prompt[std::to_string(i)] = {{"class_type", "InvertImage"},
                                 {"inputs", {{"image", {std::to_string(i - 1), 0}}}}};
  prompt["10000"] = {{"class_type", "ImageChecksum"}, {"inputs", {{"image", {"9999", 0}}}}};
  double served = 0, bytes = 0;
  int states = 0, messages = 0;
  bool heard_the_end = false;
  {
    serve_process s(ORCH_BENCH_COMFY_ORCH, file.string());
    ws_reader ws(s.port(), "chain");
    ws.next(5s);  // the status greeting
    prober client(s.port(), {get_prompt, get_history_1}, 100ms);
    const auto start = clock_type::now();
    const answer queued = ask(s.port(), http::verb::post, "/prompt",
                              json{{"prompt", prompt}, {"client_id", "chain"}}.dump());
    const std::string id =
        queued.status == 200 ? json::parse(queued.body).value("prompt_id", "") : "";
    while (!id.empty()) {
      const auto m = ws.next(120s);
      if (!m) break;
      ++messages;
      if (m->find("\"progress_state\"") != std::string::npos) {
        const json j = json::parse(*m);
        if (j["type"] == "progress_state") {
          bytes += static_cast<double>(m->size());
          ++states;
        }
        continue;
      }
      if (m->find("\"executing\"") == std::string::npos) continue;
      const json j = json::parse(*m);
      if (j["type"] == "executing" && j["data"]["node"].is_null() && j["data"]["prompt_id"] == id) {
        heard_the_end = true;
        break;
      }
    }
    served = ms_since(start);
    client.stop();
    line("progress-state", "10,000-node chain under serve: POST to its end " +
                               std::to_string(static_cast<int>(served)) + " ms (POST " +
                               std::to_string(queued.status) + "); " + std::to_string(states) +
                               " progress_state, " + mib(bytes / (1 << 20)) + " of " +
                               std::to_string(messages) + " messages; the client " +
                               (heard_the_end ? "heard the end" : "was cut before the end"),
         "(bound: near run's, to the end)");
    client.print("progress-state", "(bound: 200, within 1 s)");
    s.stop();
  }
  std::ofstream(dir / "chain.json") << prompt.dump();
  const std::string command = std::string(ORCH_BENCH_COMFY_ORCH) + " run " + file.string() +
                              " --prompt " + (dir / "chain.json").string() +
                              " --json >/dev/null 2>&1";
  const auto start = clock_type::now();
  const int code = std::system(command.c_str());
  line("progress-state", "the same under `comfy-orch run --json` (workers' start included): " +
                             std::to_string(static_cast<int>(ms_since(start))) + " ms (exit " +
                             std::to_string(WIFEXITED(code) ? WEXITSTATUS(code) : -1) + ")",
       "(the reference)");
}

// Issue 55: one address took all 64 WebSocket slots, and the user's tab got 503.
void ws_slots(const fs::path& file) {
  serve_process s(ORCH_BENCH_COMFY_ORCH, file.string());
  boost::asio::io_context io;
  std::vector<std::unique_ptr<tcp::socket>> held;
  int upgraded = 0;
  for (int i = 0; i < 64; ++i) {
    held.push_back(connect_from(io, s.port(), "127.0.0.2"));
    boost::system::error_code ec;
    const std::string upgrade =
        "GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
    boost::asio::write(*held.back(), boost::asio::buffer(upgrade), ec);
    char buf[256];
    const std::size_t n = held.back()->read_some(boost::asio::buffer(buf), ec);
    if (std::string(buf, n).rfind("HTTP/1.1 101", 0) == 0) ++upgraded;
  }
  std::this_thread::sleep_for(500ms);
  int open = 0;
  for (auto& sock : held) open += closed_by_server(*sock) ? 0 : 1;
  const auto start = clock_type::now();
  ws_reader tab(s.port(), "tab");
  const auto greeting = tab.next(5s);
  const double took = ms_since(start);
  const bool status = greeting && greeting->find("\"status\"") != std::string::npos;
  line("ws-slots", "64 upgrades from .2: " + std::to_string(upgraded) + " got 101, " +
                       std::to_string(open) + " still open; the tab from .1: " +
                       std::to_string(tab.status()) +
                       (status ? ", its status greeting" : ", no greeting") +
                       " in " + std::to_string(static_cast<int>(took)) + " ms",
       "(bound: 101 and its greeting)");
  held.clear();
  s.stop();
}

// Issue 55: a batch cancel of 200,000 ids was done one id at a time, a pass over the pending
// queue each: it held the API thread 2 s.
void batch_cancel(const fs::path& file) {
  serve_process s(ORCH_BENCH_COMFY_ORCH, file.string(), {"--stop-grace-ms", "300"});
  s.post("/prompt",
         {{"prompt", {{"1", {{"class_type", "TestBusy"}, {"inputs", {{"ms", 120000}}}}}}}});
  for (int i = 0; i < 500 && s.get("/queue").json()["queue_running"].empty(); ++i)
    std::this_thread::sleep_for(10ms);
  json ids = json::array();
  orch::testing::http_connection conn(s.port());
  for (int i = 0; i < 1000; ++i) {
    const auto r = conn.post("/prompt", {{"prompt", {{"1", {{"class_type", "TestSleep"},
                                                            {"inputs", {{"ms", i + 1}}}}}}}});
    if (r.status == 200) ids.push_back(r.json()["prompt_id"]);
  }
  const std::size_t queued = ids.size();
  std::mt19937_64 random(55);
  while (ids.size() < 200000) {  // canonical version-4 UUIDs that name no prompt
    const std::uint64_t a = random(), b = random();
    char uuid[37];
    std::snprintf(uuid, sizeof uuid, "%08x-%04x-4%03x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                  static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xfff),
                  static_cast<unsigned>(0x8000 | ((b >> 48) & 0x3fff)),
                  static_cast<unsigned long long>(b & 0xffffffffffffULL));
    ids.push_back(uuid);
  }
  const std::string body = json{{"job_ids", ids}}.dump();
  prober client(s.port(), {get_prompt, get_history_1}, 10ms);
  std::this_thread::sleep_for(200ms);
  const answer a = ask(s.port(), http::verb::post, "/api/jobs/cancel", body);
  std::this_thread::sleep_for(200ms);
  client.stop();
  const std::size_t left = s.get("/queue").json()["queue_pending"].size();
  line("batch-cancel", "200,000 ids (" + std::to_string(queued) + " of 1,000 queued), " +
                           mib(static_cast<double>(body.size()) / (1 << 20)) + ": " +
                           std::to_string(a.status) + " in " +
                           std::to_string(static_cast<int>(a.ms)) + " ms; " +
                           std::to_string(left) + " pending after",
       "(bound: API thread not held)");
  client.print("batch-cancel", "(bound: 200, within 1 s)");
  s.post("/interrupt", json::object());
  s.stop();
}

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);  // a write to a connection the server closed is an error, not an end
  const std::vector<std::string> chosen(argv + 1, argv + argc);
  const auto run = [&](const char* attack) {
    return chosen.empty() || std::find(chosen.begin(), chosen.end(), attack) != chosen.end();
  };
  char tmpl[] = "/tmp/orch-attacks-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return 1;
  const fs::path dir = tmpl;
  const fs::path file = write_deployment(dir);
  std::printf("bench_serve_attacks: comfy-orch serve with its default limits, %u CPUs\n",
              std::thread::hardware_concurrency());
  if (run("S5/S6")) slow_clients(file);
  if (run("S9")) ws_readers_that_never_read(file);
  if (run("S13")) stalled_uploads(file);
  if (run("S14")) large_queue(file);
  if (run("H5")) stop_during_a_busy_node(file);
  if (run("slow-senders")) slow_senders(file);
  if (run("slow-readers")) slow_readers(file);
  if (run("settings")) nested_settings(file);
  if (run("progress-state")) progress_state(dir);
  if (run("ws-slots")) ws_slots(file);
  if (run("batch-cancel")) batch_cancel(file);
  std::error_code ec;
  fs::remove_all(dir, ec);
  return 0;
}
