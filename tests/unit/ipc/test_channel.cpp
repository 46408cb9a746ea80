// The framed channel in one process (two ends of a socketpair on one io_context). The same
// behaviours across real processes, with SIGKILL, are in tests/integration/ipc and tests/fault/ipc.
#include <gtest/gtest.h>

#include <sys/socket.h>

#include <map>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "leak_check.hpp"
#include "orch/ipc/channel.hpp"

namespace orch::ipc {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using socket_type = channel::socket_type;

channel_options named(const char* name) {
  channel_options o;
  o.name = name;
  return o;
}

class channel_test : public testing::leak_checked_test {
 public:
  void SetUp() override {
    testing::leak_checked_test::SetUp();
    io = std::make_unique<asio::io_context>();
    a = std::make_unique<socket_type>(*io);
    b = std::make_unique<socket_type>(*io);
    asio::local::connect_pair(*a, *b);
  }
  void TearDown() override {
    a.reset();
    b.reset();
    io.reset();
    testing::leak_checked_test::TearDown();
  }
  template <typename Pred>
  bool run_until(Pred pred, std::chrono::milliseconds limit = 5s) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!pred() && std::chrono::steady_clock::now() < end) {
      io->restart();
      io->run_for(5ms);
    }
    return pred();
  }
  std::shared_ptr<channel> make(std::unique_ptr<socket_type>& s, channel_options o = {}) {
    return channel::create(std::move(*s), std::move(o));
  }
  // A peer that answers ping and ignores everything else.
  std::shared_ptr<channel> echo_peer() {
    auto peer = make(b, named("peer"));
    std::weak_ptr<channel> weak = peer;
    peer->start([weak](message m) {
      auto self = weak.lock();
      if (self && m.header.type == static_cast<std::uint16_t>(message_type::ping)) {
        self->respond(m.header, json{{"echo", m.header.request_id}});
      }
    });
    return peer;
  }

  std::unique_ptr<asio::io_context> io;
  std::unique_ptr<socket_type> a, b;
};

TEST_F(channel_test, response_is_matched_to_its_request_by_id) {
  auto peer = echo_peer();
  auto host = make(a, named("host"));
  host->start([](message) {});
  std::vector<std::uint64_t> echoed;
  for (int i = 0; i < 3; ++i) {
    host->request(message_type::ping, json::object(), 5s, [&](result<message> r) {
      ASSERT_TRUE(r.ok()) << r.err().message;
      echoed.push_back(r->body["echo"].get<std::uint64_t>());
      EXPECT_EQ(r->header.request_id, echoed.back());
    });
  }
  ASSERT_TRUE(run_until([&] { return echoed.size() == 3; }));
  EXPECT_EQ(echoed, (std::vector<std::uint64_t>{1, 2, 3}));
  host->close("done");
  peer->close("done");
  run_until([] { return false; }, 20ms);
}

TEST_F(channel_test, unanswered_request_fails_at_its_deadline) {
  auto peer = echo_peer();
  auto host = make(a);
  host->start([](message) {});
  std::optional<error> failure;
  host->request(message_type::evict, json{{"bytes", 1}}, 50ms, [&](result<message> r) {
    ASSERT_FALSE(r.ok());
    failure = r.err();
  });
  ASSERT_TRUE(run_until([&] { return failure.has_value(); }));
  EXPECT_EQ(failure->code, "deadline_exceeded");
  host->close("done");
  peer->close("done");
  run_until([] { return false; }, 20ms);
}

// The channel arms one timer for the earliest pending deadline. A later request with an earlier
// deadline must pull that timer in; otherwise it would only fail when the first one expires.
TEST_F(channel_test, earlier_deadline_of_a_later_request_fires_before_the_pending_later_one) {
  // Generous against a loaded CI machine, far below the 60 s the timer would otherwise wait.
  constexpr auto prompt_failure_bound = 2s;
  auto peer = echo_peer();
  auto host = make(a);
  host->start([](message) {});
  std::optional<std::string> slow, fast;
  host->request(message_type::evict, json{{"bytes", 1}}, 60s,
                [&](result<message> r) { slow = r.ok() ? "ok" : r.err().code; });
  run_until([] { return false; }, 20ms);  // the 60 s wake-up is armed first
  const auto sent_at = std::chrono::steady_clock::now();
  host->request(message_type::evict, json{{"bytes", 1}}, 50ms,
                [&](result<message> r) { fast = r.ok() ? "ok" : r.err().code; });
  ASSERT_TRUE(run_until([&] { return fast.has_value(); }, prompt_failure_bound));
  EXPECT_LT(std::chrono::steady_clock::now() - sent_at, prompt_failure_bound);
  EXPECT_EQ(*fast, "deadline_exceeded");
  EXPECT_FALSE(slow.has_value());

  host->close("done");
  ASSERT_TRUE(run_until([&] { return slow.has_value(); }));
  EXPECT_EQ(*slow, "peer_lost");
  peer->close("done");
  run_until([] { return false; }, 20ms);
}

