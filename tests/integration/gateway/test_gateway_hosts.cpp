// `comfy-orch gateway`'s hosts (gateway_fixture.hpp): the Ray driver's source, the fleet secret,
// a host whose fingerprint differs, and a host killed mid-prompt.
#include "../cli/command_runner.hpp"
#include "gateway_fixture.hpp"

namespace orch::serve_testing {
namespace {

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

// A host that stops answering (SIGSTOP: its connections accepted, nothing answered) while its
// prompt was on its way, before any node of it ran: the prompt stays the host's (it may have it:
// test_gateway_restart.cpp) until the host is known gone (killed: nothing listens there), then
// goes back to the queue at its place and runs on another host, and its client hears no error.
TEST_F(gateway_test, a_prompt_whose_host_stops_answering_runs_elsewhere_once_the_host_is_gone) {
  ws_client client(gateway_->port(), "s");
  for (auto& h : hosts_) ::kill(h->pid(), SIGSTOP);
  const std::string id = queue_at_gateway(quick_prompt, "s");
  std::string first;
  ASSERT_TRUE(wait_until([&] { return !(first = host_of(id)).empty(); }));
  // Every host is found not answering, and the prompt is still the first host's.
  ASSERT_TRUE(wait_until([&] { return up_hosts().empty(); }));
  const json q = gateway_->get("/queue").json();
  ASSERT_EQ(q["queue_running"].size(), 1u) << q.dump();
  EXPECT_EQ(q["queue_running"][0][1], id);
  const auto index = static_cast<std::size_t>(std::stoi(first.substr(first.find('-') + 1)));
  ::kill(hosts_[index]->pid(), SIGKILL);
  hosts_[index].reset();
  for (auto& h : hosts_)
    if (h) ::kill(h->pid(), SIGCONT);
  const json entry = finished_at_gateway(id);
  ASSERT_FALSE(entry.is_null());
  EXPECT_EQ(entry["status"]["status_str"], "success") << entry.dump();
  EXPECT_NE(host_of(id), first);
  const auto heard = events_of(client, {id});
  ASSERT_TRUE(heard.count(id));
  EXPECT_FALSE(serve_test::heard(heard.at(id), "execution_error"));
  EXPECT_TRUE(serve_test::heard(heard.at(id), "execution_success"));
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

// A host is another machine, and what it sends is untrusted (hostile_host.py): an event nested
// 100,000 deep, an event whose type is a number, a prompt's event nested as deep, and a history
// entry that is no object. The gateway goes on answering, ends that host's prompt with an error
// naming the host, and its client hears so; an /extensions list with a path outside
// /extensions/ is refused naming the host, /system_stats takes 64 of its 10,000 devices and none
// with a name of 100 KiB, and its /free answer nested 100,000 deep is an error of that host.
TEST_F(gateway_test, a_hostile_host_cannot_bring_the_gateway_down) {
  const fs::path port_file = dir_ / "hostile.port";
  const auto started = orch::testing::run_command(
      "/usr/bin/python3 '" + std::string(ORCH_TEST_HOSTILE_HOST) + "' '" + port_file.string() +
      "' > '" + (dir_ / "hostile.log").string() + "' 2>&1 & echo $!");
  ASSERT_EQ(started.exit_code, 0) << started.err;
  const pid_t hostile = static_cast<pid_t>(std::stol(started.out));
  ASSERT_TRUE(wait_until([&] { return fs::exists(port_file); }));
  std::ifstream in(port_file);
  std::string port;
  in >> port;
  start_gateway("[gateway]\nsecret_file = \"fleet.secret\"\n\n[[host]]\nurl = \"http://127.0.0.1:" +
                port + "\"\n");
  ASSERT_TRUE(wait_until([&] { return up_hosts().size() == 1; }));
  ws_client client(gateway_->port(), "c");
  ASSERT_TRUE(client.next());
  const std::string id =
      queue_at_gateway({{"1", {{"class_type", "TestSleep"}, {"inputs", {{"ms", 1}}}}}}, "c");
  const json entry = finished_at_gateway(id);
  EXPECT_EQ(entry["status"]["status_str"], "error") << entry.dump();
  EXPECT_NE(entry.dump().find("host-0 ended the prompt but its history entry could not be read"),
            std::string::npos)
      << entry.dump();
  EXPECT_EQ(gateway_->get("/queue").status, 200u) << "the gateway still answers";
  // What it proxies or gathers from the host is taken only in ComfyUI's shapes, capped.
  const auto listed = gateway_->get("/extensions");
  EXPECT_EQ(listed.status, 502u) << listed.body;
  EXPECT_NE(listed.body.find("host-0"), std::string::npos) << listed.body;
  const json stats = gateway_->get("/system_stats").json();
  EXPECT_EQ(stats["devices"].size(), 64u);
  for (const auto& d : stats["devices"])
    EXPECT_LT(d["name"].get<std::string>().size(), 300u);
  const json freed = gateway_->post("/free", {{"free_memory", true}}).json();
  EXPECT_TRUE(freed["orch_hosts"]["host-0"].contains("error")) << freed.dump();
  ::kill(hostile, SIGKILL);
}

}  // namespace
}  // namespace orch::serve_testing
