// The gateway tests' fixture (test_gateway.cpp, test_gateway_hosts.cpp): three real `comfy-orch
// serve` hosts on sim devices, each started with the fleet's secret, and a `comfy-orch gateway`
// process over them, named in a static [[host]] list (docs/fleet.md, "The gateway"). Every wait is
// a hang guard (wait_until.hpp); what the tests assert is what they waited for, never how long it
// took.
#pragma once

#include <gtest/gtest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <fstream>
#include <map>
#include <set>

#include "serve_fixture.hpp"

namespace orch::serve_testing {

namespace fs = std::filesystem;

// A `comfy-orch gateway FLEET --port 0` child, its port read from its "listening on" line, and
// stopped with SIGTERM as an operator stops it (its Ray driver, if any, stops with it).
class gateway_process : public orch::testing::serve_process {
 public:
  explicit gateway_process(const std::string& fleet)
      : serve_process(ORCH_TEST_COMFY_ORCH, "gateway", fleet, {}) {}
  ~gateway_process() {
    if (pid() != 0) stop();
  }
};

// The fleet's secret: every host is started with it and the gateway sends it.
inline const std::string fleet_secret = "gateway-test-secret-0123456789abcdefghijklmnopqrstuvwxyz";

class gateway_test : public serve_test {
 protected:
  void SetUp() override {
    serve_test::SetUp();
    secret_ = dir_ / "fleet.secret";
    write(secret_, fleet_secret + "\n");
    fs::permissions(secret_, fs::perms::owner_read | fs::perms::owner_write);
    before_hosts();
    for (std::size_t i = 0; i < 3; ++i) {
      hosts_.push_back(start_host(i));
      ASSERT_NE(hosts_.back()->port(), 0);
    }
    start_gateway(fleet_file(hosts_));
    // Until every host is up at the gateway (its stream open and its report read).
    ASSERT_TRUE(wait_until([&] { return up_hosts().size() == 3; }));
  }
  // What a test's fixture writes into dir_ before the hosts start (a pack's web directory).
  virtual void before_hosts() {}
  std::unique_ptr<serve_process> host(const orch::runtime_testing::deployment_options& o = {}) {
    return serve({"--fleet-secret-file", secret_.string()}, o);
  }
  // The fixture's host `index` (a test may give each its own deployment: test_gateway_files.cpp).
  virtual std::unique_ptr<serve_process> start_host(std::size_t /*index*/) { return host(); }
  // A fleet file naming `hosts` (and `gateway_lines` in [gateway], after the secret's).
  std::string fleet_file(const std::vector<std::unique_ptr<serve_process>>& hosts,
                         const std::string& gateway_lines = {},
                         const std::string& secret_file = "fleet.secret") const {
    std::string fleet = "[gateway]\nsecret_file = \"" + secret_file + "\"\n" + gateway_lines + "\n";
    for (const auto& h : hosts)
      fleet += "[[host]]\nurl = \"http://127.0.0.1:" + std::to_string(h->port()) + "\"\n\n";
    return fleet;
  }
  void start_gateway(const std::string& fleet) {
    gateway_.reset();
    write(dir_ / "fleet.toml", fleet);
    gateway_ = std::make_unique<gateway_process>((dir_ / "fleet.toml").string());
    ASSERT_NE(gateway_->port(), 0) << "the gateway did not print its 'listening on' line";
  }
  std::set<std::string> up_hosts() const {
    std::set<std::string> up;
    const json fleet_doc = gateway_->get("/orch/fleet").json();
    for (const auto& h : fleet_doc["hosts"])
      if (h["up"].get<bool>()) up.insert(h["name"].get<std::string>());
    return up;
  }
  void TearDown() override {
    gateway_.reset();
    for (auto& h : hosts_)
      if (h) h->stop();
    hosts_.clear();
    serve_test::TearDown();
  }

  std::string queue_at_gateway(const json& prompt, const std::string& client,
                               const json& extra = json::object()) {
    json body = {{"prompt", prompt}, {"client_id", client}};
    body.update(extra);
    const auto r = gateway_->post("/prompt", body);
    EXPECT_EQ(r.status, 200u) << r.body;
    return r.json().value("prompt_id", "");
  }
  json gateway_history_of(const std::string& id) const {
    return gateway_->get("/history/" + id).json().value(id, json());
  }
  json finished_at_gateway(const std::string& id) const {
    json entry;
    wait_until([&] { return !(entry = gateway_history_of(id)).is_null(); });
    return entry;
  }
  // The host the gateway gave `prompt_id` to, from its placement decisions ("" if none).
  std::string host_of(const std::string& prompt_id) const {
    std::string host;
    const json fleet_doc =
        gateway_->get("/orch/fleet").json();  // not a range over a temporary's member
    for (const auto& d : fleet_doc["decisions"])
      if (d["prompt_id"] == prompt_id && d["decision"] == "run") host = d["host"];
    return host;
  }
  // What `client` hears until every prompt of `ids` has ended (its `executing` for no node).
  static std::map<std::string, std::vector<json>> events_of(ws_client& client,
                                                            std::set<std::string> ids) {
    std::map<std::string, std::vector<json>> seen;
    while (!ids.empty()) {
      auto m = client.next();
      if (!m) break;  // the hang guard of next()
      const json& data = (*m)["data"];
      if (!data.is_object() || !data.contains("prompt_id")) continue;
      const std::string id = data["prompt_id"];
      seen[id].push_back(*m);
      if ((*m)["type"] == "executing" && data["node"].is_null()) ids.erase(id);
    }
    return seen;
  }
  static std::vector<std::string> types_of(const std::vector<json>& events) {
    std::vector<std::string> types;
    for (const auto& e : events) types.push_back(e["type"]);
    return types;
  }

  fs::path secret_;
  std::vector<std::unique_ptr<serve_process>> hosts_;
  std::unique_ptr<gateway_process> gateway_;
};

}  // namespace orch::serve_testing
