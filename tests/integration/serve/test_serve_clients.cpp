// ComfyUI clients nobody here wrote drive a live `comfy-orch serve` end to end (docs/serve.md,
// "Tests"): a client written as ComfyUI's own script examples are, and two from npm.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../cli/command_runner.hpp"
#include "serve_fixture.hpp"

namespace {

using namespace orch::serve_testing;

TEST_F(serve_test, a_client_written_as_comfyuis_script_examples_runs_a_prompt_end_to_end) {
  const auto r = orch::testing::run_command(
      std::string("/usr/bin/python3 '") + ORCH_TEST_SERVE_CLIENT + "' '" + ORCH_TEST_COMFY_ORCH +
      "' '" + write_deployment().string() + "' '" + ORCH_TEST_EXAMPLE_PROMPT + "'");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("ok:"), std::string::npos) << r.out;
}

// Two ComfyUI clients nobody here wrote, from npm at the versions package-lock.json pins
// (scripts/install-deps runs npm ci): each queues `prompt_file`, follows it over the
// WebSocket, waits as the library does and reads the history.
void run_npm_client(serve_process& s, const std::string& which, const std::string& prompt_file) {
  ASSERT_TRUE(std::filesystem::exists(std::string(ORCH_TEST_NPM_CLIENTS) + "/node_modules"))
      << "the npm clients are not installed: run ./scripts/install-deps";
  const auto r = orch::testing::run_command(
      "node '" + std::string(ORCH_TEST_NPM_CLIENTS) + "/clients.mjs' 127.0.0.1:" +
      std::to_string(s.port()) + " '" + prompt_file + "' " + which);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("ok: " + which), std::string::npos) << r.out << r.err;
  EXPECT_EQ(s.stop(), 0);
}

// Both libraries start listening for a prompt's events only once its POST has been answered
// (the SDK, for progress, even after it has read the history): the example's four steps were
// over before that once a served prompt took a millisecond, and the client waited for events
// already sent. Real samplers take seconds; the example's sampler here takes 20 steps of 25 ms.
std::string long_sampler_prompt(const std::filesystem::path& dir) {
  json prompt;
  std::ifstream(ORCH_TEST_EXAMPLE_PROMPT) >> prompt;
  prompt["3"]["inputs"]["steps"] = 20;
  prompt["3"]["inputs"]["step_ms"] = 25;
  const auto file = dir / "long-sampler.json";
  std::ofstream(file) << prompt.dump();
  return file.string();
}

TEST_F(serve_test, the_stable_canvas_client_from_npm_runs_a_prompt_end_to_end) {
  const auto prompt = long_sampler_prompt(write_deployment().parent_path());
  auto s = serve();
  run_npm_client(*s, "stable-canvas", prompt);
}

TEST_F(serve_test, the_saintno_sdk_from_npm_runs_a_prompt_end_to_end) {
  const auto prompt = long_sampler_prompt(write_deployment().parent_path());
  auto s = serve();
  run_npm_client(*s, "saintno", prompt);
}

}  // namespace
