// Context switches of a process tree, read from /proc: a count that a noisy machine does not
// move the way it moves time. A thread that blocks and is woken again counts one voluntary
// switch, so the voluntary count per prompt is the number of wake-ups the prompt costs, summed
// over the host's threads and its workers'.
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

namespace orch::bench {

// Voluntary and involuntary switches, per thread name ("comm"), over `root` and its children.
using switch_counts = std::map<std::string, std::pair<long, long>>;

namespace detail {

inline long status_field(const std::string& text, const std::string& key) {
  const auto at = text.find(key);
  return at == std::string::npos ? 0 : std::stol(text.substr(at + key.size()));
}

}  // namespace detail

// Adds the switches of `pid`'s threads, named `prefix` + their comm.
inline void add_threads(pid_t pid, const std::string& prefix, switch_counts& out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream in(task.path() / "status");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto name_at = text.find("Name:\t");
    if (name_at == std::string::npos) continue;
    const std::string name = text.substr(name_at + 6, text.find('\n', name_at) - name_at - 6);
    auto& c = out[prefix + name];
    c.first += detail::status_field(text, "\nvoluntary_ctxt_switches:\t");
    c.second += detail::status_field(text, "nonvoluntary_ctxt_switches:\t");
  }
}

// `root` under the name "host", and each of its child processes under "worker".
inline switch_counts context_switches(pid_t root) {
  namespace fs = std::filesystem;
  switch_counts out;
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

// after - before, per thread name; threads that did not switch are left out.
inline switch_counts operator-(const switch_counts& after, const switch_counts& before) {
  switch_counts out;
  for (const auto& [name, c] : after) {
    auto d = c;
    if (const auto b = before.find(name); b != before.end()) {
      d.first -= b->second.first;
      d.second -= b->second.second;
    }
    if (d.first != 0 || d.second != 0) out[name] = d;
  }
  return out;
}

}  // namespace orch::bench