TEST_F(channel_test, closing_peer_fails_every_pending_request_with_peer_lost) {
  auto peer = echo_peer();
  auto host = make(a);
  std::optional<error> closed;
  host->start([](message) {}, [&](const error& e) { closed = e; });
  std::vector<std::string> codes;
  for (int i = 0; i < 3; ++i) {
    host->request(message_type::evict, json{{"bytes", 1}}, 60s,
                  [&](result<message> r) { codes.push_back(r.ok() ? "ok" : r.err().code); });
  }
  run_until([] { return false; }, 20ms);
  peer->close("going away");
  ASSERT_TRUE(run_until([&] { return codes.size() == 3 && closed.has_value(); }));
  EXPECT_EQ(codes, (std::vector<std::string>{"peer_lost", "peer_lost", "peer_lost"}));
  EXPECT_EQ(closed->code, "peer_lost");
}

TEST_F(channel_test, error_response_carries_the_peer_code) {
  auto peer = make(b);
  std::weak_ptr<channel> weak = peer;
  peer->start([weak](message m) {
    weak.lock()->respond_error(m.header, {"stale_generation", "old"});
  });
  auto host = make(a);
  host->start([](message) {});
  std::optional<error> failure;
  host->request(message_type::ping, json::object(), 5s,
                [&](result<message> r) { failure = r.err(); });
  ASSERT_TRUE(run_until([&] { return failure.has_value(); }));
  EXPECT_EQ(failure->code, "stale_generation");
  host->close("done");
  peer->close("done");
  run_until([] { return false; }, 20ms);
}

// Writes raw header bytes to the channel and returns the close reason it reports.
std::string close_reason_for(channel_test& t, std::unique_ptr<socket_type>& raw,
                             std::shared_ptr<channel> target, const header_bytes& bytes) {
  std::optional<error> closed;
  target->start([](message) {}, [&](const error& e) { closed = e; });
  asio::write(*raw, asio::buffer(bytes));
  if (!t.run_until([&] { return closed.has_value(); })) return "not closed";
  // The channel closed its end: the raw side now reads end-of-stream.
  boost::system::error_code ec;
  std::array<char, 1> one{};
  raw->read_some(asio::buffer(one), ec);
  EXPECT_EQ(ec, asio::error::eof);
  return closed->code;
}

TEST_F(channel_test, bad_magic_closes_the_connection_with_its_reason) {
  frame_header h;
  auto bytes = encode_header(h);
  bytes[1] = std::byte{0};
  EXPECT_EQ(close_reason_for(*this, a, make(b), bytes), "bad_magic");
}

TEST_F(channel_test, bad_version_closes_the_connection) {
  frame_header h;
  h.version = 7;
  EXPECT_EQ(close_reason_for(*this, a, make(b), encode_header(h)), "bad_version");
}

TEST_F(channel_test, oversize_length_closes_before_reading_the_body) {
  frame_header h;
  h.type = static_cast<std::uint16_t>(message_type::ping);
  h.body_length = 4096;
  channel_options o;
  o.max_body = 1024;
  EXPECT_EQ(close_reason_for(*this, a, make(b, o), encode_header(h)), "oversize");
}

TEST_F(channel_test, unknown_type_is_dropped_and_the_connection_stays_up) {
  auto peer = echo_peer();
  frame_header h;
  h.type = 999;
  asio::write(*a, asio::buffer(encode_header(h)));
  // Then a well-formed ping on the same raw socket gets its answer.
  h.type = static_cast<std::uint16_t>(message_type::ping);
  h.request_id = 5;
  asio::write(*a, asio::buffer(encode_header(h)));
  std::array<std::byte, frame_header_size> reply{};
  bool answered = false;
  asio::async_read(*a, asio::buffer(reply), [&](auto ec, std::size_t) { answered = !ec; });
  ASSERT_TRUE(run_until([&] { return answered; }));
  auto decoded = decode_header(reply);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->request_id, 5u);
  EXPECT_NE(decoded->flags & frame_flags::response, 0);
  peer->close("done");
  run_until([] { return false; }, 20ms);
}

