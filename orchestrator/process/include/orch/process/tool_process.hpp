// tool_process: runs one external tool (python, pip, uv, pixi) for the env manager, the way an
// install must: started by the host's one spawner (child_process.hpp: its own process group,
// PR_SET_PDEATHSIG so a killed comfy-orch takes its tool with it instead of leaving it writing
// into a half-built env, no descriptor of the host's but stdin from /dev/null and its output),
// output to a log file or captured, and a timeout that kills the tool's whole process group;
// what the tool leaves in its group when it exits is killed with it.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "orch/support/result.hpp"

namespace orch::process {

struct tool_command {
  std::vector<std::string> argv;  // argv[0] is searched on PATH when it has no '/'
  std::map<std::string, std::optional<std::string>> env;  // set (value) or removed (nullopt)
  std::filesystem::path working_directory;                // empty: ours
  std::chrono::milliseconds timeout{0};                   // 0: none
  int output_fd = -1;  // stdout and stderr go here; -1: captured into tool_exit::output
};

struct tool_exit {
  int status = 0;  // the wait status
  bool timed_out = false;
  std::string output;  // captured output (the first 1 MiB), when output_fd was -1

  bool succeeded() const;
  std::string describe() const;  // "exited with 1", "killed by SIGKILL", "timed out after 5 s"
};

// Errors: "spawn_failed" (the pipe or fork failed), "not_found" (the executable is not on PATH
// or cannot be executed; the message names it), "exec_failed" (execve or entering the working
// directory failed in the child; the message names it and why).
result<tool_exit> run_tool(const tool_command& command);

// The path of `name` on PATH (or `name` itself when it holds a '/' and is executable); empty
// when there is none.
std::filesystem::path find_executable(const std::string& name);

}  // namespace orch::process
