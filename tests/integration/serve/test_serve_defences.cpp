// `comfy-orch serve` against hostile clients (docs/security.md): oversized and slow requests,
// cross-site pages, clients that never read, floods of connections, prompts and uploads, and a
// stop while a node ignores its interrupt. Each test is an attack that once worked; the server
// must answer it with a clear refusal and go on serving everyone else.
#include <gtest/gtest.h>

#include <poll.h>

#include <future>
#include <set>

#include "serve_fixture.hpp"

namespace {

using namespace orch::serve_testing;

TEST_F(serve_test, a_body_over_the_cap_gets_413_and_the_server_goes_on) {
  auto s = serve({"--max-body", "4096"});
  const auto r = s->post("/prompt", {{"prompt", quick_prompt}, {"pad", std::string(8192, 'x')}});
  EXPECT_EQ(r.status, 413u) << r.body;
  EXPECT_EQ(s->get("/prompt").status, 200u);
  EXPECT_EQ(s->stop(), 0);
}

TEST_F(serve_test, a_client_that_never_finishes_its_header_is_cut_off) {
  auto s = serve({"--header-timeout-ms", "300"});
  boost::asio::io_context io;
  orch::testing::tcp::socket sock(io);
  sock.connect({boost::asio::ip::make_address("127.0.0.1"), s->port()});
  boost::asio::write(sock, boost::asio::buffer(std::string("GET /prompt HTTP/1.1\r\nHost: x")));
  char buf[64];
  boost::system::error_code ec;
  const auto start = std::chrono::steady_clock::now();
  sock.read_some(boost::asio::buffer(buf), ec);  // the server closes: end of stream
  EXPECT_TRUE(ec) << "the server answered an unfinished header";
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_EQ(s->get("/prompt").status, 200u);  // and serves the next client
  EXPECT_EQ(s->stop(), 0);
}

// The next request on a kept-alive connection has the header timeout too, not the 60 s a quiet
// connection may idle.
TEST_F(serve_test, a_kept_alive_client_that_never_finishes_its_next_header_is_cut_off) {
  auto s = serve({"--header-timeout-ms", "300"});
  boost::asio::io_context io;
  orch::testing::tcp::socket sock(io);
  sock.connect({boost::asio::ip::make_address("127.0.0.1"), s->port()});
  const std::string request = "GET /prompt HTTP/1.1\r\nHost: x\r\n\r\n";
  boost::asio::write(sock, boost::asio::buffer(request));
  orch::testing::beast::flat_buffer buffer;
  orch::testing::http::response<orch::testing::http::string_body> res;
  orch::testing::http::read(sock, buffer, res);
  ASSERT_EQ(res.result_int(), 200);
  ASSERT_TRUE(res.keep_alive());
  boost::asio::write(sock, boost::asio::buffer(std::string("GET /prompt HTTP/1.1\r\nHost: x")));
  char buf[64];
  boost::system::error_code ec;
  const auto start = std::chrono::steady_clock::now();
  sock.read_some(boost::asio::buffer(buf), ec);  // the server closes: end of stream
  EXPECT_TRUE(ec) << "the server answered an unfinished header";
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);  // well before the 60 s idle timeout
  EXPECT_EQ(s->get("/prompt").status, 200u);
  EXPECT_EQ(s->stop(), 0);
}

// S19: a page on any site can make a browser POST a prompt to 127.0.0.1 as text/plain (no
// preflight) or open a WebSocket there. As ComfyUI, a loopback server refuses an Origin whose
// host is not the one the request addressed.
TEST_F(serve_test, a_cross_site_request_to_a_loopback_server_is_refused_websocket_included) {
  auto s = serve();
  const std::string prompt = R"({"prompt": {"1": {"class_type": "TestEmpty", "inputs": {}}}})";
  const auto attack = s->send(http::verb::post, "/prompt", prompt, "text/plain", false,
                              {{"Origin", "https://evil.example"}});
  EXPECT_EQ(attack.status, 403u) << attack.body;
  EXPECT_TRUE(s->get("/history").json().empty()) << "the refused prompt must not run";
  EXPECT_THROW(ws_client(s->port(), "page", "https://evil.example"),
               boost::system::system_error);
  // The server's own page (same host) and clients that send no Origin go on.
  const std::string own = "http://127.0.0.1:" + std::to_string(s->port());
  EXPECT_EQ(s->send(http::verb::post, "/prompt", prompt, "application/json", false,
                    {{"Origin", own}}).status,
            200u);
  ws_client page(s->port(), "own", own);
  EXPECT_TRUE(page.next());
  EXPECT_EQ(s->send(http::verb::options, "/prompt", "", "text/plain").status, 200u);
  EXPECT_EQ(s->stop(), 0);
}

