// comfy-orch-worker as someone who finds it on disk runs it: --help explains that the host starts
// it and lists its flags (exit 0); a usage error says what is wrong on stderr (exit 64).
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "command_runner.hpp"

namespace {

namespace fs = std::filesystem;

using orch::testing::command_result;

command_result run_worker(const std::string& args) {
  return orch::testing::run_command("'" + std::string(COMFY_ORCH_WORKER_BIN) + "' " + args);
}

TEST(worker_cli, help_says_the_host_starts_it_and_lists_every_flag) {
  for (const char* flag : {"--help", "-h"}) {
    const auto r = run_worker(flag);
    EXPECT_EQ(r.exit_code, 0) << flag;
    EXPECT_NE(r.out.find("comfy-orch run"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("not meant to\nbe run by hand"), std::string::npos) << r.out;
    for (const char* listed : {"--channel-fd", "--fd-socket", "--token-fd", "--generation",
                               "--env", "--library", "--probe-plugins", "--help"}) {
      EXPECT_NE(r.out.find(listed), std::string::npos) << listed << " is not in:\n" << r.out;
    }
    EXPECT_TRUE(r.err.empty()) << r.err;
  }
}

TEST(worker_cli, no_arguments_is_a_usage_error_that_names_what_is_missing) {
  const auto r = run_worker("");
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_NE(r.err.find("missing --channel-fd"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--help"), std::string::npos) << r.err;
}

TEST(worker_cli, an_unknown_flag_is_a_usage_error_that_names_it) {
  const auto r = run_worker("--bogus 1");
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_NE(r.err.find("unknown argument '--bogus'"), std::string::npos) << r.err;
}

TEST(worker_cli, a_flag_without_a_number_is_a_usage_error_that_names_it) {
  const auto r = run_worker("--channel-fd three");
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_NE(r.err.find("--channel-fd needs a non-negative number, not 'three'"),
            std::string::npos)
      << r.err;
}

TEST(worker_cli, a_token_fd_that_is_not_open_is_a_usage_error_that_says_so) {
  const auto r = run_worker(
      "--channel-fd 3 --fd-socket 4 --token-fd 57 --generation 1 --env e --library /x");
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_NE(r.err.find("cannot read the startup token from fd 57"), std::string::npos) << r.err;
}

}  // namespace
