// node_requests (worker/src/node_requests.hpp): the node thread's requests from the io thread's
// queue and the call lane, with the host's end of the lane played by the test.
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>

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
    auto page = ipc::lane_memory::create();
    EXPECT_TRUE(page.ok());
    ipc::unique_fd page_fd(::dup(page->fd()));
    host = std::make_unique<ipc::lane_endpoint>(
        ipc::lane_socket(ipc::unique_fd(fds[0]), "host", 1), std::move(*page),
        ipc::lane_side::host);
    EXPECT_TRUE(requests.open(ipc::unique_fd(fds[1]), std::move(page_fd), 1).ok());
    requests.serve_lane();
  }
  void write_call(std::uint64_t id, std::size_t padding = 0) {
    ipc::frame_header h;
    h.type = static_cast<std::uint16_t>(ipc::message_type::call);
    h.request_id = id;
    const json body{{"node", "1"},
                    {"class_type", "TestEmpty"},
                    {"inputs", {{"text", std::string(padding, 'x')}}}};
    ASSERT_TRUE(host->send(h, body, ipc::lane_socket::clock::now() + 5s).ok());
  }
  node_requests requests{"test"};
  std::unique_ptr<ipc::lane_endpoint> host;
};

TEST(node_requests, calls_in_the_box_and_on_the_socket_are_taken_in_order) {
  lane_rig rig;
  rig.write_call(1);
  auto first = rig.requests.next();
  ASSERT_TRUE(first.has_value());
  EXPECT_TRUE(first->on_lane);
  EXPECT_EQ(first->header.request_id, 1u);
  // Larger than the box: on the socket.
  rig.write_call(2, ipc::lane_box_capacity);
  auto second = rig.requests.next();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->header.request_id, 2u);
  EXPECT_EQ(second->body["inputs"]["text"].get<std::string>().size(), ipc::lane_box_capacity);
  rig.write_call(3);
  EXPECT_EQ(rig.requests.next()->header.request_id, 3u);
}

TEST(node_requests, a_call_written_while_the_node_thread_sleeps_wakes_it) {
  lane_rig rig;
  auto next = std::async(std::launch::async, [&] { return rig.requests.next(); });
  // Past its poll (100 us) the node thread sleeps; the call must wake it whenever it comes.
  std::this_thread::sleep_for(20ms);
  rig.write_call(7);
  ASSERT_EQ(next.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(next.get()->header.request_id, 7u);
  // With nothing more written, the node thread sleeps where stopping wakes it.
  auto idle = std::async(std::launch::async, [&] { return rig.requests.next(); });
  std::this_thread::sleep_for(20ms);
  rig.requests.stop();
  ASSERT_EQ(idle.wait_for(10s), std::future_status::ready);
  EXPECT_FALSE(idle.get().has_value());
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
  h.type = static_cast<std::uint16_t>(ipc::message_type::shutdown);
  ASSERT_TRUE(rig.host->send(h, json::object(), ipc::lane_socket::clock::now() + 5s).ok());
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
