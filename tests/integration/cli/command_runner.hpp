// command_runner: runs one shell command line as an operator would, with stdout and stderr
// captured separately, for the CLI tests (test_cli, test_startup_failures, test_worker_cli).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace orch::testing {

struct command_result {
  int exit_code = -1;  // as a shell reports it: 128 + N when signal N ended it
  std::string out;
  std::string err;
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `command` with /bin/sh (already quoted by the caller) and returns its exit code and
// output. The output files live in a throwaway directory.
inline command_result run_command(const std::string& command) {
  char tmpl[] = "/tmp/orch-cli-XXXXXX";
  const std::filesystem::path dir = ::mkdtemp(tmpl);
  const std::string full = command + " >'" + (dir / "out").string() + "' 2>'" +
                           (dir / "err").string() + "'";
  const int status = std::system(full.c_str());
  command_result r{WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
                   slurp(dir / "out"), slurp(dir / "err")};
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return r;
}

}  // namespace orch::testing
