// The two ComfyUI clients from npm that serve is tested with (tests/integration/serve/npm/
// clients.mjs, unchanged) driving the gateway in front of three hosts (docs/fleet.md, "The
// frontend at the gateway"): each reads /system_stats and /object_info, queues the example
// prompt, follows it over the gateway's WebSocket with the gateway's prompt id, and reads its
// history and the queue. Neither reads /view: the prompt's output is a checksum.
#include <fstream>

#include "../cli/command_runner.hpp"
#include "gateway_fixture.hpp"

namespace orch::serve_testing {
namespace {

// The example prompt with a sampler long enough that both libraries, which listen for a
// prompt's events only once its POST is answered, hear them (test_serve_clients.cpp's reason).
std::string long_sampler_prompt(const fs::path& dir) {
  json prompt;
  std::ifstream(ORCH_TEST_EXAMPLE_PROMPT) >> prompt;
  prompt["3"]["inputs"]["steps"] = 20;
  prompt["3"]["inputs"]["step_ms"] = 25;
  const auto file = dir / "long-sampler.json";
  std::ofstream(file) << prompt.dump();
  return file.string();
}

void run_npm_client_at_gateway(const serve_process& gateway, const std::string& which,
                               const std::string& prompt_file) {
  ASSERT_TRUE(fs::exists(std::string(ORCH_TEST_NPM_CLIENTS) + "/node_modules"))
      << "the npm clients are not installed: run ./scripts/install-deps";
  const auto r = orch::testing::run_command(
      "node '" + std::string(ORCH_TEST_NPM_CLIENTS) + "/clients.mjs' 127.0.0.1:" +
      std::to_string(gateway.port()) + " '" + prompt_file + "' " + which);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("ok: " + which), std::string::npos) << r.out << r.err;
}

TEST_F(gateway_test, the_stable_canvas_client_from_npm_runs_a_prompt_through_the_gateway) {
  run_npm_client_at_gateway(*gateway_, "stable-canvas", long_sampler_prompt(dir_));
  EXPECT_EQ(gateway_->get("/history").json().size(), 1u);
}

TEST_F(gateway_test, the_saintno_sdk_from_npm_runs_a_prompt_through_the_gateway) {
  run_npm_client_at_gateway(*gateway_, "saintno", long_sampler_prompt(dir_));
  EXPECT_EQ(gateway_->get("/history").json().size(), 1u);
}

}  // namespace
}  // namespace orch::serve_testing
