// `comfy-orch gateway` in front of three real `comfy-orch serve` hosts on sim devices, named in a
// static [[host]] list (docs/fleet.md, "The gateway"). Every wait is a hang guard (wait_until.hpp);
// what the tests assert is what they waited for, never how long it took.
#include <gtest/gtest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <fstream>
#include <map>
#include <set>

#include "serve_fixture.hpp"

namespace orch::serve_testing {
namespace {

namespace fs = std::filesystem;

// A `comfy-orch gateway FLEET --port 0` child, its port read from its "listening on" line.
class gateway_process {
 public:
  explicit gateway_process(const std::string& fleet) {
    std::vector<std::string> args = {ORCH_TEST_COMFY_ORCH, "gateway", fleet, "--port", "0"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int out[2];
    if (::pipe(out) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    if (posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ) != 0) pid_ = 0;
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    out_ = ::fdopen(out[0], "r");
    char line[512];
    if (pid_ != 0 && out_ != nullptr && std::fgets(line, sizeof line, out_) != nullptr) {
      const std::string l(line);
      const auto colon = l.rfind(':');
      if (l.find("listening on http://") != std::string::npos && colon != std::string::npos)
        port_ = static_cast<unsigned short>(std::stoi(l.substr(colon + 1)));
    }
  }
  ~gateway_process() {
    if (pid_ != 0) {
      ::kill(pid_, SIGTERM);
      int st = 0;
      ::waitpid(pid_, &st, 0);
    }
    if (out_ != nullptr) std::fclose(out_);
  }
  gateway_process(const gateway_process&) = delete;
  gateway_process& operator=(const gateway_process&) = delete;

  unsigned short port() const { return port_; }
  orch::testing::reply get(const std::string& target) const {
    return orch::testing::request(port_, http::verb::get, target);
  }
  orch::testing::reply post(const std::string& target, const json& body) const {
    return orch::testing::request(port_, http::verb::post, target, body.dump());
  }

 private:
  pid_t pid_ = 0;
  FILE* out_ = nullptr;
  unsigned short port_ = 0;
};

// The fleet's secret: every host is started with it and the gateway sends it.
const std::string fleet_secret = "gateway-test-secret-0123456789abcdefghijklmnopqrstuvwxyz";

class gateway_test : public serve_test {
 protected:
  void SetUp() override {
    serve_test::SetUp();
    secret_ = dir_ / "fleet.secret";
    write(secret_, fleet_secret + "\n");
    fs::permissions(secret_, fs::perms::owner_read | fs::perms::owner_write);
    for (int i = 0; i < 3; ++i) {
      hosts_.push_back(host());
      ASSERT_NE(hosts_.back()->port(), 0);
    }
    start_gateway(fleet_file(hosts_));
    // Until every host is up at the gateway (its stream open and its report read).
    ASSERT_TRUE(wait_until([&] { return up_hosts().size() == 3; }));
  }
  std::unique_ptr<serve_process> host(const orch::runtime_testing::deployment_options& o = {}) {
    return serve({"--fleet-secret-file", secret_.string()}, o);
  }
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

TEST_F(gateway_test, prompts_run_on_several_hosts_and_each_client_hears_its_own_in_order) {
  ws_client alice(gateway_->port(), "alice");
  ws_client bob(gateway_->port(), "bob");
  ASSERT_EQ(alice.next()->value("type", ""), "status");
  ASSERT_EQ(bob.next()->value("type", ""), "status");
  std::set<std::string> alices, bobs;
  for (int i = 0; i < 6; ++i) {
    const json p = i % 2 == 0 ? sleep_prompt(800) : quick_prompt;
    (i % 2 == 0 ? alices : bobs).insert(queue_at_gateway(p, i % 2 == 0 ? "alice" : "bob"));
  }
  const auto heard_by_alice = events_of(alice, alices);
  const auto heard_by_bob = events_of(bob, bobs);
  for (const auto& [heard, ids] :
       {std::pair{heard_by_alice, alices}, std::pair{heard_by_bob, bobs}}) {
    ASSERT_EQ(heard.size(), ids.size());
    for (const auto& id : ids) {
      ASSERT_TRUE(heard.count(id)) << id;
      const auto types = types_of(heard.at(id));
      EXPECT_EQ(types.front(), "execution_start") << id;
      EXPECT_EQ(types.back(), "executing") << id;
      EXPECT_NE(std::find(types.begin(), types.end(), "execution_success"), types.end()) << id;
    }
  }
  for (const auto& id : bobs) EXPECT_FALSE(heard_by_alice.count(id)) << "alice heard bob's " << id;
  std::set<std::string> hosts_used;
  for (const auto& ids : {alices, bobs})
    for (const auto& id : ids) {
      const json entry = finished_at_gateway(id);
      ASSERT_FALSE(entry.is_null()) << id;
      EXPECT_EQ(entry["status"]["status_str"], "success") << entry.dump();
      EXPECT_EQ(entry["prompt"][1], id);
      hosts_used.insert(host_of(id));
    }
  EXPECT_GE(hosts_used.size(), 2u)
      << "every prompt ran on one host: " << gateway_->get("/orch/fleet").body;
  EXPECT_EQ(gateway_->get("/history").json().size(), 6u);
}

TEST_F(gateway_test, the_queue_shows_running_prompts_and_front_and_delete_work_on_pending_ones) {
  std::vector<std::string> long_ones;
  for (int i = 0; i < 3; ++i) long_ones.push_back(queue_at_gateway(sleep_prompt(2500), "c"));
  // Each host runs one of the three: all three run, none waits.
  ASSERT_TRUE(wait_until([&] {
    const json q = gateway_->get("/queue").json();
    return q["queue_running"].size() == 3 && q["queue_pending"].empty();
  }));
  const std::string later = queue_at_gateway(quick_prompt, "c");
  const std::string doomed = queue_at_gateway(quick_prompt, "c");
  const std::string first = queue_at_gateway(quick_prompt, "c", {{"front", true}});
  json q = gateway_->get("/queue").json();
  ASSERT_EQ(q["queue_pending"].size(), 3u) << q.dump();
  EXPECT_EQ(q["queue_pending"][0][1], first);
  EXPECT_LT(q["queue_pending"][0][0].get<double>(), 0);
  EXPECT_EQ(q["queue_pending"][1][1], later);
  EXPECT_EQ(q["queue_pending"][2][1], doomed);
  EXPECT_EQ(gateway_->post("/queue", {{"delete", {doomed}}}).status, 200u);
  q = gateway_->get("/queue").json();
  ASSERT_EQ(q["queue_pending"].size(), 2u);
  EXPECT_EQ(q["queue_pending"][0][1], first);
  EXPECT_EQ(q["queue_pending"][1][1], later);
  for (const auto& id : {first, later}) EXPECT_FALSE(finished_at_gateway(id).is_null()) << id;
  for (const auto& id : long_ones) EXPECT_FALSE(finished_at_gateway(id).is_null()) << id;
  EXPECT_TRUE(gateway_history_of(doomed).is_null());
  EXPECT_TRUE(wait_until(
      [&] { return gateway_->get("/prompt").json()["exec_info"]["queue_remaining"] == 0; }));
}

TEST_F(gateway_test, a_prompt_naming_a_class_no_host_has_is_refused_naming_it) {
  const json p = {{"1", {{"class_type", "NoSuchNodeAnywhere"}, {"inputs", json::object()}}},
                  {"2", {{"class_type", "TestSleep"}, {"inputs", {{"ms", 1}}}}}};
  const auto r = gateway_->post("/prompt", {{"prompt", p}, {"client_id", "c"}});
  EXPECT_EQ(r.status, 400u);
  const json body = r.json();
  EXPECT_EQ(body["error"]["type"], "missing_node_type");
  EXPECT_NE(body["error"]["message"].get<std::string>().find("NoSuchNodeAnywhere"),
            std::string::npos)
      << r.body;
  EXPECT_EQ(body["error"]["extra_info"]["orch_missing_classes"],
            json::array({"NoSuchNodeAnywhere"}));
  EXPECT_TRUE(body["node_errors"].is_object());
  EXPECT_EQ(gateway_->get("/prompt").json()["exec_info"]["queue_remaining"], 0);
}

TEST_F(gateway_test, object_info_is_a_hosts_answer) {
  const auto all = gateway_->get("/object_info");
  ASSERT_EQ(all.status, 200u);
  EXPECT_TRUE(all.json().contains("TestSleep"));
  EXPECT_TRUE(all.json().contains("SolidImage"));
  const auto one = gateway_->get("/object_info/TestSleep");
  ASSERT_EQ(one.status, 200u);
  EXPECT_EQ(one.json().size(), 1u);
  EXPECT_TRUE(one.json().contains("TestSleep"));
}

TEST_F(gateway_test, interrupt_of_a_prompt_stops_it_on_its_host_and_leaves_the_others_running) {
  ws_client client(gateway_->port(), "i");
  const std::string slow = queue_at_gateway(sleep_prompt(60000), "i");
  const std::string other = queue_at_gateway(sleep_prompt(1500), "i");
  std::set<std::string> started;
  while (started.size() < 2) {
    auto m = client.next();
    ASSERT_TRUE(m.has_value()) << "a prompt's node never started";
    if ((*m)["type"] == "executing" && (*m)["data"]["node"].is_string())
      started.insert((*m)["data"]["prompt_id"].get<std::string>());
  }
  EXPECT_EQ(gateway_->post("/interrupt", {{"prompt_id", "not-a-running-one"}}).status, 200u);
  EXPECT_EQ(gateway_->post("/interrupt", {{"prompt_id", slow}}).status, 200u);
  const auto heard = events_of(client, {slow, other});
  ASSERT_TRUE(heard.count(slow));
  EXPECT_TRUE(serve_test::heard(heard.at(slow), "execution_interrupted"));
  ASSERT_TRUE(heard.count(other));
  EXPECT_TRUE(serve_test::heard(heard.at(other), "execution_success"));
  EXPECT_FALSE(serve_test::heard(heard.at(other), "execution_interrupted"));
  EXPECT_FALSE(finished_at_gateway(slow).is_null());
}

// The Ray host source's half of the driver's protocol (host_source.hpp), with a stand-in for
// comfy_orch.fleet.driver in [ray] python: a shell script that says the three running hosts are
// up in the driver's JSON lines (with a line that is no event and one past the line cap among
// them), writes to its stderr, says host-1 is down when the test asks, and stops at the end of
// its stdin. Ray itself is not started here: the driver's own tests are Ray's side.
TEST_F(gateway_test,
       hosts_the_ray_driver_reports_come_and_go_and_the_driver_stops_with_the_gateway) {
  gateway_.reset();  // the fixture's, over the [[host]] list
  const fs::path driver = dir_ / "stand-in-driver.sh";
  std::string ups;
  for (std::size_t i = 0; i < hosts_.size(); ++i)
    ups += "echo '{\"event\":\"host_up\",\"host\":\"host-" + std::to_string(i) +
           "\",\"node_id\":\"n\",\"node_ip\":\"127.0.0.1\",\"url\":\"http://127.0.0.1:" +
           std::to_string(hosts_[i]->port()) + "\",\"pid\":1,\"restarts\":0}'\n";
  write(driver,
        "#!/bin/bash\n"
        "echo \"$@\" > '" +
            (dir_ / "driver-args").string() +
            "'\n"
            "echo $$ > '" +
            (dir_ / "driver-pid").string() +
            "'\n"
            "echo 'not an event'\n"
            "head -c 70000 /dev/zero | tr '\\0' x; echo\n"
            "echo 'starting 3 hosts' >&2\n" +
            ups +
            "while true; do\n"
            "  if read -t 0.05 line; then continue; elif [ $? -le 128 ]; then break; fi\n"
            "  if [ -f '" +
            (dir_ / "down").string() +
            "' ]; then\n"
            "    rm '" +
            (dir_ / "down").string() +
            "'\n"
            "    echo "
            "'{\"event\":\"host_down\",\"host\":\"host-1\",\"node_id\":\"n\",\"reason\":\"node "
            "removed\"}'\n"
            "  fi\n"
            "done\n"
            "echo stopped > '" +
            (dir_ / "driver-stopped").string() + "'\n");
  fs::permissions(driver, fs::perms::owner_all);
  write(dir_ / "ray-fleet.toml",
        "[gateway]\nsecret_file = \"fleet.secret\"\n\n[ray]\n"
        "address = \"127.0.0.1:6379\"\npython = \"stand-in-driver.sh\"\n"
        "hosts = 3\ndeployment = \"deployment.toml\"\n");
  gateway_ = std::make_unique<gateway_process>((dir_ / "ray-fleet.toml").string());
  ASSERT_NE(gateway_->port(), 0);
  ASSERT_TRUE(wait_until([&] { return up_hosts().size() == 3; }));
  const json fleet_doc = gateway_->get("/orch/fleet").json();
  for (const auto& h : fleet_doc["hosts"]) EXPECT_EQ(h["pid"], 1) << h.dump();  // the driver's
  std::ifstream args_file(dir_ / "driver-args");
  std::string args;
  std::getline(args_file, args);
  EXPECT_EQ(args,
            "-m comfy_orch.fleet.driver --ray-address 127.0.0.1:6379 --hosts 3 --deployment " +
                (dir_ / "deployment.toml").string() + " --comfy-orch " +
                std::string(ORCH_TEST_COMFY_ORCH) + " --resource comfy_orch_host --secret-file " +
                (dir_ / "fleet.secret").string());
  const std::string id = queue_at_gateway(quick_prompt, "r");
  EXPECT_EQ(finished_at_gateway(id)["status"]["status_str"], "success");

  write(dir_ / "down", "");
  ASSERT_TRUE(wait_until([&] { return up_hosts() == std::set<std::string>{"host-0", "host-2"}; }));
  std::ifstream pid_file(dir_ / "driver-pid");
  pid_t driver_pid = 0;
  pid_file >> driver_pid;
  ASSERT_GT(driver_pid, 0);
  gateway_.reset();  // SIGTERM, then reaped
  std::ifstream stopped(dir_ / "driver-stopped");
  std::string said;
  stopped >> said;
  EXPECT_EQ(said, "stopped") << "the driver did not see the end of its input";
  EXPECT_NE(::kill(driver_pid, 0), 0) << "the driver outlived the gateway";
}

TEST_F(gateway_test, a_gateway_without_the_fleets_secret_gets_no_host_and_says_why) {
  write(dir_ / "wrong.secret", "not-the-fleet-secret-0123456789abcdefghijklmnopqrstuvwxyz\n");
  fs::permissions(dir_ / "wrong.secret", fs::perms::owner_read | fs::perms::owner_write);
  start_gateway(fleet_file(hosts_, {}, "wrong.secret"));
  json fleet_doc;
  ASSERT_TRUE(wait_until([&] {
    fleet_doc = gateway_->get("/orch/fleet").json();
    for (const auto& h : fleet_doc["hosts"])
      if (!h["error"].is_string()) return false;
    return fleet_doc["hosts"].size() == 3;
  })) << fleet_doc.dump();
  for (const auto& h : fleet_doc["hosts"]) {
    EXPECT_FALSE(h["up"].get<bool>());
    EXPECT_NE(h["error"].get<std::string>().find("HTTP 401"), std::string::npos) << h.dump();
  }
  // Its prompts wait: no host is up to run them.
  const std::string id = queue_at_gateway(quick_prompt, "c");
  EXPECT_EQ(gateway_->get("/queue").json()["queue_pending"][0][1], id);
}

TEST_F(gateway_test, a_host_whose_deployment_differs_is_refused_naming_the_difference) {
  const auto report = orch::testing::request(hosts_[0]->port(), http::verb::get, "/orch/fleet/host",
                                             {}, "application/json", false,
                                             {{"Authorization", "Bearer " + fleet_secret}});
  ASSERT_EQ(report.status, 200u) << report.body;
  const std::string fingerprint = report.json()["fingerprint"];
  orch::runtime_testing::deployment_options other;
  other.capacity = "1GiB";
  hosts_.push_back(host(other));
  ASSERT_NE(hosts_.back()->port(), 0);
  start_gateway(fleet_file(hosts_, "fingerprint = \"" + fingerprint + "\"\n"));
  json odd;
  ASSERT_TRUE(wait_until([&] {
    const json fleet_doc = gateway_->get("/orch/fleet").json();
    for (const auto& h : fleet_doc["hosts"])
      if (h["name"] == "host-3") odd = h;
    return up_hosts().size() == 4 && odd["refused"].is_string() &&
           odd["refused"].get<std::string>().find("differ") != std::string::npos;
  })) << odd.dump();
  EXPECT_NE(odd["refused"].get<std::string>().find("deployment"), std::string::npos) << odd.dump();
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(queue_at_gateway(quick_prompt, "c"));
  for (const auto& id : ids) {
    EXPECT_EQ(finished_at_gateway(id)["status"]["status_str"], "success") << id;
    EXPECT_NE(host_of(id), "host-3") << id;
  }
}

TEST_F(gateway_test, a_host_killed_mid_prompt_ends_that_prompt_naming_it_and_the_rest_finish) {
  ws_client client(gateway_->port(), "k");
  std::vector<std::string> running;
  for (int i = 0; i < 3; ++i) running.push_back(queue_at_gateway(sleep_prompt(4000), "k"));
  const std::string waiting_a = queue_at_gateway(quick_prompt, "k");
  const std::string waiting_b = queue_at_gateway(quick_prompt, "k");
  // Until a node of each running prompt has started on its host.
  std::set<std::string> started;
  while (started.size() < 3) {
    auto m = client.next();
    ASSERT_TRUE(m.has_value()) << "a running prompt's node never started";
    if ((*m)["type"] == "executing" && (*m)["data"]["node"].is_string())
      started.insert((*m)["data"]["prompt_id"].get<std::string>());
  }
  const std::string victim = running[1];
  const std::string host = host_of(victim);
  ASSERT_FALSE(host.empty());
  const int index = std::stoi(host.substr(host.find('-') + 1));
  ::kill(hosts_[static_cast<std::size_t>(index)]->pid(), SIGKILL);
  std::set<std::string> rest = {running[0], running[2], waiting_a, waiting_b};
  std::set<std::string> all = rest;
  all.insert(victim);
  const auto heard = events_of(client, all);
  ASSERT_TRUE(heard.count(victim));
  json error;
  for (const auto& e : heard.at(victim))
    if (e["type"] == "execution_error") error = e["data"];
  ASSERT_FALSE(error.is_null()) << "the victim's client heard no execution_error";
  EXPECT_EQ(error["exception_type"], "comfy_orch.HostLost");
  EXPECT_NE(error["exception_message"].get<std::string>().find(host), std::string::npos)
      << error.dump();
  const json lost = finished_at_gateway(victim);
  EXPECT_EQ(lost["status"]["status_str"], "error");
  for (const auto& id : rest) {
    const json entry = finished_at_gateway(id);
    ASSERT_FALSE(entry.is_null()) << id;
    EXPECT_EQ(entry["status"]["status_str"], "success") << id;
    if (id == waiting_a || id == waiting_b) {
      EXPECT_NE(host_of(id), host) << id;
    }
  }
  // The gateway keeps answering, and knows the host is down.
  EXPECT_EQ(gateway_->get("/prompt").status, 200u);
  const json fleet_doc = gateway_->get("/orch/fleet").json();
  for (const auto& h : fleet_doc["hosts"])
    if (h["name"] == host) {
      EXPECT_FALSE(h["up"].get<bool>());
    }
  hosts_[static_cast<std::size_t>(index)].reset();  // reaped
}

}  // namespace
}  // namespace orch::serve_testing