TEST_F(serve_test, enable_cors_header_lets_other_origins_in_and_says_so_in_every_answer) {
  auto s = serve({"--enable-cors-header"});
  const auto r = s->send(http::verb::get, "/queue", "", "text/plain", false,
                         {{"Origin", "https://app.example"}});
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(r.header("access-control-allow-origin"), "*");
  EXPECT_EQ(s->stop(), 0);
  auto one = serve({"--enable-cors-header", "https://app.example"});
  EXPECT_EQ(one->get("/queue").header("access-control-allow-origin"), "https://app.example");
  EXPECT_EQ(one->stop(), 0);
}

// As ComfyUI: a prompt queued without a client_id sends no client its node events (only
// progress and execution_interrupted go to everyone), and comfy.org credentials in extra_data
// are never stored, so neither /queue nor /history shows them.
TEST_F(serve_test, a_prompt_without_client_id_tells_no_one_its_events_and_secrets_are_not_kept) {
  auto s = serve();
  ws_client watcher(s->port(), "watcher");
  ASSERT_TRUE(watcher.next());  // its greeting
  const auto r = s->post("/prompt", {{"prompt", quick_prompt},
                                     {"extra_data",
                                      {{"api_key_comfy_org", "sk-secret"},
                                       {"auth_token_comfy_org", "tok-secret"},
                                       {"extra_pnginfo", {{"workflow", json::object()}}}}}});
  ASSERT_EQ(r.status, 200u) << r.body;
  const std::string id = r.json()["prompt_id"];
  json entry;
  ASSERT_TRUE(wait_until([&] { return !(entry = history_of(*s, id)).is_null(); }));
  const json extra = entry["prompt"][3];
  EXPECT_FALSE(extra.contains("api_key_comfy_org")) << extra.dump();
  EXPECT_FALSE(extra.contains("auth_token_comfy_org")) << extra.dump();
  EXPECT_TRUE(extra.contains("extra_pnginfo"));
  EXPECT_EQ(s->get("/history").body.find("secret"), std::string::npos);
  std::set<std::string> heard;
  while (auto m = watcher.next(500ms)) heard.insert((*m)["type"].get<std::string>());
  EXPECT_EQ(heard.count("executing") + heard.count("executed") + heard.count("execution_start") +
                heard.count("execution_success"),
            0u)
      << json(heard).dump();
  EXPECT_EQ(s->stop(), 0);
}

// S14: the pending queue is capped in prompts and in bytes; past either, 503 queue_full in
// ComfyUI's error shape, and nothing of the refused prompt is kept.
TEST_F(serve_test, a_full_queue_refuses_more_prompts_by_count_and_by_bytes) {
  auto s = serve({"--max-queue", "2", "--max-queue-bytes", "4096"});
  queue(*s, sleep_prompt(60000), "c");  // runs
  wait_inside_the_running_node(*s);
  queue(*s, sleep_prompt(1), "c");
  queue(*s, sleep_prompt(2), "c");
  auto refused = s->post("/prompt", {{"prompt", sleep_prompt(3)}, {"client_id", "c"}});
  EXPECT_EQ(refused.status, 503u) << refused.body;
  EXPECT_EQ(refused.json()["error"]["type"], "queue_full");
  EXPECT_NE(refused.json()["error"]["details"].get<std::string>().find("--max-queue"),
            std::string::npos);
  EXPECT_EQ(refused.json()["node_errors"], json::object());
  EXPECT_EQ(s->get("/queue").json()["queue_pending"].size(), 2u);
  EXPECT_EQ(s->post("/queue", {{"clear", true}}).status, 200u);
  // By bytes: one prompt of more than the 4 KiB the queue may hold.
  json big = sleep_prompt(1);
  big["1"]["_meta"] = {{"title", std::string(5000, 'x')}};
  refused = s->post("/prompt", {{"prompt", big}, {"client_id", "c"}});
  EXPECT_EQ(refused.status, 503u) << refused.body;
  EXPECT_NE(refused.json()["error"]["details"].get<std::string>().find("--max-queue-bytes"),
            std::string::npos);
  EXPECT_EQ(s->post("/interrupt", json::object()).status, 200u);
  EXPECT_EQ(s->stop(), 0);
}

