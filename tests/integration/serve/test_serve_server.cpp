// The composition root `comfy-orch serve` runs (serve_server.hpp), made here in this process from
// a serve_config, with no command line: over the runtime fixture's host and real workers it
// answers ComfyUI's routes and the live views' from its one route table, and it stops with its
// host still running, for the host is its owner's.
#include <gtest/gtest.h>

#include <string>

#include "orch/manifests/diagnostic.hpp"
#include "orch/runtime/host_startup.hpp"
#include "orch/serve/errc.hpp"
#include "orch/serve/serve_config.hpp"
#include "orch/serve/serve_server.hpp"
#include "serve_fixture.hpp"

namespace {

using namespace orch::serve_testing;
using orch::runtime::prepared_deployment;
using orch::serve::serve_config;
using orch::serve::serve_server;
using orch::testing::request;

prepared_deployment prepared(const std::filesystem::path& file) {
  orch::manifests::diagnostics diags;
  auto p = orch::runtime::prepare_deployment(file.string(), diags);
  EXPECT_TRUE(p.ok()) << p.err().message;
  return p.ok() ? std::move(*p) : prepared_deployment{};
}

// A server on a free port, found by no `comfy-orch ls`.
serve_config test_config() {
  serve_config config;
  config.port = 0;
  config.control_socket = false;
  return config;
}

TEST_F(serve_test, a_server_made_from_a_config_in_process_answers_and_runs_a_prompt) {
  const auto file = write_deployment();
  auto server = serve_server::prepare(test_config(), prepared(file), "test");
  ASSERT_TRUE(server.ok()) << server.err().message;
  start_file(file);  // the host, as `comfy-orch serve` starts it before the server's start
  const auto port = (*server)->start(*host_);
  ASSERT_TRUE(port.ok()) << port.err().message;

  EXPECT_EQ(request(*port, http::verb::get, "/prompt").json(),
            (json{{"exec_info", {{"queue_remaining", 0}}}}));
  ws_client ws(*port, "in-process");
  ASSERT_TRUE(ws.next());
  const auto queued = request(*port, http::verb::post, "/api/prompt",
                              json{{"prompt", quick_prompt}, {"client_id", "in-process"}}.dump());
  ASSERT_EQ(queued.status, 200u) << queued.body;
  const std::string id = queued.json()["prompt_id"];
  EXPECT_TRUE(heard(ws.until_prompt_end(id), "execution_success"));
  EXPECT_EQ(request(*port, http::verb::get, "/history/" + id).json()[id]["status"]["status_str"],
            "success");
  EXPECT_EQ(request(*port, http::verb::get, "/orch/status").status, 200u);  // the live views'
  EXPECT_EQ(request(*port, http::verb::delete_, "/prompt").status, 405u);
  EXPECT_EQ(request(*port, http::verb::post, "/metrics").status, 405u);
  EXPECT_EQ(request(*port, http::verb::get, "/nowhere").status, 404u);

  (*server)->stop();
  EXPECT_FALSE(host_->stopped());
}

// The checks serve makes before any worker starts are the server's, whoever made its config.
TEST_F(serve_test, a_config_no_server_could_serve_with_is_refused_before_anything_starts) {
  const auto deployment = prepared(write_deployment());
  serve_config config = test_config();
  config.max_upload = config.http.max_spooled_in_flight;  // past one client's half
  auto refused = serve_server::prepare(config, deployment, "test");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.err().code, orch::serve::serve_errc::invalid_config);
  EXPECT_NE(refused.err().message.find("fix: raise --max-uploads-in-flight"), std::string::npos)
      << refused.err().message;

  config = test_config();
  config.front_end_root = dir_;  // no index.html there
  refused = serve_server::prepare(config, deployment, "test");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.err().code, orch::serve::serve_errc::invalid_config);
  EXPECT_NE(refused.err().message.find("holds no index.html"), std::string::npos);
}

}  // namespace
