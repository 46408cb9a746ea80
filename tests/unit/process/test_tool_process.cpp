// How a tool runs: its output captured, its environment entries set and removed, a timeout that
// kills its whole process group, and a clear error for a missing executable.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "orch/process/errc.hpp"
#include "orch/process/tool_process.hpp"
#include "temp_tree.hpp"

namespace orch::process {
namespace {

using namespace std::chrono_literals;

TEST(tool_process, output_is_captured_and_the_status_described) {
  tool_command c;
  c.argv = {"/bin/sh", "-c", "echo out; echo err >&2; exit 3"};
  auto r = run_tool(c);
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_FALSE(r->succeeded());
  EXPECT_EQ(r->describe(), "exited with 3");
  EXPECT_NE(r->output.find("out"), std::string::npos);
  EXPECT_NE(r->output.find("err"), std::string::npos);
}

TEST(tool_process, environment_entries_are_set_and_removed) {
  ::setenv("ORCH_TOOL_TEST_GONE", "present", 1);
  tool_command c;
  c.argv = {"/bin/sh", "-c", "echo \"[$ORCH_TOOL_TEST_GONE][$ORCH_TOOL_TEST_SET]\""};
  c.env = {{"ORCH_TOOL_TEST_GONE", std::nullopt}, {"ORCH_TOOL_TEST_SET", "yes"}};
  auto r = run_tool(c);
  ::unsetenv("ORCH_TOOL_TEST_GONE");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->output, "[][yes]\n");
}

TEST(tool_process, a_timeout_kills_the_whole_process_group) {
  testing::temp_tree tmp;
  const auto marker = tmp.root() / "grandchild-survived";
  tool_command c;
  // The grandchild would write the marker after the timeout if the group were not killed.
  c.argv = {"/bin/sh", "-c", "(sleep 1; touch '" + marker.string() + "') & sleep 30"};
  c.timeout = 200ms;
  auto r = run_tool(c);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->describe(), "timed out");
  std::this_thread::sleep_for(1500ms);
  EXPECT_FALSE(std::filesystem::exists(marker)) << "a process of the tool's group outlived it";
}

TEST(tool_process, a_missing_executable_is_named) {
  tool_command c;
  c.argv = {"orch-no-such-tool-anywhere"};
  auto r = run_tool(c);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().code, process_errc::not_found);
  EXPECT_NE(r.err().message.find("orch-no-such-tool-anywhere"), std::string::npos);
}

}  // namespace
}  // namespace orch::process