// S9: a WebSocket client that never reads may hold --max-ws-queue-bytes of messages in the
// server, no more; past it, it is disconnected (three such clients had taken 1.45 GB). Its slot
// coming free (--max-ws-clients 1) is what shows it.
TEST_F(serve_test, a_websocket_client_that_never_reads_is_disconnected_past_its_byte_cap) {
  auto s = serve({"--max-ws-queue-bytes", "65536", "--max-ws-clients", "1"});
  boost::asio::io_context io;
  tcp::socket slow(io);
  slow.open(tcp::v4());
  slow.set_option(boost::asio::socket_base::receive_buffer_size(4096));  // it reads nothing
  slow.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), s->port()));
  boost::asio::write(slow, boost::asio::buffer(std::string(
                               "GET /ws?clientId=slow HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                               "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                               "Sec-WebSocket-Version: 13\r\n\r\n")));
  EXPECT_THROW(ws_client(s->port(), "probe"), boost::system::system_error);  // the slot is taken
  const json prompt = {{"1", {{"class_type", "TestEmpty"}, {"inputs", json::object()}}}};
  http_connection conn(s->port());
  bool freed = false;
  for (int round = 0; round < 100 && !freed; ++round) {
    for (int i = 0; i < 200; ++i)
      ASSERT_EQ(conn.post("/prompt", {{"prompt", prompt}, {"client_id", "slow"}}).status, 200u);
    try {
      ws_client probe(s->port(), "probe");
      freed = true;
    } catch (const boost::system::system_error&) {
    }
  }
  EXPECT_TRUE(freed) << "the client that does not read was never disconnected";
  EXPECT_EQ(s->stop(), 0);
}

// S5, S6: clients that send a header or a body a byte at a time held every connection slot, and
// every answerable request got 503. With the slots full, the connection waiting longest for a
// request it has not finished sending makes room.
TEST_F(serve_test, slow_clients_holding_every_slot_do_not_keep_an_answerable_request_out) {
  auto s = serve({"--max-connections", "8"});
  boost::asio::io_context io;
  std::vector<std::unique_ptr<tcp::socket>> slow;
  for (int i = 0; i < 8; ++i) {
    auto sock = std::make_unique<tcp::socket>(io);
    sock->connect({boost::asio::ip::make_address("127.0.0.1"), s->port()});
    const std::string start = i % 2 == 0
                                  ? "GET /prompt HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "  // S5
                                  : "POST /prompt HTTP/1.1\r\nHost: 127.0.0.1\r\n"          // S6
                                    "Content-Length: 1000\r\n\r\n{";
    boost::asio::write(*sock, boost::asio::buffer(start));
    slow.push_back(std::move(sock));
  }
  for (int i = 0; i < 20; ++i) EXPECT_EQ(s->get("/prompt").status, 200u) << "request " << i;
  EXPECT_EQ(s->stop(), 0);
}


// A connection from `address` that sends half a header and waits.
std::unique_ptr<tcp::socket> half_header_from(boost::asio::io_context& io, const serve_process& s,
                                              const std::string& address) {
  auto sock = connect_from(io, s, address);
  boost::asio::write(*sock, boost::asio::buffer(std::string("GET /prompt HTTP/1.1\r\nHost: x")));
  return sock;
}

