// bench_serve_attacks' issue 55 cases (listed in bench_serve_attacks.cpp's header).
#include <poll.h>
#include <sys/socket.h>

#include "serve_attack_kit.hpp"

namespace orch::serve_attacks {

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

}  // namespace orch::serve_attacks
