// node_requests (worker/src/node_requests.hpp): the node thread's requests from the io thread's
// queue and the call lane, with the host's end of the lane and its doorbell played by the test.
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <future>

#include <gtest/gtest.h>

#include "node_requests.hpp"
#include "orch/ipc/errc.hpp"

namespace orch::worker {
namespace {

using namespace std::chrono_literals;
using ipc::json;

struct lane_rig {
  lane_rig() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    host = std::make_unique<ipc::lane_socket>(ipc::unique_fd(fds[0]), "host", 1);
    EXPECT_TRUE(requests.open(ipc::unique_fd(fds[1]), 1).ok());
    requests.serve_lane(doorbell, answers);
  }
  void write_call(std::uint64_t id) {
    ipc::frame_header h;
    h.type = static_cast<std::uint16_t>(ipc::message_type::call);
    h.request_id = id;
    const json body{{"node", "1"}, {"class_type", "TestEmpty"}, {"inputs", json::object()}};
    ASSERT_TRUE(host->send(h, body, ipc::lane_socket::clock::now() + 5s).ok());
  }
  node_requests requests{"test"};
  std::unique_ptr<ipc::lane_socket> host;
  std::atomic<std::uint64_t> doorbell{0};
  std::atomic<std::uint64_t> answers{0};
};

TEST(node_requests, a_call_on_the_lane_is_taken_whether_its_ring_comes_first_or_last) {
  lane_rig rig;
  rig.write_call(1);
  rig.doorbell.fetch_add(1);
  auto first = rig.requests.next();
  ASSERT_TRUE(first.has_value());
  EXPECT_TRUE(first->on_lane);
  EXPECT_EQ(first->header.request_id, 1u);
  // The ring after the worker read its call (the host's thread was preempted between the two).
  rig.write_call(2);
  auto second = std::async(std::launch::async, [&] { return rig.requests.next(); });
  ASSERT_EQ(second.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(second.get()->header.request_id, 2u);
  // The worker read more calls than were rung: no call waits, so the node thread sleeps where
  // the io thread can wake it, rather than on the lane for 30 s waiting for a frame that was
  // never written. (Whether it is asleep yet or not, stopping must end its wait.)
  auto third = std::async(std::launch::async, [&] { return rig.requests.next(); });
  rig.requests.stop();
  ASSERT_EQ(third.wait_for(10s), std::future_status::ready);
  EXPECT_FALSE(third.get().has_value());
}

TEST(node_requests, stopping_wakes_a_node_thread_asleep_and_says_whether_it_was_busy) {
  lane_rig rig;
  auto waiting = std::async(std::launch::async, [&] { return rig.requests.next(); });
  EXPECT_FALSE(rig.requests.stop());
  ASSERT_EQ(waiting.wait_for(10s), std::future_status::ready);
  EXPECT_FALSE(waiting.get().has_value());
}

TEST(node_requests, a_frame_out_of_protocol_on_the_lane_shuts_it) {
  lane_rig rig;
  ipc::frame_header h;
  h.type = static_cast<std::uint16_t>(ipc::message_type::ping);
  ASSERT_TRUE(rig.host->send(h, json::object(), ipc::lane_socket::clock::now() + 5s).ok());
  rig.doorbell.fetch_add(1);
  auto next = std::async(std::launch::async, [&] { return rig.requests.next(); });
  // The host sees its lane closed at once rather than waiting for its call's deadline.
  auto closed = rig.host->receive(ipc::lane_socket::clock::now() + 10s);
  ASSERT_FALSE(closed.ok());
  EXPECT_EQ(closed.err().code, ipc::channel_errc::peer_lost);
  rig.requests.stop();
  ASSERT_EQ(next.wait_for(10s), std::future_status::ready);
  EXPECT_FALSE(next.get().has_value());
  EXPECT_FALSE(rig.requests.has_lane());
}

}  // namespace
}  // namespace orch::worker
