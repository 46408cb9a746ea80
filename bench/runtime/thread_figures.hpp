// Context switches and CPU time of a process tree, read from /proc: counts that a noisy machine
// does not move the way it moves a latency. A thread that blocks and is woken again counts one
// voluntary switch, so the voluntary count per prompt is the number of wake-ups the prompt costs,
// summed over the host's threads and its workers'. /proc/<tid>/schedstat adds the time each
// thread ran and the time it sat runnable waiting for a CPU, so a latency can be split into the
// work done, the wait for a core, and what is left (the wake-ups themselves).
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

namespace orch::bench {

struct thread_figures {
  long voluntary = 0;     // blocked and woken again
  long involuntary = 0;   // preempted
  long long run_ns = 0;   // on a CPU
  long long wait_ns = 0;  // runnable, waiting for a CPU
};

// Per thread name ("comm"), over `root` and its children.
using tree_figures = std::map<std::string, thread_figures>;

namespace detail {

inline long status_field(const std::string& text, const std::string& key) {
  const auto at = text.find(key);
  return at == std::string::npos ? 0 : std::stol(text.substr(at + key.size()));
}

}  // namespace detail

// Adds the figures of `pid`'s threads, named `prefix` + their comm.
inline void add_threads(pid_t pid, const std::string& prefix, tree_figures& out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream in(task.path() / "status");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto name_at = text.find("Name:\t");
    if (name_at == std::string::npos) continue;
    const std::string name = text.substr(name_at + 6, text.find('\n', name_at) - name_at - 6);
    auto& c = out[prefix + name];
    c.voluntary += detail::status_field(text, "\nvoluntary_ctxt_switches:\t");
    c.involuntary += detail::status_field(text, "nonvoluntary_ctxt_switches:\t");
    long long run = 0, wait = 0;
    if (std::ifstream sched(task.path() / "schedstat"); sched >> run >> wait) {
      c.run_ns += run;
      c.wait_ns += wait;
    }
  }
}

// `root` under the name "host", and each of its child processes under "worker".
inline tree_figures thread_figures_of(pid_t root) {
  namespace fs = std::filesystem;
  tree_figures out;
  add_threads(root, "host/", out);
  std::error_code ec;
  for (const auto& proc : fs::directory_iterator("/proc", ec)) {
    const std::string pid = proc.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(proc.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    const auto close = stat.rfind(')');  // comm may hold spaces; the fields follow its ')'
    if (close == std::string::npos) continue;
    char state = 0;
    long ppid = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %ld", &state, &ppid) == 2 && ppid == root)
      add_threads(static_cast<pid_t>(std::stol(pid)), "worker/", out);
  }
  return out;
}

// after - before, per thread name; threads that neither switched nor ran are left out.
inline tree_figures operator-(const tree_figures& after, const tree_figures& before) {
  tree_figures out;
  for (const auto& [name, c] : after) {
    auto d = c;
    if (const auto b = before.find(name); b != before.end()) {
      d.voluntary -= b->second.voluntary;
      d.involuntary -= b->second.involuntary;
      d.run_ns -= b->second.run_ns;
      d.wait_ns -= b->second.wait_ns;
    }
    if (d.voluntary != 0 || d.involuntary != 0 || d.run_ns != 0) out[name] = d;
  }
  return out;
}

}  // namespace orch::bench
