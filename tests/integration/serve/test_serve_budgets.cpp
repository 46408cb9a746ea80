// `comfy-orch serve` against slow senders and slow readers (issue 55, items 3 and 4;
// docs/security.md): request bodies are charged to their budget as they arrive, not as they are
// announced, a slow holder makes room for a faster one, small requests are never refused for want
// of budget, and answers are budgeted, streamed and read at a minimum rate like bodies.
#include <gtest/gtest.h>

#include <sys/socket.h>

#include <future>

#include "serve_fixture.hpp"

namespace {

using namespace orch::serve_testing;

// A connection from `address` that sends a header announcing `length` bytes of body, then
// `sent` of them, and stalls.
std::unique_ptr<tcp::socket> stall_body(boost::asio::io_context& io, const serve_process& s,
                                        const std::string& path, std::size_t length,
                                        std::size_t sent, const std::string& content_type,
                                        const std::string& address = "127.0.0.1") {
  auto sock = connect_from(io, s, address);
  boost::asio::write(*sock, boost::asio::buffer("POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                                "Content-Type: " + content_type +
                                                "\r\nContent-Length: " + std::to_string(length) +
                                                "\r\n\r\n" + std::string(sent, '-')));
  return sock;
}

// Issue 55, item 3: a body's announced length was reserved from the budget as its header
// arrived, so bodies announced and never sent (24 of 8 MiB trickling at 1.1 KB/s) held the whole
// budget for hours, and every request with a body got 503, /interrupt and a queue clear
// included. Two bodies announcing the whole budget and sending one byte hold nothing now.
TEST_F(serve_test, bodies_announced_but_not_sent_hold_no_budget) {
  auto s = serve({"--max-body", "1048576", "--max-bodies-in-flight", "2097152"});
  boost::asio::io_context io;
  std::vector<std::unique_ptr<tcp::socket>> stalled;
  for (int i = 0; i < 2; ++i)
    stalled.push_back(stall_body(io, *s, "/prompt", 1048576, 1, "application/json"));
  std::this_thread::sleep_for(200ms);  // their headers read
  EXPECT_EQ(s->post("/interrupt", json::object()).status, 200u);
  EXPECT_EQ(s->post("/queue", {{"clear", true}}).status, 200u);
  EXPECT_EQ(s->post("/history", {{"clear", true}}).status, 200u);
  EXPECT_EQ(s->post("/prompt", {{"prompt", quick_prompt}}).status, 200u);
  // A body past the free 64 KiB of each: still less than the budget holds.
  json padded = {{"prompt", quick_prompt}, {"extra_data", {{"pad", std::string(300000, 'p')}}}};
  const auto large = s->post("/prompt", padded);
  EXPECT_EQ(large.status, 200u) << large.body;
  EXPECT_EQ(s->stop(), 0);
}

// Issue 55, item 3: with the budget held by bodies that stopped coming (each from a peer of its
// own, at its share), a body sent at once makes room by closing the slowest of them, instead of
// getting 503; the same for uploads and their budget on disk.
void expect_a_slow_sender_to_make_room(const serve_process& s, const std::string& path,
                                       const std::string& content_type,
                                       const std::string& body) {
  boost::asio::io_context io;
  std::vector<std::unique_ptr<tcp::socket>> stalled;
  // 1 MiB less a byte each, charged 960 KiB past the free 64 KiB: 128 KiB of the 2 MiB is left.
  for (const char* peer : {"127.0.0.2", "127.0.0.3"})
    stalled.push_back(stall_body(io, s, path, 1048576, 1048575, content_type, peer));
  // They came at once and stopped: in 3 s their rate falls to about 340 KB/s, far below a body
  // written at once.
  std::this_thread::sleep_for(3s);
  const auto fast = s.send(http::verb::post, path, body, content_type);
  EXPECT_NE(fast.status, 503u) << path << ": " << fast.body;
  EXPECT_EQ(fast.status, 200u) << path << ": " << fast.body;
  const bool one_closed = closed_by_server(*stalled[0]) || closed_by_server(*stalled[1]);
  EXPECT_TRUE(one_closed) << path << ": no stalled body made room";
  EXPECT_EQ(s.get("/prompt").status, 200u);
}

TEST_F(serve_test, a_slow_sender_makes_room_for_a_faster_body_in_memory_and_on_disk) {
  auto s = serve({"--max-body", "1048576", "--max-bodies-in-flight", "2097152", "--max-upload",
                  "1048576", "--max-uploads-in-flight", "2097152"});
  json padded = {{"prompt", quick_prompt}, {"extra_data", {{"pad", std::string(200000, 'p')}}}};
  expect_a_slow_sender_to_make_room(*s, "/prompt", "application/json", padded.dump());
  expect_a_slow_sender_to_make_room(*s, "/upload/image", form_type,
                                    upload_form("fast.png", std::string(200000, 'i')));
  EXPECT_EQ(s->stop(), 0);
}

// Fills the history with `count` prompts of about `pad` bytes each, and waits for them to end.
void fill_history(const serve_process& s, int count, std::size_t pad) {
  std::string last;
  for (int i = 0; i < count; ++i) {
    json body = {{"prompt", quick_prompt},
                 {"extra_data", {{"pad", std::string(pad, static_cast<char>('a' + i % 26))}}}};
    const auto r = s.post("/prompt", body);
    ASSERT_EQ(r.status, 200u) << r.body;
    last = r.json()["prompt_id"];
  }
  for (int i = 0; i < 3000 && s.get("/history/" + last).json().empty(); ++i)
    std::this_thread::sleep_for(10ms);
  ASSERT_EQ(s.get("/queue").json()["queue_pending"].size(), 0u);
}

// A connection that asks for `target` with a receive buffer of 4 KiB, and reads nothing.
std::unique_ptr<tcp::socket> ask_and_never_read(boost::asio::io_context& io,
                                                const serve_process& s, const std::string& target,
                                                const std::string& address = "127.0.0.1") {
  auto sock = std::make_unique<tcp::socket>(io);
  sock->open(tcp::v4());
  sock->set_option(boost::asio::socket_base::receive_buffer_size(4096));
  sock->bind({boost::asio::ip::make_address(address), 0});
  sock->connect({boost::asio::ip::make_address("127.0.0.1"), s.port()});
  boost::asio::write(*sock, boost::asio::buffer("GET " + target +
                                                " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  return sock;
}

// 8 clients that ask for `target` and never read: the server's memory stays within 32 MiB of
// where it was. They stay open until the caller drops them.
std::vector<std::unique_ptr<tcp::socket>> expect_non_readers_to_take_no_memory(
    boost::asio::io_context& io, const serve_process& s, const std::string& target) {
  const std::uint64_t before = rss_kib(s.pid());
  std::vector<std::unique_ptr<tcp::socket>> readers;
  for (int i = 0; i < 8; ++i) readers.push_back(ask_and_never_read(io, s, target));
  std::this_thread::sleep_for(1s);  // each has had its chance to take memory
  const std::uint64_t held = rss_kib(s.pid());
  EXPECT_LT(held, before + 32 * 1024) << target << ": KiB before " << before << ", while unread "
                                      << held;
  return readers;
}

// Issue 55, item 4: 8 clients that never read GET /history (125 MB) had taken the server from
// 180 MB to 1.11 GB and held the API thread 5.2 s while their answers were built. The history is
// streamed now, each answer a piece at a time as its client reads: 8 non-readers of a 24 MB
// history leave the server's memory where it was, and a client that reads gets the whole.
TEST_F(serve_test, clients_that_never_read_a_large_history_take_no_memory) {
  auto s = serve({"--max-history-bytes", "134217728"});
  fill_history(*s, 12, std::size_t{2} << 20);
  boost::asio::io_context io;
  const auto readers = expect_non_readers_to_take_no_memory(io, *s, "/history");
  EXPECT_EQ(s->get("/queue").status, 200u);
  const auto whole = s->get("/history");
  ASSERT_EQ(whole.status, 200u);
  EXPECT_EQ(whole.json().size(), 12u);
  EXPECT_EQ(s->get("/history?max_items=2").json().size(), 2u);
  EXPECT_EQ(s->stop(), 0);
}

// Issue 55, item 4: GET /queue is streamed too, from each queued prompt's text written when it
// was queued: 8 clients that never read a queue of 24 MB leave the server's memory where it was
// (each had built the whole answer, twice its size at its peak), and a client that reads gets it.
TEST_F(serve_test, clients_that_never_read_a_large_queue_take_no_memory) {
  auto s = serve({"--stop-grace-ms", "300"});
  queue(*s, {{"1", {{"class_type", "TestBusy"}, {"inputs", {{"ms", 120000}}}}}}, "c");
  wait_inside_the_running_node(*s);
  for (int i = 0; i < 4; ++i) {
    json body = {{"prompt", quick_prompt},
                 {"extra_data", {{"pad", std::string(std::size_t{6} << 20, 'q')}}}};
    ASSERT_EQ(s->post("/prompt", body).status, 200u);
  }
  boost::asio::io_context io;
  const auto readers = expect_non_readers_to_take_no_memory(io, *s, "/queue");
  const auto whole = s->get("/queue");
  ASSERT_EQ(whole.status, 200u);
  EXPECT_EQ(whole.json()["queue_running"].size(), 1u);
  EXPECT_EQ(whole.json()["queue_pending"].size(), 4u);
  EXPECT_EQ(s->stop(), 0);
}

// Issue 55, item 4: 64 downloads from one address that were never read held every slot of that
// address for idle_timeout (60 s), renewable, and its other requests got 503. A connection whose
// answer waits for its client to read may be closed to make room, as a slow sender's.
TEST_F(serve_test, answers_never_read_do_not_keep_their_peer_out) {
  auto s = serve({"--max-connections-per-peer", "8"});
  fill_history(*s, 4, std::size_t{4} << 20);
  boost::asio::io_context io;
  std::vector<std::unique_ptr<tcp::socket>> readers;
  for (int i = 0; i < 8; ++i) readers.push_back(ask_and_never_read(io, *s, "/history"));
  std::this_thread::sleep_for(500ms);  // every answer begun, and waiting for its client
  for (int i = 0; i < 4; ++i) EXPECT_EQ(s->get("/prompt").status, 200u) << "request " << i;
  // The longest-waiting reader was closed: reading it now ends before its 16 MB answer does.
  const timeval limit{10, 0};
  ::setsockopt(readers[0]->native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  std::vector<char> buffer(1 << 16);
  std::size_t read = 0;
  boost::system::error_code ec;
  while (!ec) read += readers[0]->read_some(boost::asio::buffer(buffer), ec);
  EXPECT_TRUE(ec == boost::asio::error::eof || ec == boost::asio::error::connection_reset)
      << ec.message();
  EXPECT_LT(read, std::size_t{16} << 20);
  readers.clear();
  EXPECT_EQ(s->stop(), 0);
}

// Issue 55, item 4: a client may read an answer slowly, but not below --min-answer-rate on
// average once it has had --header-timeout-ms: one reading 2 KB a second against a floor of
// 1 MB/s is cut off long before its 12 MB answer ends (the sockets' buffers take a few MB).
TEST_F(serve_test, a_reader_below_the_minimum_rate_is_cut_off) {
  auto s = serve({"--header-timeout-ms", "1000", "--min-answer-rate", "1048576"});
  fill_history(*s, 2, std::size_t{6} << 20);
  boost::asio::io_context io;
  auto sock = ask_and_never_read(io, *s, "/history");
  // 8 s at 2 KB/s: past the floor's allowance for what the sockets' buffers took at once.
  std::vector<char> buffer(1 << 16);
  for (int i = 0; i < 80; ++i) {
    std::this_thread::sleep_for(100ms);
    pollfd p{sock->native_handle(), POLLIN, 0};
    boost::system::error_code ec;
    if (::poll(&p, 1, 0) == 1) sock->read_some(boost::asio::buffer(buffer.data(), 200), ec);
  }
  // Then as fast as it can: the answer ends short, the server having closed it.
  std::size_t read = 0;
  const timeval limit{10, 0};
  ::setsockopt(sock->native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  boost::system::error_code ec;
  while (!ec) read += sock->read_some(boost::asio::buffer(buffer), ec);
  EXPECT_TRUE(ec == boost::asio::error::eof || ec == boost::asio::error::connection_reset)
      << ec.message();
  EXPECT_LT(read, std::size_t{12} << 20) << "a reader at 2 KB/s was served its whole answer";
  EXPECT_EQ(s->get("/prompt").status, 200u);
  EXPECT_EQ(s->stop(), 0);
}

}  // namespace
