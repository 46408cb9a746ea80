// The machine ledger: one pinned budget for every host of a user on one machine. Each test uses
// a private name, so parallel runs (and real hosts) never share its ledger. Three real hosts at
// once are in tests/fault/budget.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "leak_check.hpp"
#include "orch/ipc/machine_ledger.hpp"

namespace orch::ipc {
namespace {

class machine_ledger_test : public testing::leak_checked_test {
 protected:
  void SetUp() override {
    leak_checked_test::SetUp();
    name_ = "/orch-test-ledger-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  void TearDown() override {
    ::shm_unlink(name_.c_str());  // only matters when a test failed half-way
    leak_checked_test::TearDown();
  }
  bool exists() const { return ::access(("/dev/shm" + name_).c_str(), F_OK) == 0; }
  std::string name_;
};

TEST_F(machine_ledger_test, a_host_that_does_not_fit_is_refused_naming_the_others) {
  auto first = machine_ledger::join(name_, 1000);
  ASSERT_TRUE(first.ok()) << first.err().message;
  ASSERT_TRUE(first->reserve(700).ok());
  auto second = machine_ledger::join(name_, 1000);
  ASSERT_TRUE(second.ok());
  auto refused = second->reserve(400);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.err().code, "machine_budget_exceeded");
  const std::string& why = refused.err().message;
  EXPECT_NE(why.find("pid " + std::to_string(::getpid())), std::string::npos) << why;
  EXPECT_NE(why.find("pinned_pool_size"), std::string::npos) << why;
  EXPECT_EQ(second->reserved(), 0u);
  EXPECT_TRUE(second->reserve(300).ok());
  // Shrinking always fits, and frees room for the other host.
  EXPECT_TRUE(first->reserve(600).ok());
  EXPECT_TRUE(second->reserve(400).ok());
  auto hosts = machine_ledger::snapshot(name_);
  ASSERT_TRUE(hosts.ok());
  std::uint64_t sum = 0;
  for (const auto& h : *hosts) sum += h.reserved;
  EXPECT_EQ(hosts->size(), 2u);
  EXPECT_EQ(sum, 1000u);
}

TEST_F(machine_ledger_test, the_last_host_to_leave_removes_the_name) {
  {
    auto first = machine_ledger::join(name_, 1000);
    ASSERT_TRUE(first.ok());
    {
      auto second = machine_ledger::join(name_, 1000);
      ASSERT_TRUE(second.ok());
    }
    EXPECT_TRUE(exists());
  }
  EXPECT_FALSE(exists());
  auto again = machine_ledger::join(name_, 1000);  // and the next host starts a new one
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->reserve(1000).ok());
}

TEST_F(machine_ledger_test, a_dead_hosts_reservation_is_reclaimed) {
  auto mine = machine_ledger::join(name_, 1000);
  ASSERT_TRUE(mine.ok());
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // A host that takes 900 and dies without leaving (no destructor runs after _exit).
    auto dying = machine_ledger::join(name_, 1000);
    const char ok = dying && dying->reserve(900) ? 'y' : 'n';
    (void)!::write(ready[1], &ok, 1);
    ::_exit(0);
  }
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  ::close(ready[0]);
  ::close(ready[1]);
  ASSERT_EQ(ok, 'y');
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  EXPECT_TRUE(mine->reserve(1000).ok()) << "the dead host's 900 bytes were not reclaimed";
  auto hosts = mine->hosts();
  ASSERT_TRUE(hosts.ok());
  EXPECT_EQ(hosts->size(), 1u);
}

TEST_F(machine_ledger_test, a_file_that_is_not_a_ledger_or_is_open_to_others_is_refused) {
  {
    const int fd = ::shm_open(name_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, 4096), 0);
    ASSERT_EQ(::pwrite(fd, "not a ledger", 12, 0), 12);
    ::close(fd);
  }
  auto garbled = machine_ledger::join(name_, 1000);
  ASSERT_FALSE(garbled.ok());
  EXPECT_EQ(garbled.err().code, "bad_ledger");
  EXPECT_NE(garbled.err().message.find("remove it"), std::string::npos);
  ASSERT_EQ(::shm_unlink(name_.c_str()), 0);
  {
    const int fd = ::shm_open(name_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::fchmod(fd, 0666), 0);
    ::close(fd);
  }
  auto open_to_all = machine_ledger::join(name_, 1000);
  ASSERT_FALSE(open_to_all.ok());
  EXPECT_EQ(open_to_all.err().code, "bad_ledger");
  EXPECT_FALSE(machine_ledger::join("no-slash", 1).ok());
  EXPECT_FALSE(machine_ledger::join("/a/b", 1).ok());
}

TEST_F(machine_ledger_test, the_name_comes_from_the_environment_when_set) {
  ::setenv(machine_ledger_variable, name_.c_str(), 1);
  EXPECT_EQ(machine_ledger::default_name(), name_);
  ::unsetenv(machine_ledger_variable);
  EXPECT_EQ(machine_ledger::default_name(), "/comfy-orch-budget-" + std::to_string(::geteuid()));
}

}  // namespace
}  // namespace orch::ipc
