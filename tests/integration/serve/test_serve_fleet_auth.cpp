// `comfy-orch serve --fleet-secret-file` (issue 58; docs/security.md, "Fleet hosts"): a fleet
// host answers only requests that carry `Authorization: Bearer <secret>`, WebSocket upgrades
// included, and refuses to start without a secret file fit to hold one.
#include <gtest/gtest.h>

#include "../cli/command_runner.hpp"
#include "serve_fixture.hpp"

namespace {

using namespace orch::serve_testing;
namespace fs = std::filesystem;
using fields = std::vector<std::pair<std::string, std::string>>;

// 54 bytes, written as the operator's `base64` would end it: with a newline.
const std::string fleet_secret = "fleet-test-secret-0123456789abcdefghijklmnopqrstuvwxyz";

fields bearer(const std::string& token) { return {{"Authorization", "Bearer " + token}}; }

class fleet_host_test : public serve_test {
 protected:
  // `text` in dir_/fleet.secret, with `mode`.
  fs::path secret_file(const std::string& text, fs::perms mode = fs::perms::owner_read |
                                                                 fs::perms::owner_write) {
    const fs::path file = dir_ / "fleet.secret";
    write(file, text);
    fs::permissions(file, mode);
    return file;
  }
  std::unique_ptr<serve_process> host() {
    return serve({"--fleet-secret-file", secret_file(fleet_secret + "\n").string()});
  }
  // `comfy-orch serve` with `file` as its secret, which must refuse to start (bounded, so that
  // a server that did start fails the test instead of hanging it).
  orch::testing::command_result start_with(const fs::path& file) {
    return orch::testing::run_command("/usr/bin/timeout 120 " + std::string(ORCH_TEST_COMFY_ORCH) +
                                      " serve '" + write_deployment().string() +
                                      "' --port 0 --fleet-secret-file '" + file.string() + "'");
  }
  static orch::testing::reply as_gateway(const serve_process& s, http::verb method,
                                         const std::string& target, std::string body = {}) {
    return s.send(method, target, std::move(body), "application/json", false,
                  bearer(fleet_secret));
  }
  // The status of a WebSocket upgrade of /ws carrying `extra` header lines.
  static unsigned upgrade_status(const serve_process& s, const std::string& extra) {
    boost::asio::io_context io;
    auto sock = connect_from(io, s);
    boost::asio::write(*sock, boost::asio::buffer(
                                  "GET /ws?clientId=u HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                  "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                                  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                                  "Sec-WebSocket-Version: 13\r\n" +
                                  extra + "\r\n"));
    orch::testing::beast::flat_buffer buffer;
    http::response_parser<http::empty_body> parser;
    parser.skip(true);  // a 101 has no body; a refusal's is not needed here
    http::read_header(*sock, buffer, parser);
    return parser.get().result_int();
  }
  // Asserts `r` is the fleet host's 401: serve's error shape, naming what is missing.
  static void expect_refused(const orch::testing::reply& r, const std::string& reason) {
    EXPECT_EQ(r.status, 401u) << r.body;
    EXPECT_EQ(r.header("www-authenticate"), "Bearer realm=\"comfy-orch-fleet\"");
    ASSERT_EQ(r.header("content-type"), "application/json") << r.body;
    const std::string error = r.json().value("error", "");
    EXPECT_EQ(error.rfind("this server is a comfy-orch fleet host and answers only its gateway: ",
                          0),
              0u)
        << error;
    EXPECT_NE(error.find(reason), std::string::npos) << error;
    EXPECT_EQ(error.find(fleet_secret), std::string::npos) << "the secret must not be told";
  }
  static void expect_no_start(const orch::testing::command_result& r, const fs::path& file,
                              const std::string& what) {
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.err.find("--fleet-secret-file " + file.string() + " " + what), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("fix:"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("listening"), std::string::npos) << r.out;
  }
};

TEST_F(fleet_host_test, a_host_answers_requests_and_websockets_that_carry_the_secret) {
  auto s = host();
  const auto info = as_gateway(*s, http::verb::get, "/object_info");
  EXPECT_EQ(info.status, 200u) << info.body;
  EXPECT_TRUE(info.json().contains("SolidImage")) << info.body.substr(0, 300);
  const auto queued = as_gateway(*s, http::verb::post, "/prompt",
                                 json{{"prompt", quick_prompt}}.dump());
  ASSERT_EQ(queued.status, 200u) << queued.body;
  const std::string id = queued.json()["prompt_id"];
  json entry;
  EXPECT_TRUE(wait_until([&] {
    entry = as_gateway(*s, http::verb::get, "/history/" + id).json().value(id, json());
    return !entry.is_null();
  }));
  EXPECT_EQ(entry["status"]["status_str"], "success") << entry.dump();
  ws_client gateway(s->port(), "gateway", {}, "/ws", bearer(fleet_secret));
  const auto hello = gateway.next();
  ASSERT_TRUE(hello);
  EXPECT_EQ((*hello)["type"], "status");
  EXPECT_EQ(s->stop(), 0);
}

// Every route alike, the frontend's files, /orch/* and /metrics included.
TEST_F(fleet_host_test, a_host_refuses_a_request_without_the_secret_on_every_route) {
  auto s = host();
  for (const char* target : {"/object_info", "/", "/metrics", "/orch/status", "/queue"}) {
    SCOPED_TRACE(target);
    expect_refused(s->get(target), "the request has no Authorization header");
  }
  const auto prompt = s->post("/prompt", {{"prompt", quick_prompt}});
  expect_refused(prompt, "the request has no Authorization header");
  EXPECT_EQ(as_gateway(*s, http::verb::get, "/history").json(), json::object())
      << "the refused prompt must not run";
  EXPECT_EQ(s->stop(), 0);
}

TEST_F(fleet_host_test, a_host_refuses_a_wrong_secret) {
  auto s = host();
  expect_refused(s->send(http::verb::get, "/object_info", "", "application/json", false,
                         bearer("fleet-test-secret-9876543210zyxwvutsrqponmlkjihgfedcba")),
                 "its Bearer token is not the fleet's secret");
  EXPECT_EQ(s->stop(), 0);
}

TEST_F(fleet_host_test, a_host_refuses_a_prefix_of_the_secret) {
  auto s = host();
  for (const std::size_t length : {std::size_t{0}, std::size_t{1}, std::size_t{40},
                                   fleet_secret.size() - 1}) {
    SCOPED_TRACE(length);
    expect_refused(s->send(http::verb::get, "/object_info", "", "application/json", false,
                           bearer(fleet_secret.substr(0, length))),
                   "its Bearer token is not the fleet's secret");
  }
  expect_refused(s->send(http::verb::get, "/object_info", "", "application/json", false,
                         bearer(fleet_secret + "x")),
                 "its Bearer token is not the fleet's secret");
  EXPECT_EQ(s->stop(), 0);
}

TEST_F(fleet_host_test, a_host_refuses_the_secret_under_another_scheme) {
  auto s = host();
  for (const std::string& value :
       {"Basic " + fleet_secret, "Token " + fleet_secret, fleet_secret}) {
    SCOPED_TRACE(value);
    expect_refused(s->send(http::verb::get, "/object_info", "", "application/json", false,
                           {{"Authorization", value}}),
                   "its Authorization header is not of the Bearer scheme");
  }
  EXPECT_EQ(s->stop(), 0);
}

TEST_F(fleet_host_test, a_host_refuses_a_websocket_upgrade_without_the_secret) {
  auto s = host();
  EXPECT_EQ(upgrade_status(*s, ""), 401u);
  EXPECT_EQ(upgrade_status(*s, "Authorization: Bearer " + fleet_secret.substr(0, 40) + "\r\n"),
            401u);
  EXPECT_EQ(upgrade_status(*s, "Authorization: Basic " + fleet_secret + "\r\n"), 401u);
  EXPECT_THROW(ws_client(s->port(), "stranger"), boost::system::system_error);
  EXPECT_EQ(upgrade_status(*s, "Authorization: Bearer " + fleet_secret + "\r\n"), 101u);
  EXPECT_EQ(s->stop(), 0);
}

// A stranger's body is never read: a 1 GiB Content-Length gets 401, not the 413 a gateway's
// would get once its header passed.
TEST_F(fleet_host_test, a_host_refuses_a_stranger_before_its_body_is_read) {
  auto s = host();
  boost::asio::io_context io;
  auto sock = connect_from(io, *s);
  boost::asio::write(*sock, boost::asio::buffer(std::string(
                                "POST /prompt HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                "Content-Type: application/json\r\nContent-Length: 1073741824\r\n"
                                "\r\n{\"prompt\":")));
  orch::testing::beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(*sock, buffer, res);
  EXPECT_EQ(res.result_int(), 401) << res.body();
  EXPECT_EQ(s->stop(), 0);
}

TEST_F(fleet_host_test, serve_refuses_to_start_with_a_secret_file_others_can_read) {
  const auto file = secret_file(fleet_secret + "\n", fs::perms::owner_read |
                                                         fs::perms::owner_write |
                                                         fs::perms::group_read |
                                                         fs::perms::others_read);
  const auto r = start_with(file);
  expect_no_start(r, file, "is open to group or others (mode 0644)");
  EXPECT_NE(r.err.find("fix: chmod 600 " + file.string()), std::string::npos) << r.err;
}

TEST_F(fleet_host_test, serve_refuses_to_start_with_an_empty_secret_file) {
  const auto file = secret_file("\n");
  expect_no_start(start_with(file), file, "is empty");
}

TEST_F(fleet_host_test, serve_refuses_to_start_with_a_short_secret) {
  const auto file = secret_file(fleet_secret.substr(0, 31) + "\n");
  expect_no_start(start_with(file), file, "holds 31 bytes; a fleet's secret has at least 32");
}

TEST_F(fleet_host_test, serve_refuses_to_start_with_a_missing_secret_file) {
  const fs::path file = dir_ / "no-such.secret";
  const auto r = start_with(file);
  expect_no_start(r, file, "does not exist");
  EXPECT_NE(r.err.find("head -c 32 /dev/urandom | base64 > " + file.string()), std::string::npos)
      << r.err;
}

}  // namespace
