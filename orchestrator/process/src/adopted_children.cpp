#include "orch/process/adopted_children.hpp"

#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace orch::process {

namespace {

std::mutex children_mutex;
std::map<pid_t, unsigned> spawned;  // under children_mutex; a count, in case a pid comes back
std::atomic<bool> adopting{false};

// This process's children now, from every thread's children list (a child is listed under the
// thread that forked it, an adopted one under any). Empty when /proc does not list them.
std::vector<pid_t> children() {
  std::vector<pid_t> out;
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr) return out;
  while (const dirent* e = ::readdir(tasks)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream list(std::string("/proc/self/task/") + e->d_name + "/children");
    for (pid_t pid; list >> pid;) out.push_back(pid);
  }
  ::closedir(tasks);
  return out;
}

// The children not started on purpose, under children_mutex.
std::vector<pid_t> adopted() {
  std::vector<pid_t> out;
  for (const pid_t pid : children())
    if (spawned.count(pid) == 0) out.push_back(pid);
  return out;
}

}  // namespace

std::unique_lock<std::mutex> hold_children() { return std::unique_lock(children_mutex); }

void note_spawned(pid_t pid) { ++spawned[pid]; }

void forget_spawned(pid_t pid) {
  std::lock_guard lock(children_mutex);
  if (auto it = spawned.find(pid); it != spawned.end() && --it->second == 0) spawned.erase(it);
}

bool adopt_orphans() {
  std::ifstream probe("/proc/self/task/" + std::to_string(::getpid()) + "/children");
  if (!probe) return false;
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) return false;
  adopting = true;
  return true;
}

std::size_t reap_adopted() {
  if (!adopting) return 0;
  std::lock_guard lock(children_mutex);
  std::size_t reaped = 0;
  for (const pid_t pid : adopted()) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) ++reaped;
  }
  return reaped;
}

std::size_t end_adopted() {
  if (!adopting) return 0;
  std::lock_guard lock(children_mutex);
  std::size_t ended = 0;
  // An adopted process that dies leaves its own children to this one: a few rounds take them.
  for (int round = 0; round < 16; ++round) {
    const auto left = adopted();
    if (left.empty()) break;
    for (const pid_t pid : left) ::kill(pid, SIGKILL);
    for (const pid_t pid : left) {
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      ++ended;
    }
  }
  return ended;
}

}  // namespace orch::process
