// Two real processes fault regions on one sim device (docs/sim-device.md): in device mode each
// process's free view includes the other's usage, in process mode it does not, and eviction in
// one process never touches the other's pages.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "orch/plugin/pager.h"
#include "orch/plugin/sim.h"
#include "orch/plugins/loader.hpp"

extern char** environ;

namespace {

constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t page = 32 * MiB;

// The peer process, talking over two pipes.
class peer {
 public:
  peer(int device_fd, uint64_t pages) {
    int in[2];
    int out[2];
    EXPECT_EQ(pipe2(in, O_CLOEXEC), 0);
    EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    // The device fd is inherited: dup it to a fixed number without CLOEXEC.
    posix_spawn_file_actions_adddup2(&fa, device_fd, 3);
    const std::string pages_arg = std::to_string(pages);
    char* argv[] = {const_cast<char*>(ORCH_SIM_PEER), const_cast<char*>("3"),
                    const_cast<char*>(pages_arg.c_str()), nullptr};
    EXPECT_EQ(posix_spawn(&pid_, ORCH_SIM_PEER, &fa, nullptr, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    to_ = fdopen(in[1], "w");
    from_ = fdopen(out[0], "r");
  }
  ~peer() {
    send("exit");
    fclose(to_);
    fclose(from_);
    int status = 0;
    waitpid(pid_, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  void send(const char* line) {
    std::fprintf(to_, "%s\n", line);
    std::fflush(to_);
  }
  std::string receive() {
    char buf[256] = {};
    if (std::fgets(buf, sizeof buf, from_) == nullptr) return "";
    std::string s(buf);
    if (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  }
  std::pair<uint64_t, uint64_t> report() {
    send("report");
    unsigned long long free_bytes = 0;
    unsigned long long resident = 0;
    const std::string line = receive();
    EXPECT_EQ(std::sscanf(line.c_str(), "free %llu resident %llu", &free_bytes, &resident), 2)
        << line;
    return {free_bytes, resident};
  }

 private:
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
};

class sim_multiprocess : public ::testing::Test {
 protected:
  void start(uint32_t mode) {
    auto backend = orch::plugins::plugin_library::open(ORCH_TEST_PLUGIN_BACKEND_SIM);
    auto pager = orch::plugins::plugin_library::open(ORCH_TEST_PLUGIN_PAGER_SIM);
    ASSERT_TRUE(backend && pager);
    backend_ = std::move(*backend);
    pager_lib_ = std::move(*pager);
    ASSERT_TRUE(backend_->init() && pager_lib_->init());
    be_ = backend_->table().backend_api;
    sim_ = static_cast<const orch_sim_api*>(backend_->table().extension);
    api_ = pager_lib_->table().pager_api;
    orch_sim_config sc{sizeof(orch_sim_config), mode, 1024 * MiB, 0, 0, 0};
    ASSERT_EQ(sim_->create(&sc, &fd_), ORCH_OK);
    orch_device_config dc{sizeof(orch_device_config), 0, fd_, 0};
    ASSERT_EQ(be_->device_open(&dc, &view_), ORCH_OK);
    orch_pager_config c{};
    c.struct_size = sizeof c;
    c.level = ORCH_LEVEL_4;
    c.sim_fd = fd_;
    c.page_size = page;
    c.poll_interval_ms = 0;
    c.poll_floor = -1;
    ASSERT_EQ(api_->device_open(&c, &pager_), ORCH_OK);
    ASSERT_EQ(api_->region_create(pager_, 8 * page, &region_, nullptr), ORCH_OK);
    for (uint64_t i = 0; i < 8; ++i) {
      ASSERT_EQ(api_->region_fault(region_, i * page, page, nullptr, 0, nullptr, nullptr), ORCH_OK);
      ASSERT_EQ(api_->region_unpin(region_, i * page, page), ORCH_OK);
    }
  }
  void TearDown() override {
    if (pager_lib_ != nullptr) pager_lib_->shutdown();
    if (view_ != nullptr) be_->device_close(view_);
    if (fd_ >= 0) close(fd_);
    if (zombie_ > 0) waitpid(zombie_, nullptr, 0);
  }
  uint64_t my_free() {
    uint64_t free_bytes = 0;
    EXPECT_EQ(be_->mem_get_info(view_, &free_bytes, nullptr), ORCH_OK);
    return free_bytes;
  }
  // Forks a child that attaches to the device, creates `bytes` and stays until SIGKILLed: a
  // worker that dies without closing anything. Returns the child's status for open+create.
  orch_status crash_peer(uint64_t bytes, bool reap = true) {
    int p[2];
    EXPECT_EQ(pipe(p), 0);
    const pid_t child = fork();
    if (child == 0) {
      close(p[0]);
      orch_device_config dc{sizeof(orch_device_config), 0, fd_, 0};
      orch_device* dev = nullptr;
      uint64_t handle = 0;
      orch_status st = be_->device_open(&dc, &dev);
      if (st == ORCH_OK) st = be_->phys_create(dev, bytes, &handle);
      const int32_t code = st;
      (void)!write(p[1], &code, sizeof code);
      for (;;) pause();
    }
    close(p[1]);
    int32_t code = -100;
    EXPECT_EQ(read(p[0], &code, sizeof code), static_cast<ssize_t>(sizeof code));
    close(p[0]);
    kill(child, SIGKILL);
    if (reap) {
      int status = 0;
      waitpid(child, &status, 0);
      EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    } else {
      zombie_ = child;
      // SIGKILL is asynchronous: wait until the child is a zombie without reaping it.
      siginfo_t info{};
      waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT);
    }
    return static_cast<orch_status>(code);
  }
  orch_sim_counters counters() {
    orch_sim_counters c{};
    c.struct_size = sizeof c;
    EXPECT_EQ(sim_->counters(view_, &c), ORCH_OK);
    return c;
  }

  std::unique_ptr<orch::plugins::plugin_library> backend_;
  std::unique_ptr<orch::plugins::plugin_library> pager_lib_;
  const orch_backend_api* be_ = nullptr;
  const orch_sim_api* sim_ = nullptr;
  const orch_pager_api* api_ = nullptr;
  orch_device* view_ = nullptr;
  orch_pager* pager_ = nullptr;
  orch_region* region_ = nullptr;
  int32_t fd_ = -1;
  pid_t zombie_ = -1;
};

TEST_F(sim_multiprocess, in_device_mode_each_free_view_includes_the_other_process) {
  start(ORCH_SIM_FREE_DEVICE);
  peer other(fd_, 4);
  ASSERT_EQ(other.receive(), "ready");
  EXPECT_EQ(my_free(), (1024 - 256 - 128) * MiB);
  const auto [peer_free, peer_resident] = other.report();
  EXPECT_EQ(peer_free, (1024 - 256 - 128) * MiB);
  EXPECT_EQ(peer_resident, 4 * page);
  EXPECT_EQ(counters().used_bytes, 12 * page);
  EXPECT_EQ(counters().process_used_bytes, 8 * page);
}

TEST_F(sim_multiprocess, in_process_mode_a_free_view_sees_only_its_own_usage) {
  start(ORCH_SIM_FREE_PROCESS);
  peer other(fd_, 4);
  ASSERT_EQ(other.receive(), "ready");
  EXPECT_EQ(my_free(), (1024 - 256) * MiB);
  EXPECT_EQ(other.report().first, (1024 - 128) * MiB);
}

TEST_F(sim_multiprocess, eviction_in_one_process_never_touches_the_others_pages) {
  start(ORCH_SIM_FREE_DEVICE);
  peer other(fd_, 4);
  ASSERT_EQ(other.receive(), "ready");
  uint64_t freed = 0;
  ASSERT_EQ(api_->reclaim(pager_, 1024 * MiB, 0, &freed), ORCH_OK);
  EXPECT_EQ(freed, 8 * page);  // only its own pages
  EXPECT_EQ(counters().process_used_bytes, 0u);
  EXPECT_EQ(counters().used_bytes, 4 * page);
  EXPECT_EQ(other.report().second, 4 * page);
  // The peer's own view: every page still carries the signature of its first fault, and
  // re-faulting maps nothing new.
  other.send("check");
  EXPECT_EQ(other.receive(), "intact 1 newly 0");
}

// The check above can fail: a peer whose pages were lost reports it.
TEST_F(sim_multiprocess, a_peer_notices_when_its_own_pages_were_evicted) {
  start(ORCH_SIM_FREE_DEVICE);
  peer other(fd_, 4);
  ASSERT_EQ(other.receive(), "ready");
  other.send("evict");
  other.send("check");
  EXPECT_EQ(other.receive(), "intact 0 newly 4");
}

TEST_F(sim_multiprocess, a_peer_that_exits_gives_its_usage_back) {
  start(ORCH_SIM_FREE_DEVICE);
  {
    peer other(fd_, 4);
    ASSERT_EQ(other.receive(), "ready");
    EXPECT_EQ(counters().used_bytes, 12 * page);
  }
  EXPECT_EQ(counters().used_bytes, 8 * page);
}

TEST_F(sim_multiprocess, a_killed_peers_usage_and_slot_are_reclaimed_to_the_byte) {
  start(ORCH_SIM_FREE_DEVICE);
  const uint64_t free_before = my_free();
  ASSERT_EQ(crash_peer(256 * MiB), ORCH_OK);
  EXPECT_EQ(counters().used_bytes, 8 * page + 256 * MiB);  // dead, but still counted
  uint64_t bytes = 0;
  uint32_t slots = 0;
  ASSERT_EQ(sim_->reclaim_dead(view_, &bytes, &slots), ORCH_OK);
  EXPECT_EQ(bytes, 256 * MiB);
  EXPECT_EQ(slots, 1u);
  EXPECT_EQ(counters().used_bytes, 8 * page);
  EXPECT_EQ(my_free(), free_before);
  // Live processes' slots are left alone.
  ASSERT_EQ(sim_->reclaim_dead(view_, &bytes, &slots), ORCH_OK);
  EXPECT_EQ(bytes, 0u);
  EXPECT_EQ(slots, 0u);
}

TEST_F(sim_multiprocess, a_killed_peer_is_reclaimed_before_it_is_reaped) {
  start(ORCH_SIM_FREE_DEVICE);
  ASSERT_EQ(crash_peer(256 * MiB, /*reap=*/false), ORCH_OK);
  uint64_t bytes = 0;
  ASSERT_EQ(sim_->reclaim_dead(view_, &bytes, nullptr), ORCH_OK);
  EXPECT_EQ(bytes, 256 * MiB);
  EXPECT_EQ(counters().used_bytes, 8 * page);
}

TEST_F(sim_multiprocess, slots_of_killed_peers_are_reused_by_the_next_open_1100_times) {
  start(ORCH_SIM_FREE_DEVICE);
  // 1100 crashes: more than the 1024 slots, and 256 MiB each is more than the device holds
  // after three of them. Each child's open reclaims its dead predecessors.
  for (int i = 0; i < 1100; ++i) ASSERT_EQ(crash_peer(256 * MiB), ORCH_OK) << "crash " << i;
  ASSERT_EQ(sim_->reclaim_dead(view_, nullptr, nullptr), ORCH_OK);
  EXPECT_EQ(counters().used_bytes, 8 * page);
  EXPECT_EQ(my_free(), (1024 - 256) * MiB);
}

}  // namespace
