// adopted_children (orchestrator/process/include/orch/process/adopted_children.hpp): a child subreaper reaps the orphans it
// adopts as they end, kills and reaps those left when asked, and never touches a child it
// started on purpose. Each case runs in a forked process, since becoming a subreaper lasts for
// the life of the process that does.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "orch/process/adopted_children.hpp"

namespace {

using namespace orch::process;

// Runs `body` in a child process; its exit code is the number of the first check that failed.
int in_a_child(int (*body)()) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

// A grandchild that outlives its parent (so it is adopted), then runs for `seconds`.
pid_t orphan(unsigned seconds) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  const pid_t middle = ::fork();
  if (middle == 0) {
    const pid_t grandchild = ::fork();
    if (grandchild == 0) {
      ::sleep(seconds);
      ::_exit(0);
    }
    (void)!::write(fds[1], &grandchild, sizeof grandchild);
    ::_exit(0);
  }
  pid_t grandchild = -1;
  (void)!::read(fds[0], &grandchild, sizeof grandchild);
  ::waitpid(middle, nullptr, 0);
  ::close(fds[0]);
  ::close(fds[1]);
  return grandchild;
}


TEST(adopted_children, an_orphan_that_ends_is_reaped_and_one_left_is_ended) {
  EXPECT_EQ(in_a_child([] {
              if (!adopt_orphans()) return 1;
              const pid_t quick = orphan(0);
              if (quick <= 0) return 2;
              // Re-parented here once its parent ended: reaped once it has ended too.
              std::size_t reaped = 0;
              for (int i = 0; i < 500 && reaped == 0; ++i) {
                reaped = reap_adopted();
                if (reaped == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
              }
              if (reaped != 1) return 3;
              if (::kill(quick, 0) == 0) return 4;  // not even a zombie is left
              const pid_t slow = orphan(300);
              if (slow <= 0) return 5;
              if (reap_adopted() != 0) return 6;  // running: not reaped
              if (end_adopted() != 1) return 7;
              if (::kill(slow, 0) == 0) return 8;
              return 0;
            }),
            0);
}

TEST(adopted_children, a_child_started_on_purpose_is_never_taken_for_an_orphan) {
  EXPECT_EQ(in_a_child([] {
              if (!adopt_orphans()) return 1;
              pid_t mine;
              {
                const auto held = hold_children();
                mine = ::fork();
                if (mine == 0) ::_exit(7);
                note_spawned(mine);
              }
              std::this_thread::sleep_for(std::chrono::milliseconds(100));
              if (reap_adopted() != 0 || end_adopted() != 0) return 2;
              int status = 0;
              if (::waitpid(mine, &status, 0) != mine || WEXITSTATUS(status) != 7) return 3;
              forget_spawned(mine);
              return 0;
            }),
            0);
}

}  // namespace
