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
#include <signal.h>

#include "serve_attack_kit.hpp"

namespace orch::serve_attacks {
namespace {

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

}  // namespace
}  // namespace orch::serve_attacks

int main(int argc, char** argv) {
  using namespace orch::serve_attacks;
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