// One peer cannot take every slot: past --max-connections-per-peer its own longest-waiting
// connection makes room (with 20 slow connections from one address and 16 slots, only 4 had
// closed), and another peer is answered at once.
TEST_F(serve_test, one_peer_cannot_take_every_connection_slot) {
  auto s = serve({"--max-connections", "16", "--max-connections-per-peer", "8"});
  boost::asio::io_context io;
  std::vector<std::unique_ptr<tcp::socket>> slow;
  for (int i = 0; i < 20; ++i) slow.push_back(half_header_from(io, *s, "127.0.0.1"));
  // Accepted in order: once a later connection is answered, the 20 were accepted before it.
  auto other = half_header_from(io, *s, "127.0.0.2");
  boost::asio::write(*other, boost::asio::buffer(std::string("\r\n\r\n")));
  orch::testing::beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(*other, buffer, res);
  EXPECT_EQ(res.result_int(), 200) << res.body();
  // The oldest 12 of the first peer's were closed to keep it at 8; the newest 8 are open.
  for (std::size_t i = 0; i < 12; ++i)
    EXPECT_TRUE(closed_by_server(*slow[i])) << "connection " << i << " is still open";
  for (std::size_t i = 12; i < 20; ++i) {
    pollfd p{slow[i]->native_handle(), POLLIN | POLLRDHUP, 0};
    EXPECT_EQ(::poll(&p, 1, 0), 0) << "connection " << i << " was closed";
  }
  EXPECT_EQ(s->get("/prompt").status, 200u);
  slow.clear();
  EXPECT_EQ(s->stop(), 0);
}

