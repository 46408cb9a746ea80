// python_environment (orchestrator/process/include/orch/process/python_environment.hpp): one rule for every Python process
// the host starts. Four copies had disagreed on PYTHONUSERBASE and PYTHONNOUSERSITE.
#include <gtest/gtest.h>

#include "orch/process/python_environment.hpp"

namespace {

using namespace orch::process;

TEST(python_environment, a_worker_and_a_tool_run_under_the_same_rule) {
  environment worker = {{"PYTHONPATH", "/elsewhere"}, {"PYTHONHOME", "/h"},
                        {"PYTHONSTARTUP", "/s.py"},   {"PYTHONUSERBASE", "/u"},
                        {"HOME", "/home/op"},         {"PYTHONNOUSERSITE", "0"}};
  scrub_python_environment(worker);
  std::map<std::string, std::optional<std::string>> tool;
  scrub_python_environment(tool);
  for (const auto& [name, value] : tool) {
    if (value) EXPECT_EQ(worker[name], *value) << name;
    else EXPECT_EQ(worker.count(name), 0u) << name << " is left to a worker";
  }
  EXPECT_EQ(worker.size(), tool.size() - 4 + 1);  // only HOME besides what the rule sets
  EXPECT_EQ(worker["HOME"], "/home/op");
  EXPECT_EQ(worker["PYTHONNOUSERSITE"], "1");
  EXPECT_FALSE(tool.at("PYTHONUSERBASE").has_value());
}

}  // namespace
