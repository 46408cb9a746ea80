// leak_check: the after-every-test invariant: no new entry in /dev/shm and no fd left
// open (docs/references.md, anchors §8.2.7, Triton's before/after shm probe).
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>

#include <gtest/gtest.h>

namespace orch::ipc::testing {

inline std::set<std::string> list_dir(const char* path) {
  std::set<std::string> names;
  if (DIR* dir = ::opendir(path)) {
    while (dirent* entry = ::readdir(dir)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") names.insert(name);
    }
    ::closedir(dir);
  }
  return names;
}

// The fds open now, with what each points at (so a failure names the leak).
inline std::set<std::string> open_fds() {
  std::set<std::string> fds;
  for (const auto& name : list_dir("/proc/self/fd")) {
    char target[512] = {};
    const std::string link = "/proc/self/fd/" + name;
    const ssize_t n = ::readlink(link.c_str(), target, sizeof(target) - 1);
    // The directory stream used for listing was one more fd; it is closed by now, so it is the
    // one entry whose link cannot be read.
    if (n <= 0) continue;
    fds.insert(name + " -> " + std::string(target, static_cast<std::size_t>(n)));
  }
  return fds;
}

// Whether the process whose decimal pid starts `text` (up to a '_') is alive.
inline bool process_alive(const std::string& text) {
  const std::string pid = text.substr(0, text.find('_'));
  if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) return false;
  return std::filesystem::exists("/proc/" + pid);
}

// Base fixture: snapshots at SetUp, compares at TearDown.
class leak_checked_test : public ::testing::Test {
 protected:
  void SetUp() override {
    shm_before_ = list_dir("/dev/shm");
    fds_before_ = open_fds();
  }
  void TearDown() override {
    for (const auto& name : list_dir("/dev/shm")) {
      // The machine's pinned-budget ledger is the one named entry by design: it lives while any
      // host of this user runs, and hosts of other test runs may hold it (machine_ledger.hpp).
      if (name.rfind("comfy-orch-budget-", 0) == 0) continue;
      // Named POSIX semaphores are never the project's (it makes none): Python's multiprocessing
      // makes `sem.mp-*` for the processes of other tests running beside this one.
      if (name.rfind("sem.", 0) == 0) continue;
      // torch's file_system sharing names its files `torch_<pid>_...`: one whose process still
      // runs is another test's (pyisolate's peers in bench_peers_smoke); this test's processes
      // are gone by now, so a leak of theirs is still caught.
      if (name.rfind("torch_", 0) == 0 && process_alive(name.substr(6))) continue;
      EXPECT_TRUE(shm_before_.count(name) != 0) << "new /dev/shm entry after the test: " << name;
    }
    const auto fds_after = open_fds();
    for (const auto& fd : fds_after) {
      EXPECT_TRUE(fds_before_.count(fd) != 0) << "fd left open after the test: " << fd;
    }
  }

 private:
  std::set<std::string> shm_before_;
  std::set<std::string> fds_before_;
};

}  // namespace orch::ipc::testing
