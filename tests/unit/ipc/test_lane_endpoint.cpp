// lane_endpoint (ipc/lane_endpoint.hpp): a call lane's two ends over a real socketpair and a real
// shared page: frames in the box and on the socket, readers asleep woken, and a peer that writes
// anything at all into the page it shares.
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "orch/ipc/errc.hpp"
#include "orch/ipc/lane_endpoint.hpp"

namespace orch::ipc {
namespace {

using namespace std::chrono_literals;
using clock_type = lane_endpoint::clock;

// A host end and a worker end of one lane, each with its own mapping of the page (as in two
// processes); `raw` is one more mapping, for the tests that play a hostile peer.
struct lane_pair {
  explicit lane_pair(std::uint32_t worker_generation = 1) {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    auto page = lane_memory::create();
    EXPECT_TRUE(page.ok());
    auto worker_page = lane_memory::attach(unique_fd(::dup(page->fd())));
    EXPECT_TRUE(worker_page.ok());
    auto raw_page = lane_memory::attach(unique_fd(::dup(page->fd())));
    EXPECT_TRUE(raw_page.ok());
    raw = std::make_unique<lane_memory>(std::move(*raw_page));
    host_socket = fds[0];
    worker_socket = fds[1];
    host = std::make_unique<lane_endpoint>(lane_socket(unique_fd(fds[0]), "host", 1),
                                           std::move(*page), lane_side::host);
    worker = std::make_unique<lane_endpoint>(
        lane_socket(unique_fd(fds[1]), "worker", worker_generation), std::move(*worker_page),
        lane_side::worker);
  }
  std::unique_ptr<lane_memory> raw;
  std::unique_ptr<lane_endpoint> host, worker;
  int host_socket = -1, worker_socket = -1;  // owned by the ends
};

frame_header header_of(message_type type, std::uint64_t id, std::uint16_t flags = 0) {
  frame_header h;
  h.type = static_cast<std::uint16_t>(type);
  h.request_id = id;
  h.flags = flags;
  return h;
}

json call_body(std::size_t padding = 0) {
  return {{"node", "1"}, {"class_type", "TestEmpty"}, {"inputs", {{"t", std::string(padding, 'x')}}}};
}

// Whether socket `fd` has bytes to read, without reading them.
bool socket_holds_bytes(int fd) {
  char byte = 0;
  return ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

// Plays a hostile worker: says its first answer is in the box, `length` bytes long.
void claim_first_answer(lane_box& answers, std::uint64_t length) {
  answers.length.store(length);
  answers.boxed.store(1, std::memory_order_release);
  answers.sent.store(1);
}

// The word `end` sleeps on: it moves when `end` is woken.
std::uint32_t wake_word(const lane_endpoint& end) {
  return end.wake_word().load();
}

TEST(lane_endpoint, a_call_and_its_answer_cross_in_the_box_without_the_socket) {
  lane_pair p;
  ASSERT_TRUE(p.host->send(header_of(message_type::call, 5), call_body(), clock_type::now() + 1s));
  EXPECT_TRUE(p.worker->waiting());
  EXPECT_FALSE(socket_holds_bytes(p.worker_socket));  // the reader was awake: no wake frame either
  auto call = p.worker->receive(clock_type::now() + 1s);
  ASSERT_TRUE(call.ok()) << call.err().message;
  EXPECT_EQ(call->header.request_id, 5u);
  EXPECT_EQ(call->body, call_body());
  EXPECT_FALSE(p.worker->waiting());
  ASSERT_TRUE(p.worker->send(header_of(message_type::call, 5, frame_flags::response),
                             {{"status", "ok"}}, clock_type::now() + 1s));
  EXPECT_FALSE(socket_holds_bytes(p.host_socket));
  auto answer = p.host->receive(clock_type::now() + 1s);
  ASSERT_TRUE(answer.ok()) << answer.err().message;
  EXPECT_EQ(answer->body, json({{"status", "ok"}}));
}

TEST(lane_endpoint, a_frame_larger_than_the_box_goes_on_the_socket_in_its_turn) {
  lane_pair p;
  for (std::uint64_t id = 1; id <= 4; ++id) {
    // Boxed, socket, boxed, socket: each taken in its turn.
    const std::size_t padding = id % 2 == 0 ? lane_box_capacity : 0;
    ASSERT_TRUE(p.host->send(header_of(message_type::call, id), call_body(padding),
                             clock_type::now() + 1s));
    auto call = p.worker->receive(clock_type::now() + 1s);
    ASSERT_TRUE(call.ok()) << call.err().message;
    EXPECT_EQ(call->header.request_id, id);
    EXPECT_EQ(call->body, call_body(padding));
  }
  EXPECT_FALSE(p.worker->waiting());
}

TEST(lane_endpoint, a_frame_larger_than_the_sockets_buffer_reaches_a_reader_asleep) {
  lane_pair p;
  // The host asleep on its answer; the worker's answer many times the socket's buffer: it is
  // written only as the host reads, so the host must be woken before it is written.
  auto answer = std::async(std::launch::async, [&] { return p.host->receive(clock_type::now() + 10s); });
  std::this_thread::sleep_for(20ms);
  const json big{{"status", "ok"}, {"text", std::string(900 * 1024, 'y')}};
  ASSERT_TRUE(p.worker->send(header_of(message_type::call, 8, frame_flags::response), big,
                             clock_type::now() + 10s));
  ASSERT_EQ(answer.wait_for(10s), std::future_status::ready);
  auto got = answer.get();
  ASSERT_TRUE(got.ok()) << got.err().message;
  EXPECT_EQ(got->body, big);
}

TEST(lane_endpoint, a_reader_asleep_is_woken_by_a_frame_in_the_box) {
  lane_pair p;
  auto answer = std::async(std::launch::async, [&] { return p.host->receive(clock_type::now() + 10s); });
  // Whether the host is asleep yet or not, the answer must reach it.
  std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(p.worker->send(header_of(message_type::call, 9, frame_flags::response),
                             {{"status", "ok"}}, clock_type::now() + 1s));
  ASSERT_EQ(answer.wait_for(10s), std::future_status::ready);
  auto got = answer.get();
  ASSERT_TRUE(got.ok()) << got.err().message;
  EXPECT_EQ(got->header.request_id, 9u);
}

TEST(lane_endpoint, a_reader_asleep_is_woken_and_an_awake_one_is_not) {
  lane_pair p;
  const std::uint32_t before = wake_word(*p.worker);
  ASSERT_TRUE(p.worker->begin_sleep());  // nothing waiting: it may sleep
  ASSERT_TRUE(p.host->send(header_of(message_type::call, 3), call_body(), clock_type::now() + 1s));
  EXPECT_NE(wake_word(*p.worker), before);  // woken; nothing on the socket
  EXPECT_FALSE(socket_holds_bytes(p.worker_socket));
  p.worker->woke();
  auto call = p.worker->receive(clock_type::now() + 1s);
  ASSERT_TRUE(call.ok()) << call.err().message;
  EXPECT_EQ(call->header.request_id, 3u);
  const std::uint32_t awake = wake_word(*p.worker);
  ASSERT_TRUE(p.host->send(header_of(message_type::call, 4), call_body(), clock_type::now() + 1s));
  EXPECT_EQ(wake_word(*p.worker), awake);
  ASSERT_TRUE(p.worker->receive(clock_type::now() + 1s).ok());
  // A frame on the socket wakes a sleeper too, once its count moved.
  ASSERT_TRUE(p.worker->begin_sleep());
  ASSERT_TRUE(p.host->send(header_of(message_type::call, 5), call_body(lane_box_capacity),
                           clock_type::now() + 1s));
  EXPECT_NE(wake_word(*p.worker), awake);
  p.worker->woke();
  EXPECT_TRUE(p.worker->waiting());
  auto big = p.worker->receive(clock_type::now() + 1s);
  ASSERT_TRUE(big.ok()) << big.err().message;
  EXPECT_EQ(big->header.request_id, 5u);
  EXPECT_FALSE(p.worker->waiting());
}

TEST(lane_endpoint, whatever_the_worker_does_to_the_page_the_hosts_wait_ends_at_its_deadline) {
  lane_pair p;
  // Its words scribbled: asleep, a wake word that keeps moving, counts that go backwards.
  lane_box& answers = p.raw->page().answers;
  std::atomic<bool> done{false};
  std::thread scribbler([&] {
    for (std::uint32_t i = 0; !done.load(); ++i) {
      answers.wake.store(i);
      answers.sent.store(0);
      answers.reader_asleep.store(i % 2);
    }
  });
  const auto got = p.host->receive(clock_type::now() + 100ms);
  done.store(true);
  scribbler.join();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.err().code, channel_errc::deadline_exceeded);
  // And sending to a worker that says it sleeps never blocks the host.
  p.raw->page().calls.reader_asleep.store(1);
  p.raw->page().calls.wake.store(0xffffffffu);
  EXPECT_TRUE(p.host->send(header_of(message_type::call, 1), call_body(), clock_type::now() + 1s));
}

TEST(lane_endpoint, a_box_whose_length_is_no_frame_is_refused) {
  lane_pair p;
  claim_first_answer(p.raw->page().answers, lane_box_capacity + 1);
  auto over = p.host->receive(clock_type::now() + 1s);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.err().code, lane_errc::bad_box);