// S6: a body that comes a few bytes at a time, never stalling for the header timeout, had held
// its connection for as long as its client liked (the stall timer restarted on every read). A
// body must average --min-body-rate once it has had --header-timeout-ms: one trickling 100 bytes
// a second against a floor of 1000 is cut off soon after its first second.
TEST_F(serve_test, a_body_that_trickles_below_the_minimum_rate_is_cut_off) {
  auto s = serve({"--header-timeout-ms", "1000", "--min-body-rate", "1000"});
  boost::asio::io_context io;
  tcp::socket sock(io);
  sock.connect({boost::asio::ip::make_address("127.0.0.1"), s->port()});
  boost::asio::write(sock, boost::asio::buffer(std::string(
                               "POST /prompt HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                               "application/json\r\nContent-Length: 100000\r\n\r\n")));
  bool cut_off = false;
  for (int i = 0; i < 300 && !cut_off; ++i) {  // 30 s of trickling at most
    boost::system::error_code ec;
    boost::asio::write(sock, boost::asio::buffer(std::string(10, ' ')), ec);
    pollfd p{sock.native_handle(), POLLIN | POLLRDHUP, 0};
    cut_off = ec || (::poll(&p, 1, 100) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)));
  }
  EXPECT_TRUE(cut_off) << "a body at a tenth of the minimum rate was read for 30 s";
  EXPECT_EQ(s->get("/prompt").status, 200u);
  EXPECT_EQ(s->stop(), 0);
}
// H5: a node that ignores interrupts (as some do in ComfyUI) kept SIGTERM waiting for its call
// deadline (600 s). The stop interrupts, then gives the node --stop-grace-ms before its worker
// is killed, and serve exits.
TEST_F(serve_test, sigterm_during_a_node_that_ignores_interrupts_ends_serve_after_the_grace) {
  auto s = serve({"--stop-grace-ms", "300"});
  queue(*s, {{"1", {{"class_type", "TestBusy"}, {"inputs", {{"ms", 120000}}}}}}, "c");
  wait_inside_the_running_node(*s);
  EXPECT_EQ(s->stop(std::chrono::seconds(30)), 0) << "serve waited for the node's deadline";
}

// S17: /free during a busy node had blocked the API thread until the node ended (28-48 s), and
// /history waited behind it. The busy worker is asked, not waited for.
TEST_F(serve_test, free_during_a_busy_node_answers_at_once_and_the_api_goes_on) {
  auto s = serve({"--stop-grace-ms", "300"});
  const std::string busy_env = s->get("/object_info/TestBusy").json()["TestBusy"]["orch_env"];
  queue(*s, {{"1", {{"class_type", "TestBusy"}, {"inputs", {{"ms", 120000}}}}}}, "c");
  wait_inside_the_running_node(*s);
  const auto freed = s->post("/free", {{"unload_models", true}, {"free_memory", true}});
  ASSERT_EQ(freed.status, 200u) << freed.body;
  EXPECT_EQ(freed.json()["orch_receipts"][busy_env], json({{"deferred", true}})) << freed.body;
  EXPECT_EQ(s->get("/history").status, 200u);
  EXPECT_EQ(s->post("/interrupt", json::object()).status, 200u);
  EXPECT_EQ(s->stop(), 0);
}

// S17: a prompt whose node validates in its worker (VALIDATE_INPUTS), while that worker is inside
// a long node, had held the API thread until the node ended, and every other route waited behind
// it. Its validation waits on the server's waiting thread now.
TEST_F(serve_test, a_prompt_validating_in_a_busy_worker_holds_up_no_other_route) {
  auto s = serve({"--stop-grace-ms", "300"});
  queue(*s, {{"1", {{"class_type", "TestBusy"}, {"inputs", {{"ms", 120000}}}}}}, "c");
  wait_inside_the_running_node(*s);
  // TestChecked validates in the worker that runs TestBusy.
  auto validating = std::async(std::launch::async, [&] { return s->post("/prompt", checked_prompt); });
  std::this_thread::sleep_for(500ms);  // read, parsed and handed on
  auto others = std::async(std::launch::async, [&] {
    return std::vector<unsigned>{s->get("/history").status, s->get("/queue").status,
                                 s->get("/object_info/TestChecked").status};
  });
  ASSERT_EQ(others.wait_for(30s), std::future_status::ready)
      << "the other routes waited behind a prompt validating in a busy worker";
  EXPECT_EQ(others.get(), (std::vector<unsigned>{200u, 200u, 200u}));
  EXPECT_EQ(validating.wait_for(0s), std::future_status::timeout) << "the worker was not busy";
  EXPECT_EQ(s->stop(), 0);  // the busy worker is killed after the grace, and the POST answered
  EXPECT_EQ(validating.wait_for(30s), std::future_status::ready);
}

// Issue 55, item 5: POST /api/settings printed the merged settings, indented, before comparing
// them with the file's 4 MiB cap; indentation grows with depth, so 1 MiB of arrays nested 250
// deep had been printed to some 600 MB (4 MiB: 4.2 GB and 12 s of the API thread). The text is
// never built past the cap now, and the settings already there are kept. (What remains is the
// body parsed: some 70 MB, twice that under ASan.)
TEST_F(serve_test, deeply_nested_settings_are_refused_without_being_printed_whole) {
  auto s = serve();
  ASSERT_EQ(s->post("/api/settings/Comfy.Kept", "yes").status, 200u);
  const std::string nest = std::string(250, '[') + std::string(250, ']');
  std::string body = "{\"x\": [";
  while (body.size() < (std::size_t{1} << 20)) body += nest + ",";
  body.back() = ']';
  body += '}';
  const std::uint64_t peak = rss_kib(s->pid(), "VmHWM:");
  const auto refused = s->send(http::verb::post, "/api/settings", body, "application/json");
  EXPECT_EQ(refused.status, 400u) << refused.body;
  const std::uint64_t after = rss_kib(s->pid(), "VmHWM:");
  EXPECT_LT(after, peak + 256 * 1024) << "peak KiB before " << peak << ", after " << after;
  EXPECT_EQ(s->get("/api/settings/Comfy.Kept").json(), "yes");
  EXPECT_EQ(s->stop(), 0);
}

// Issue 55, item 6: every node's event sent the state of every node started so far, so a
// 10,000-node prompt took 50 s under serve (3.2 s under run) and its client, reading as fast as
// it could, was disconnected at 1,000 nodes with 8.3 MB queued. Past 256 nodes only what each
// event changed is sent: a 2,000-node prompt's client hears it to its end, in a few MB.
TEST_F(serve_test, progress_state_grows_with_a_prompts_nodes_not_their_square) {
  auto s = serve();
  json prompt = {{"1", {{"class_type", "SolidImage"},
                        {"inputs", {{"width", 2}, {"height", 2}, {"value", 0.5}}}}}};
  for (int i = 2; i <= 2000; ++i)
    prompt[std::to_string(i)] = {{"class_type", "InvertImage"},
                                 {"inputs", {{"image", {std::to_string(i - 1), 0}}}}};
  prompt["2001"] = {{"class_type", "ImageChecksum"}, {"inputs", {{"image", {"2000", 0}}}}};
  ws_client ws(s->port(), "wide");
  ASSERT_TRUE(ws.next());  // the status greeting
  const auto id = queue(*s, prompt, "wide");
  const auto heard_messages = ws.until_prompt_end(id);
  ASSERT_FALSE(heard_messages.empty());
  const json& last = heard_messages.back();
  EXPECT_TRUE(last["type"] == "executing" && last["data"]["node"].is_null())
      << "the client was disconnected before the prompt ended";
  std::size_t bytes = 0, states = 0;
  for (const auto& m : heard_messages)
    if (m["type"] == "progress_state") {
      bytes += m.dump().size();
      ++states;
    }
  EXPECT_GE(states, 2000u);
  EXPECT_LT(bytes, std::size_t{16} << 20);
  EXPECT_EQ(s->stop(), 0);
}

// Issue 55, item 6: a client that connects while its prompt runs (a reloaded tab) hears the
// prompt's whole progress_state in its greeting, as a client that was there all along has it.
TEST_F(serve_test, a_client_that_reconnects_during_its_prompt_hears_its_progress_state) {
  auto s = serve({"--stop-grace-ms", "300"});
  queue(*s, {{"1", {{"class_type", "TestBusy"}, {"inputs", {{"ms", 120000}}}}}}, "tab");
  wait_inside_the_running_node(*s);
  ws_client ws(s->port(), "tab");
  std::optional<json> state;
  for (int i = 0; i < 4 && !state; ++i)
    if (auto m = ws.next(5s); m && (*m)["type"] == "progress_state") state = m;
  ASSERT_TRUE(state) << "no progress_state in the greeting";
  EXPECT_EQ((*state)["data"]["nodes"]["1"]["state"], "running") << state->dump();
  EXPECT_EQ(s->stop(), 0);
}

// Issue 55: a batch cancel of 200,000 ids was done one id at a time, each a pass over the pending
// queue under its lock and, for each prompt removed, a status to every client: it held the API
// thread 2 s. It is one pass now: the clients hear the queue go from 200 waiting to none in one
// status message.
TEST_F(serve_test, a_batch_cancel_is_one_pass_over_the_queue) {
  auto s = serve({"--stop-grace-ms", "300"});
  ws_client ws(s->port(), "watcher");
  queue(*s, {{"1", {{"class_type", "TestBusy"}, {"inputs", {{"ms", 120000}}}}}}, "c");
  wait_inside_the_running_node(*s);
  json ids = json::array();
  for (int i = 0; i < 200; ++i) ids.push_back(queue(*s, sleep_prompt(i + 1)));
  const auto remaining = [](const json& m) {
    return m["type"] == "status" ? m["data"]["status"]["exec_info"]["queue_remaining"].get<int>()
                                 : -1;
  };
  bool all_queued = false;
  while (auto m = ws.next(30s))
    if ((all_queued = remaining(*m) == 201)) break;
  ASSERT_TRUE(all_queued);
  for (int i = 0; ids.size() < 200000; ++i) {
    char uuid[37];
    std::snprintf(uuid, sizeof uuid, "00000000-0000-4000-8000-%012d", i);
    ids.push_back(uuid);
  }
  const auto cancelled = s->post("/api/jobs/cancel", {{"job_ids", ids}});
  ASSERT_EQ(cancelled.status, 200u) << cancelled.body;
  EXPECT_EQ(cancelled.json(), json({{"cancelled", true}}));
  std::optional<json> next;
  while ((next = ws.next(30s)) && remaining(*next) < 0) {
  }
  ASSERT_TRUE(next);
  EXPECT_EQ(remaining(*next), 1) << "the first status after the cancel: " << next->dump();
  EXPECT_TRUE(s->get("/queue").json()["queue_pending"].empty());
  EXPECT_EQ(s->stop(), 0);
}

// S13: an upload is written to an unlinked file of the temp directory as it comes, not held in
// memory. Four uploads of 60 MiB stalled 100 bytes before their end (the fourth had been refused
// by the memory budget, and the three held 180 MiB) leave the server's memory where it was; once
// they end, each is stored whole, and nothing is left in temp/.
TEST_F(serve_test, uploads_stream_to_disk_so_four_stalled_60_mib_uploads_take_no_memory) {
  auto s = serve();
  const std::uint64_t before = rss_kib(s->pid());
  std::string image(std::size_t{60} << 20, '\0');
  for (std::size_t i = 0; i < image.size(); i += 4096) image[i] = static_cast<char>(i >> 12);
  boost::asio::io_context io;
  std::vector<std::unique_ptr<tcp::socket>> uploads;
  std::vector<std::string> forms;
  for (int i = 0; i < 4; ++i) {
    forms.push_back(upload_form("big" + std::to_string(i) + ".png", image));
    auto sock = std::make_unique<tcp::socket>(io);
    sock->connect({boost::asio::ip::make_address("127.0.0.1"), s->port()});
    const std::string& form = forms.back();
    boost::asio::write(*sock, boost::asio::buffer(
                                  "POST /upload/image HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                  "Content-Type: " + form_type + "\r\nContent-Length: " +
                                  std::to_string(form.size()) + "\r\n\r\n"));
    boost::asio::write(*sock, boost::asio::buffer(form.data(), form.size() - 100));
    uploads.push_back(std::move(sock));
  }
  // Every byte written is in the server or the socket buffers (a few MiB at most).
  for (int i = 0; i < 200 && rss_kib(s->pid()) < before + 150 * 1024; ++i)
    std::this_thread::sleep_for(10ms);  // time to read what the sockets still hold
  const std::uint64_t held = rss_kib(s->pid());
  EXPECT_LT(held, before + 64 * 1024) << "KiB before " << before << ", while stalled " << held;
  for (int i = 0; i < 4; ++i) {
    const std::string& form = forms[static_cast<std::size_t>(i)];
    boost::asio::write(*uploads[static_cast<std::size_t>(i)],
                       boost::asio::buffer(form.data() + form.size() - 100, 100));
    orch::testing::beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(*uploads[static_cast<std::size_t>(i)], buffer, res);
    EXPECT_EQ(res.result_int(), 200) << res.body();
  }
  const auto input = dir_ / "input";
  for (int i = 0; i < 4; ++i) {
    const auto stored = input / ("big" + std::to_string(i) + ".png");
    ASSERT_TRUE(std::filesystem::exists(stored)) << stored;
    EXPECT_EQ(std::filesystem::file_size(stored), image.size());
  }
  for (const auto& e : std::filesystem::directory_iterator(dir_ / "temp"))
    ADD_FAILURE() << "left in temp/: " << e.path();
  uploads.clear();
  EXPECT_EQ(s->stop(), 0);
}

TEST_F(serve_test, websocket_clients_past_the_cap_are_refused) {
  auto s = serve({"--max-ws-clients", "1"});
  ws_client first(s->port(), "one");
  ASSERT_TRUE(first.next());
  EXPECT_THROW(ws_client(s->port(), "two"), boost::system::system_error);
  EXPECT_EQ(s->get("/prompt").status, 200u);
  EXPECT_EQ(s->stop(), 0);
}

// Issue 55: one address could take all 64 WebSocket slots, and the user's tab got 503. Past
// --max-ws-clients-per-peer an address's oldest client is cut to make room for its new one, so
// it never holds more, and another address gets in.
TEST_F(serve_test, one_address_cannot_take_every_websocket_slot) {
  auto s = serve({"--max-ws-clients", "8", "--max-ws-clients-per-peer", "4"});
  boost::asio::io_context io;
  std::vector<std::unique_ptr<tcp::socket>> held;
  for (int i = 0; i < 8; ++i) {
    held.push_back(connect_from(io, *s, "127.0.0.2"));
    boost::asio::write(*held.back(), boost::asio::buffer(std::string(
                                         "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                                         "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                                         "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")));
    char buf[256];
    const std::string head(buf, held.back()->read_some(boost::asio::buffer(buf)));
    EXPECT_EQ(head.rfind("HTTP/1.1 101", 0), 0u) << head;
  }
  for (std::size_t i = 0; i < 4; ++i)
    EXPECT_TRUE(closed_by_server(*held[i])) << "client " << i << " of 127.0.0.2 is still open";
  ws_client tab(s->port(), "tab");  // from 127.0.0.1
  EXPECT_TRUE(tab.next());
  held.clear();
  EXPECT_EQ(s->stop(), 0);
}

// Connections are counted against --max-connections while they last: more at once get 503, and
// a WebSocket handshake that fails (a bad key) gives its connection back like any other.
TEST_F(serve_test, connections_past_the_cap_get_503_and_failed_handshakes_give_theirs_back) {
  auto s = serve({"--max-connections", "2"});
  for (int i = 0; i < 5; ++i) {
    boost::asio::io_context io;
    orch::testing::tcp::socket sock(io);
    sock.connect({boost::asio::ip::make_address("127.0.0.1"), s->port()});
    boost::asio::write(sock, boost::asio::buffer(std::string(
                                 "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                                 "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n")));
    char buf[512];
    boost::system::error_code ec;
    sock.read_some(boost::asio::buffer(buf), ec);  // refused: no Sec-WebSocket-Key
  }
  // Each refused handshake's connection is given back once the server has closed it.
  const auto answered_within_5s = [&] {
    for (int i = 0; i < 250; ++i) {
      if (s->get("/prompt").status == 200) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  };
  EXPECT_TRUE(answered_within_5s()) << "the refused handshakes kept their connections";
  {
    ws_client a(s->port(), "a");
    ws_client b(s->port(), "b");
    ASSERT_TRUE(a.next());
    ASSERT_TRUE(b.next());
    EXPECT_EQ(s->get("/prompt").status, 503u);  // both slots are the WebSockets'
  }
  EXPECT_TRUE(answered_within_5s()) << "the closed WebSockets kept their connections";
  EXPECT_EQ(s->stop(), 0);
}

// Request bytes that are not UTF-8 reach messages the server writes (a 404's path, a greeting's
// sid): they once threw on the io thread and aborted the server.
TEST_F(serve_test, request_bytes_that_are_not_utf8_get_an_answer_not_a_crash) {
  auto s = serve();
  {
    boost::asio::io_context io;
    orch::testing::tcp::socket sock(io);
    sock.connect({boost::asio::ip::make_address("127.0.0.1"), s->port()});
    boost::asio::write(sock, boost::asio::buffer(std::string(
                                 "GET /%FF HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                                 "Connection: Upgrade\r\n\r\n")));
    char buf[512];
    boost::system::error_code ec;
    const std::size_t n = sock.read_some(boost::asio::buffer(buf), ec);
    EXPECT_NE(std::string(buf, n).find("404"), std::string::npos);
  }
  ws_client odd(s->port(), "%FF%FE");
  const auto hello = odd.next();
  ASSERT_TRUE(hello);
  EXPECT_EQ((*hello)["type"], "status");
  EXPECT_EQ(s->get("/nowhere/%FF").status, 404u);
  EXPECT_EQ(s->get("/prompt").status, 200u);
  EXPECT_EQ(s->stop(), 0);
}

// WebSocket clients still in their handshake count against the cap: six upgrades sent before
// any answer is read get two 101s and four 503s.
TEST_F(serve_test, upgrades_sent_at_once_cannot_pass_the_websocket_cap) {
  auto s = serve({"--max-ws-clients", "2"});
  boost::asio::io_context io;
  std::vector<orch::testing::tcp::socket> socks;
  for (int i = 0; i < 6; ++i) {
    socks.emplace_back(io);
    socks.back().connect({boost::asio::ip::make_address("127.0.0.1"), s->port()});
  }
  for (auto& sock : socks)
    boost::asio::write(sock, boost::asio::buffer(std::string(
                                 "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                                 "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                                 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")));
  int upgraded = 0, refused = 0;
  for (auto& sock : socks) {
    char buf[256];
    boost::system::error_code ec;
    const std::string head(buf, sock.read_some(boost::asio::buffer(buf), ec));
    if (head.rfind("HTTP/1.1 101", 0) == 0) ++upgraded;
    if (head.rfind("HTTP/1.1 503", 0) == 0) ++refused;
  }
  EXPECT_EQ(upgraded, 2);
  EXPECT_EQ(refused, 4);
  socks.clear();
  EXPECT_EQ(s->stop(), 0);
}

}  // namespace
