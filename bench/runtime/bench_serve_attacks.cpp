// bench_serve_attacks: issue 41's attacks on a live `comfy-orch serve` with its default limits,
// each measured as docs/security.md ("Measured") reports it: the server's resident memory at its
// peak (sampled every 20 ms) and once the attack is over, a legitimate client's slowest answer
// during it, and how long a stop takes.
//
//   bench_serve_attacks [ATTACK...]     (S5/S6 S9 S13 S14 H5; all by default)
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
// Each line says the bound the issue set beside the figure; nothing here passes or fails a run.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "serve_client.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using orch::testing::serve_process;
using tcp = boost::asio::ip::tcp;
namespace http = boost::beast::http;
using clock_type = std::chrono::steady_clock;

double rss_mib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string key; in >> key;) {
    if (key == "VmRSS:") {
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
  std::printf("%-7s %-62s %s\n", attack, figure.c_str(), bound.c_str());
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

}  // namespace

int main(int argc, char** argv) {
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
  std::error_code ec;
  fs::remove_all(dir, ec);
  return 0;
}