  lane_pair q;
  claim_first_answer(q.raw->page().answers, frame_header_size - 1);
  auto under = q.host->receive(clock_type::now() + 1s);
  ASSERT_FALSE(under.ok());
  EXPECT_EQ(under.err().code, lane_errc::bad_box);
}

TEST(lane_endpoint, garbage_in_the_box_is_refused_as_the_socket_refuses_it) {
  lane_pair p;
  lane_box& answers = p.raw->page().answers;
  std::memset(answers.bytes, 0xab, 200);
  claim_first_answer(answers, 200);
  auto got = p.host->receive(clock_type::now() + 1s);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.err().code, frame_errc::bad_magic);
}

TEST(lane_endpoint, a_box_whose_header_claims_another_length_is_refused) {
  lane_pair p;
  // A real answer, then its length cut short by the peer.
  ASSERT_TRUE(p.worker->send(header_of(message_type::call, 1, frame_flags::response),
                             {{"status", "ok"}}, clock_type::now() + 1s));
  lane_box& answers = p.raw->page().answers;
  answers.length.store(answers.length.load() - 1);
  auto got = p.host->receive(clock_type::now() + 1s);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.err().code, lane_errc::bad_box);
}

TEST(lane_endpoint, a_frame_of_another_generation_in_the_box_is_refused) {
  lane_pair p(/*worker_generation=*/2);
  ASSERT_TRUE(p.worker->send(header_of(message_type::call, 1, frame_flags::response),
                             {{"status", "ok"}}, clock_type::now() + 1s));
  auto got = p.host->receive(clock_type::now() + 1s);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.err().code, lane_errc::wrong_generation);
}

TEST(lane_endpoint, a_count_that_lies_costs_the_reader_its_deadline_never_a_frame) {
  lane_pair p;
  // Counted, but neither in the box nor on the socket.
  p.raw->page().answers.sent.store(1000);
  auto got = p.host->receive(clock_type::now() + 50ms);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.err().code, channel_errc::deadline_exceeded);
}

TEST(lane_endpoint, shutting_the_lane_wakes_a_reader_asleep) {
  lane_pair p;
  // No deadline: only the shut ends this wait.
  auto answer = std::async(std::launch::async, [&] { return p.host->receive(std::nullopt); });
  std::this_thread::sleep_for(20ms);
  p.host->shut_down();
  ASSERT_EQ(answer.wait_for(10s), std::future_status::ready);
  auto got = answer.get();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.err().code, channel_errc::peer_lost);
}

TEST(lane_endpoint, a_page_of_another_layout_is_refused_at_attach) {
  auto page = lane_memory::create();
  ASSERT_TRUE(page.ok());
  page->page().version = lane_page_version + 1;
  auto other = lane_memory::attach(unique_fd(::dup(page->fd())));
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.err().code, shm_errc::bad_segment);
}

}  // namespace
}  // namespace orch::ipc
