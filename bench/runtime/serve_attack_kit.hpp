// serve_attack_kit: what bench_serve_attacks' cases share (bench_serve_attacks.cpp for issue
// 41's, bench_serve_attacks_55.cpp for issue 55's): the deployment, RSS sampling, a legitimate
// client's probes and their figures, raw connections and WebSocket readers.
#pragma once

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

namespace orch::serve_attacks {


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
inline double rss_mib(pid_t pid, const std::string& field = "VmRSS:") {
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

inline double ms_since(clock_type::time_point start) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - start).count();
}

inline void line(const char* attack, const std::string& figure, const std::string& bound) {
  std::printf("%-14s %-62s %s\n", attack, figure.c_str(), bound.c_str());
  std::fflush(stdout);
}

inline std::string mib(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f MiB", v);
  return buf;
}

// The native test pack (TestBusy, TestSleep) and the Python bench pack (BigUi).
inline fs::path write_deployment(const fs::path& dir) {
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

inline std::unique_ptr<tcp::socket> connect(boost::asio::io_context& io, unsigned short port) {
  auto sock = std::make_unique<tcp::socket>(io);
  sock->connect({boost::asio::ip::make_address("127.0.0.1"), port});
  return sock;
}

inline void wait_until_idle(const serve_process& s) {
  for (int i = 0; i < 60000; ++i) {
    const auto r = s.get("/prompt");
    if (r.status == 200 && r.json()["exec_info"]["queue_remaining"] == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// The example ImageOps pack (SolidImage, InvertImage, ImageChecksum) beside the native test
// pack, for the progress-state chain; empty when its library is not built.
inline fs::path write_image_ops_deployment(const fs::path& dir) {
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
inline std::unique_ptr<tcp::socket> connect_from(boost::asio::io_context& io, unsigned short port,
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
inline bool closed_by_server(tcp::socket& sock) {
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
inline answer ask(unsigned short port, http::verb method, const std::string& target,
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
inline std::string describe(const probe& p, const probe_figures& f) {
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

inline const std::string form_boundary = "b0undary";
inline const std::string form_type = "multipart/form-data; boundary=" + form_boundary;

// The start of a multipart/form-data upload as a browser sends it, its file part's bytes next.
inline std::string form_start(const std::string& filename) {
  return "--" + form_boundary + "\r\nContent-Disposition: form-data; name=\"image\"; filename=\"" +
         filename + "\"\r\nContent-Type: image/png\r\n\r\n";
}

inline std::string upload_form(const std::string& filename, std::size_t bytes) {
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

// Issue 55's cases (bench_serve_attacks_55.cpp).
void slow_senders(const fs::path& file);
void slow_readers(const fs::path& file);
void nested_settings(const fs::path& file);
void progress_state(const fs::path& dir);
void ws_slots(const fs::path& file);
void batch_cancel(const fs::path& file);

}  // namespace orch::serve_attacks
