// SCM_RIGHTS fd passing: fds arrive, extras are refused and closed.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "leak_check.hpp"
#include "orch/ipc/fd_passing.hpp"
#include "orch/ipc/memfd_segment.hpp"

namespace orch::ipc {
namespace {

using fd_passing_test = testing::leak_checked_test;

struct socket_pair {
  unique_fd a, b;
  socket_pair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    a.reset(fds[0]);
    b.reset(fds[1]);
  }
};

TEST_F(fd_passing_test, sent_memfd_arrives_sealed_with_its_contents) {
  socket_pair sp;
  auto seg = memfd_segment::create("test", 4096);
  ASSERT_TRUE(seg.ok());
  {
    auto m = mapping::map(seg->fd(), 0, 4096, true);
    ASSERT_TRUE(m.ok());
    m->data()[10] = std::byte{77};
  }
  const int fd = seg->fd();
  const std::byte tag{1};
  ASSERT_TRUE(send_fds(sp.a.get(), {&tag, 1}, {&fd, 1}).ok());
  auto got = recv_fds(sp.b.get(), 1, 1);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->fds.size(), 1u);
  // Received fds must not leak into processes the receiver spawns.
  EXPECT_NE(::fcntl(got->fds[0].get(), F_GETFD) & FD_CLOEXEC, 0);
  auto adopted = memfd_segment::adopt(std::move(got->fds[0]), 4096);
  ASSERT_TRUE(adopted.ok());
  auto m = mapping::map(adopted->fd(), 0, 4096, false);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->data()[10], std::byte{77});
}

TEST_F(fd_passing_test, more_fds_than_expected_are_refused_and_all_closed) {
  socket_pair sp;
  auto s1 = memfd_segment::create("one", 4096);
  auto s2 = memfd_segment::create("two", 4096);
  auto s3 = memfd_segment::create("three", 4096);
  const int fds[3] = {s1->fd(), s2->fd(), s3->fd()};
  const std::byte tag{1};
  ASSERT_TRUE(send_fds(sp.a.get(), {&tag, 1}, fds).ok());
  auto got = recv_fds(sp.b.get(), 1, 1);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.err().code, "too_many_fds");
  // TearDown's leak check proves the three received copies were closed.
}

std::atomic<int> interruptions{0};
extern "C" void count_interruption(int) {
  interruptions.fetch_add(1);
}

TEST_F(fd_passing_test, receive_interrupted_by_a_signal_is_retried) {
  socket_pair sp;
  // A handler without SA_RESTART makes the blocked recvmsg return EINTR.
  struct sigaction action {};
  struct sigaction previous {};
  action.sa_handler = count_interruption;
  sigemptyset(&action.sa_mask);
  ASSERT_EQ(::sigaction(SIGUSR1, &action, &previous), 0);
  const pthread_t receiver = ::pthread_self();
  auto seg = memfd_segment::create("eintr", 4096);
  ASSERT_TRUE(seg.ok());
  std::thread sender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ::pthread_kill(receiver, SIGUSR1);  // interrupts the blocked receive
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::byte tag{1};
    const int fd = seg->fd();
    EXPECT_TRUE(send_fds(sp.a.get(), {&tag, 1}, {&fd, 1}).ok());
  });
  auto got = recv_fds(sp.b.get(), 1, 1);
  sender.join();
  ::sigaction(SIGUSR1, &previous, nullptr);
  ASSERT_TRUE(got.ok()) << got.err().message;
  EXPECT_EQ(got->fds.size(), 1u);
  EXPECT_GE(interruptions.load(), 1);
}

TEST_F(fd_passing_test, closed_peer_is_reported) {
  socket_pair sp;
  sp.a.reset();
  auto got = recv_fds(sp.b.get(), 1, 1);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.err().code, "peer_closed");
}

TEST_F(fd_passing_test, unsealed_fd_is_not_adopted_as_a_segment) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  unique_fd keep(fds[1]);
  auto adopted = memfd_segment::adopt(unique_fd(fds[0]), 0);
  ASSERT_FALSE(adopted.ok());
  EXPECT_EQ(adopted.err().code, "not_sealed");
}

TEST_F(fd_passing_test, sealed_segment_cannot_be_resized) {
  auto seg = memfd_segment::create("sealed", 8192);
  ASSERT_TRUE(seg.ok());
  EXPECT_NE(::ftruncate(seg->fd(), 4096), 0);
  EXPECT_NE(::ftruncate(seg->fd(), 16384), 0);
}

}  // namespace
}  // namespace orch::ipc