TEST_F(channel_test, frames_of_another_generation_are_dropped) {
  channel_options stale;
  stale.generation = 1;
  auto old_worker = make(a, stale);
  old_worker->start([](message) {});
  channel_options fenced;
  fenced.accept_generation = 2;
  auto host = make(b, fenced);
  int seen = 0;
  host->start([&](message) { ++seen; });
  old_worker->notify(message_type::prompt_start, json{{"epoch", 1}});
  run_until([] { return false; }, 100ms);
  EXPECT_EQ(seen, 0);
  host->close("done");
  old_worker->close("done");
  run_until([] { return false; }, 20ms);
}

TEST_F(channel_test, body_over_the_cap_is_refused_on_both_ends_without_closing) {
  channel_options small;
  small.max_body = 64;
  auto peer = make(b, small);
  std::weak_ptr<channel> weak = peer;
  // The peer answers a ping with a body over its own cap: the requester gets an error instead.
  peer->start([weak](message m) {
    weak.lock()->respond(m.header, json{{"padding", std::string(100, 'x')}});
  });
  auto host = make(a, small);
  host->start([](message) {});
  std::vector<std::string> codes;
  host->request(message_type::evict, json{{"bytes", 1}, {"padding", std::string(100, 'x')}}, 5s,
                [&](result<message> r) { codes.push_back(r.ok() ? "ok" : r.err().code); });
  host->request(message_type::ping, json::object(), 5s,
                [&](result<message> r) { codes.push_back(r.ok() ? "ok" : r.err().code); });
  ASSERT_TRUE(run_until([&] { return codes.size() == 2; }));
  EXPECT_EQ(codes, (std::vector<std::string>{"body_too_large", "body_too_large"}));
  host->close("done");
  peer->close("done");
  run_until([] { return false; }, 20ms);
}

TEST_F(channel_test, frames_sent_from_many_threads_arrive_whole_and_in_each_threads_order) {
  // A frame is written on the calling thread when nothing is queued, and queued behind the write
  // in flight otherwise; every 16th body is larger than the socket's buffer, so both paths and
  // partial writes interleave across the threads.
  auto host = make(a, named("host"));
  host->start([](message) {});
  std::map<int, std::vector<int>> seen;  // thread -> the seq numbers, in arrival order
  int received = 0;
  auto peer = make(b, named("peer"));
  peer->start([&](message m) {
    seen[m.body["thread"].get<int>()].push_back(m.body["seq"].get<int>());
    EXPECT_EQ(m.body["pad"].get<std::string>().size(), m.body["seq"].get<int>() % 16 == 0
                                                           ? std::size_t{300000}
                                                           : std::size_t{8});
    ++received;
  });
  constexpr int threads = 4, each = 64;
  std::vector<std::thread> senders;
  for (int t = 0; t < threads; ++t)
    senders.emplace_back([&host, t] {
      for (int i = 0; i < each; ++i)
        host->notify(message_type::progress,
                     json{{"node", "1"}, {"value", 0}, {"max", 1}, {"thread", t}, {"seq", i},
                          {"pad", std::string(i % 16 == 0 ? 300000 : 8, 'x')}});
    });
  const bool all = run_until([&] { return received == threads * each; }, 20s);
  for (auto& s : senders) s.join();
  ASSERT_TRUE(all) << received << " of " << threads * each;
  for (int t = 0; t < threads; ++t) {
    std::vector<int> expected(each);
    for (int i = 0; i < each; ++i) expected[i] = i;
    EXPECT_EQ(seen[t], expected) << "thread " << t;
  }
  host->close("done");
  peer->close("done");
  run_until([] { return false; }, 20ms);
}

TEST_F(channel_test, full_outgoing_queue_refuses_the_request) {
  // The peer never reads: the first large frame cannot finish, so the queue behind it fills.
  channel_options o;
  o.max_queue = 1;
  auto host = make(a, o);
  host->start([](message) {});
  std::vector<std::string> codes;
  const json big{{"token", std::string(600000, 'x')}, {"pid", 1}, {"protocol", 1}};
  for (int i = 0; i < 3; ++i) {
    host->request(message_type::hello, big, 60s,
                  [&](result<message> r) { codes.push_back(r.ok() ? "ok" : r.err().code); });
  }
  ASSERT_TRUE(run_until([&] { return !codes.empty(); }));
  EXPECT_EQ(codes.front(), "queue_full");
  host->close("done");
  ASSERT_TRUE(run_until([&] { return codes.size() == 3; }));
}

}  // namespace
}  // namespace orch::ipc
