// lane_socket (ipc/lane_socket.hpp): a call lane's frames, checked as the channel checks them,
// with deadlines, over a real socketpair.
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "orch/ipc/errc.hpp"
#include "orch/ipc/lane_socket.hpp"

namespace orch::ipc {
namespace {

using namespace std::chrono_literals;
using clock_type = lane_socket::clock;

struct lane_ends {
  lane_ends() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    a = unique_fd(fds[0]);
    b = unique_fd(fds[1]);
  }
  unique_fd a, b;
};

frame_header lane_call_header(std::uint64_t id) {
  frame_header h;
  h.type = static_cast<std::uint16_t>(message_type::call);
  h.request_id = id;
  return h;
}

const json lane_call_body{{"node", "1"}, {"class_type", "TestEmpty"}, {"inputs", json::object()}};

TEST(lane_socket, a_frame_crosses_whole_with_its_id_and_generation) {
  lane_ends p;
  lane_socket host(std::move(p.a), "host", 3), worker(std::move(p.b), "worker", 3);
  ASSERT_TRUE(host.send(lane_call_header(41), lane_call_body, clock_type::now() + 1s).ok());
  auto got = worker.receive(clock_type::now() + 1s);
  ASSERT_TRUE(got.ok()) << got.err().message;
  EXPECT_EQ(got->header.request_id, 41u);
  EXPECT_EQ(got->header.generation, 3u);
  EXPECT_EQ(got->body, lane_call_body);
}

TEST(lane_socket, frames_sent_back_to_back_are_read_one_at_a_time) {
  lane_ends p;
  lane_socket host(std::move(p.a), "host", 1), worker(std::move(p.b), "worker", 1);
  for (std::uint64_t id = 1; id <= 3; ++id)
    ASSERT_TRUE(host.send(lane_call_header(id), lane_call_body, clock_type::now() + 1s).ok());
  for (std::uint64_t id = 1; id <= 3; ++id) {
    auto got = worker.receive(clock_type::now() + 1s);
    ASSERT_TRUE(got.ok()) << got.err().message;
    EXPECT_EQ(got->header.request_id, id);
  }
}

TEST(lane_socket, a_frame_of_another_generation_is_refused) {
  lane_ends p;
  lane_socket old_host(std::move(p.a), "host", 1), worker(std::move(p.b), "worker", 2);
  ASSERT_TRUE(old_host.send(lane_call_header(1), lane_call_body, clock_type::now() + 1s).ok());
  auto got = worker.receive(clock_type::now() + 1s);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.err().code, lane_errc::wrong_generation);
}

TEST(lane_socket, a_header_over_the_cap_is_refused_before_any_body_is_read) {
  lane_ends p;
  lane_socket worker(std::move(p.b), "worker", 0, /*max_body=*/1024);
  frame_header h = lane_call_header(1);
  h.body_length = 1u << 30;  // a lie: nothing follows, and no buffer may grow for it
  const auto head = encode_header(h);
  ASSERT_EQ(::write(p.a.get(), head.data(), head.size()), static_cast<ssize_t>(head.size()));
  auto got = worker.receive(clock_type::now() + 1s);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.err().code, frame_errc::oversize);
}

TEST(lane_socket, garbage_is_refused_as_a_frame) {
  lane_ends p;
  lane_socket worker(std::move(p.b), "worker", 0);
  const char junk[64] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::write(p.a.get(), junk, sizeof junk), static_cast<ssize_t>(sizeof junk));
  auto got = worker.receive(clock_type::now() + 1s);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.err().code, frame_errc::bad_magic);
}

TEST(lane_socket, a_peer_gone_mid_frame_is_peer_lost) {
  lane_ends p;
  lane_socket worker(std::move(p.b), "worker", 0);
  const auto head = encode_header(lane_call_header(1));
  ASSERT_EQ(::write(p.a.get(), head.data(), 10), 10);
  p.a.reset();
  auto got = worker.receive(clock_type::now() + 1s);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.err().code, channel_errc::peer_lost);
  EXPECT_NE(got.err().message.find("mid-frame"), std::string::npos) << got.err().message;
}

TEST(lane_socket, a_frame_that_never_comes_passes_its_deadline) {
  lane_ends p;
  lane_socket worker(std::move(p.b), "worker", 0);
  auto got = worker.receive(clock_type::now() + 50ms);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.err().code, channel_errc::deadline_exceeded);
}

TEST(lane_socket, shutting_it_down_wakes_a_reader_blocked_on_it) {
  lane_ends p;
  lane_socket host(std::move(p.a), "host", 0);
  auto reader = std::async(std::launch::async, [&] { return host.receive(std::nullopt); });
  // The reader may or may not be inside poll() yet: either way it must see the end.
  host.shut_down();
  ASSERT_EQ(reader.wait_for(10s), std::future_status::ready);
  const auto got = reader.get();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.err().code, channel_errc::peer_lost);
}

TEST(lane_socket, a_body_over_the_cap_is_not_sent) {
  lane_ends p;
  lane_socket host(std::move(p.a), "host", 0, /*max_body=*/64);
  const json big{{"inputs", std::string(200, 'x')}};
  const auto st = host.send(lane_call_header(1), big, clock_type::now() + 1s);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.err().code, channel_errc::body_too_large);
  lane_socket worker(std::move(p.b), "worker", 0);
  EXPECT_FALSE(worker.readable());
}

TEST(lane_socket, a_peer_that_stops_reading_makes_a_send_pass_its_deadline) {
  lane_ends p;
  lane_socket host(std::move(p.a), "host", 0);
  const json body{{"inputs", std::string(512 * 1024, 'x')}};
  status st = ok_status();
  for (int i = 0; i < 64 && st.ok(); ++i) st = host.send(lane_call_header(1), body, clock_type::now() + 50ms);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.err().code, channel_errc::deadline_exceeded);
}

}  // namespace
}  // namespace orch::ipc
