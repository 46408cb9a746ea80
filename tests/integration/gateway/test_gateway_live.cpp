// The live views across the fleet (docs/fleet.md, "Live views across the fleet"), over real
// processes (gateway_fixture.hpp): `comfy-orch status|diverge --url` at the gateway list every
// host's processes labelled by host, /metrics at the gateway is every host's samples with a
// host label and passes prometheus_client's parser, a host killed is listed as down while the
// others answer, and a host whose live views are hostile (hostile_host.py) leaves the gateway
// answering. And --url's errors: nothing listening, a URL of another form.
#include <netinet/in.h>
#include <sys/socket.h>

#include "../cli/command_runner.hpp"
#include "gateway_fixture.hpp"

namespace orch::serve_testing {
namespace {

using orch::testing::run_command;

const std::set<std::string> three = {"host-0", "host-1", "host-2"};

std::set<std::string> keys_of(const json& object) {
  std::set<std::string> keys;
  if (object.is_object())
    for (const auto& [k, _] : object.items()) keys.insert(k);
  return keys;
}

class gateway_live_test : public gateway_test {
 protected:
  std::string url() const { return "http://127.0.0.1:" + std::to_string(gateway_->port()); }
  orch::testing::command_result cli(const std::string& args) const {
    return run_command(std::string(ORCH_TEST_COMFY_ORCH) + " " + args);
  }
  json cli_json(const std::string& args) const {
    const auto r = cli(args + " --url " + url() + " --json");
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.exit_code << r.err;
    return json::parse(r.out, nullptr, false);
  }
  // Runs prompts until each of the three hosts has run one (placement spreads them over free
  // hosts), so every host has a worker with calls.
  void run_on_every_host() {
    std::set<std::string> used;
    for (int round = 0; round < 5 && used.size() < 3; ++round) {
      std::vector<std::string> ids;
      for (int i = 0; i < 3; ++i) ids.push_back(queue_at_gateway(sleep_prompt(300), "c"));
      for (const auto& id : ids) {
        ASSERT_EQ(finished_at_gateway(id)["status"]["status_str"], "success") << id;
        used.insert(host_of(id));
      }
    }
    ASSERT_EQ(used, three) << gateway_->get("/orch/fleet").body;
  }
  // The env that ran the prompts: a worker with calls, on some host.
  static std::string worker_env(const json& fleet_status) {
    for (const auto& [host, doc] : fleet_status["hosts"].items())
      for (const auto& p : doc["processes"])
        if (p["mode"] == "worker" && p["calls"].get<int>() > 0) return p["process"];
    return {};
  }
  orch::testing::command_result check_metrics(const std::string& env,
                                              const std::string& hosts) const {
    return run_command("/usr/bin/python3 '" + std::string(ORCH_TEST_METRICS_CHECK) + "' " + url() +
                       "/metrics '" + env + "' " + hosts);
  }
};

TEST_F(gateway_live_test, status_diverge_and_metrics_at_the_gateway_cover_every_host_by_name) {
  run_on_every_host();
  const json status = cli_json("status");
  ASSERT_TRUE(status.is_object()) << status;
  EXPECT_EQ(keys_of(status["hosts"]), three) << status.dump();
  EXPECT_TRUE(status["unanswered"].empty()) << status.dump();
  for (const auto& [host, doc] : status["hosts"].items()) {
    std::set<std::string> modes;
    for (const auto& p : doc["processes"]) modes.insert(p["mode"].get<std::string>());
    EXPECT_TRUE(modes.count("worker")) << host << ": " << doc.dump();
  }
  const auto text = cli("status --url " + url());
  EXPECT_EQ(text.exit_code, 0) << text.err;
  for (const auto& h : three)
    EXPECT_NE(text.out.find("== " + h + " =="), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("PROCESS"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("3 hosts answered"), std::string::npos) << text.out;
  // Where prompts went and why, and each host's models and prompt.
  ASSERT_TRUE(status["fleet"]["hosts"].is_array()) << status.dump();
  EXPECT_EQ(status["fleet"]["hosts"].size(), 3u) << status.dump();
  EXPECT_FALSE(status["fleet"]["hosts"][0].contains("node_class_names")) << status.dump();
  EXPECT_FALSE(status["fleet"]["decisions"].empty()) << status.dump();
  EXPECT_LE(status["fleet"]["decisions"].size(), 10u);
  EXPECT_NE(text.out.find("== fleet =="), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("host-0  up  models: "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("recent placements:"), std::string::npos) << text.out;
  const std::string last = status["fleet"]["decisions"].back()["reason"];
  EXPECT_NE(text.out.find(last), std::string::npos) << text.out;

  // Diverge across the hosts answers, each host's document by its name.
  const auto diverge = cli("diverge --url " + url() + " --json");
  EXPECT_TRUE(diverge.exit_code == 0 || diverge.exit_code == 1) << diverge.exit_code << diverge.err;
  const json found = json::parse(diverge.out, nullptr, false);
  EXPECT_EQ(keys_of(found["hosts"]), three) << diverge.out;
  ASSERT_TRUE(found["divergent"].is_boolean()) << diverge.out;
  EXPECT_EQ(diverge.exit_code, found["divergent"].get<bool>() ? 1 : 0);
  const auto diverge_text = cli("diverge --url " + url());
  for (const auto& h : three)
    EXPECT_NE(diverge_text.out.find("== " + h + " =="), std::string::npos) << diverge_text.out;

  // /metrics: every host's samples with its label, each family once, and the gateway's own.
  const std::string env = worker_env(status);
  ASSERT_FALSE(env.empty()) << status.dump();
  const auto metrics = check_metrics(env, "host-0,host-1,host-2");
  EXPECT_EQ(metrics.exit_code, 0) << metrics.out << metrics.err;
  const std::string exposition = gateway_->get("/metrics").body;
  EXPECT_NE(exposition.find("comfy_orch_gateway_hosts_up 3\n"), std::string::npos) << exposition;

  // The timeline and the /api paths answer alike; a since the hosts cannot read is a 400.
  const auto timeline = gateway_->get("/api/orch/timeline?since=60s");
  EXPECT_EQ(timeline.status, 200u) << timeline.body;
  EXPECT_EQ(keys_of(timeline.json()["hosts"]), three) << timeline.body;
  EXPECT_EQ(gateway_->get("/orch/timeline?since=%1b").status, 400u);
  EXPECT_EQ(gateway_->get("/orch/timeline?since=12parsecs").status, 400u);

  // --url at a host itself: it answers only with the fleet's secret, and then as a serve does.
  const std::string host = "http://127.0.0.1:" + std::to_string(hosts_[0]->port());
  const auto refused = cli("status --url " + host);
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find(host + "/orch/status answered HTTP 401"), std::string::npos)
      << refused.err;
  EXPECT_NE(refused.err.find("--fleet-secret-file"), std::string::npos) << refused.err;
  const auto own =
      cli("status --json --url " + host + " --fleet-secret-file '" + secret_.string() + "'");
  EXPECT_EQ(own.exit_code, 0) << own.err;
  const json one = json::parse(own.out, nullptr, false);
  EXPECT_TRUE(one["processes"].is_array()) << own.out;
  EXPECT_FALSE(one.contains("hosts")) << own.out;
}

TEST_F(gateway_live_test, a_host_killed_is_listed_down_while_the_others_answer) {
  ::kill(hosts_[1]->pid(), SIGKILL);
  ASSERT_TRUE(wait_until([&] { return up_hosts() == std::set<std::string>{"host-0", "host-2"}; }));
  const json status = cli_json("status");
  EXPECT_EQ(keys_of(status["hosts"]), (std::set<std::string>{"host-0", "host-2"})) << status.dump();
  ASSERT_TRUE(status["unanswered"]["host-1"].is_string()) << status.dump();
  EXPECT_EQ(status["unanswered"]["host-1"].get<std::string>().rfind("down", 0), 0u)
      << status.dump();
  const auto text = cli("status --url " + url());
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("== host-1: did not answer: down"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("2 hosts answered, 1 did not"), std::string::npos) << text.out;
  const std::string exposition = gateway_->get("/metrics").body;
  EXPECT_NE(exposition.find("comfy_orch_gateway_host_up{host=\"host-1\"} 0\n"), std::string::npos)
      << exposition;
  EXPECT_NE(exposition.find("comfy_orch_process_info{host=\"host-2\""), std::string::npos);
  hosts_[1].reset();  // reaped
}

TEST_F(gateway_live_test, a_host_with_hostile_live_views_leaves_the_gateway_answering) {
  const fs::path port_file = dir_ / "hostile.port";
  const auto started = run_command("/usr/bin/python3 '" + std::string(ORCH_TEST_HOSTILE_HOST) +
                                   "' '" + port_file.string() + "' > '" +
                                   (dir_ / "hostile.log").string() + "' 2>&1 & echo $!");
  ASSERT_EQ(started.exit_code, 0) << started.err;
  const pid_t hostile = static_cast<pid_t>(std::stol(started.out));
  ASSERT_TRUE(wait_until([&] { return fs::exists(port_file); }));
  std::ifstream in(port_file);
  std::string port;
  in >> port;
  // The fleet's fingerprint pinned to the real hosts': the hostile one is refused, and asked.
  const auto report = orch::testing::request(hosts_[0]->port(), http::verb::get, "/orch/fleet/host",
                                             {}, "application/json", false,
                                             {{"Authorization", "Bearer " + fleet_secret}});
  ASSERT_EQ(report.status, 200u) << report.body;
  start_gateway(fleet_file(hosts_, "fingerprint = \"" +
                                       report.json()["fingerprint"].get<std::string>() + "\"\n") +
                "[[host]]\nurl = \"http://127.0.0.1:" + port + "\"\n");
  ASSERT_TRUE(wait_until([&] { return up_hosts().size() == 4; }));
  run_on_every_host();

  const json status = cli_json("status");
  EXPECT_EQ(keys_of(status["hosts"]), three)
      << status["hosts"].value("host-3", json()).dump().substr(0, 300);
  ASSERT_TRUE(status["unanswered"]["host-3"].is_string()) << status.dump().substr(0, 2000);
  EXPECT_NE(status["unanswered"]["host-3"].get<std::string>().find("body limit"), std::string::npos)
      << status["unanswered"];
  const json found = cli_json("diverge");
  EXPECT_EQ(keys_of(found["hosts"]), three);
  ASSERT_TRUE(found["unanswered"]["host-3"].is_string()) << found.dump().substr(0, 2000);
  EXPECT_NE(found["unanswered"]["host-3"].get<std::string>().find("no JSON object"),
            std::string::npos)
      << found["unanswered"];
  const auto timeline = gateway_->get("/orch/timeline").json();
  EXPECT_TRUE(timeline["unanswered"]["host-3"].is_string()) << timeline["unanswered"];

  // Its metrics: the samples in the format are kept under its name, the rest dropped and
  // counted, and the whole still parses with each family once.
  const auto metrics = check_metrics(worker_env(status), "host-0,host-1,host-2");
  EXPECT_EQ(metrics.exit_code, 0) << metrics.out << metrics.err;
  const std::string exposition = gateway_->get("/metrics").body;
  EXPECT_NE(exposition.find("comfy_orch_calls_total{host=\"host-3\",process=\"hostile\"} 7\n"),
            std::string::npos);
  EXPECT_NE(exposition.find("comfy_orch_gateway_host_metrics_dropped_lines{host=\"host-3\"} 6\n"),
            std::string::npos)
      << exposition.substr(0, 3000);
  EXPECT_EQ(exposition.find("comfy_orch_gateway_hosts_up 1000"), std::string::npos);
  EXPECT_EQ(exposition.find('\x1b'), std::string::npos) << "a control character was copied";
  EXPECT_EQ(gateway_->get("/queue").status, 200u) << "the gateway still answers";
  // The CLI pointed at the hostile host itself: no JSON object is exit 2, naming the URL.
  const auto direct = cli("diverge --url http://127.0.0.1:" + port);
  EXPECT_EQ(direct.exit_code, 2) << direct.out.substr(0, 300) << direct.err;
  EXPECT_NE(direct.err.find("http://127.0.0.1:" + port +
                            "/orch/diverge answered with no JSON "
                            "object"),
            std::string::npos)
      << direct.err;
  ::kill(hostile, SIGKILL);
}

// `top --url` at the gateway, under tmux: every host's processes in one table, each row named
// host/process, refreshed: a host killed shows on the second line as not answering.
TEST_F(gateway_live_test, top_at_the_gateway_shows_every_hosts_rows_and_a_host_that_went_down) {
  if (run_command("command -v tmux").exit_code != 0)
    GTEST_SKIP() << "tmux is not installed (scripts/install-deps installs it)";
  const std::string session = "orch-top-gateway-" + std::to_string(::getpid());
  const fs::path exit_file = dir_ / "top-exit";
  const auto started = run_command(
      "tmux new-session -d -s " + session + " -x 220 -y 40 \"TERM=xterm-256color LANG=C.UTF-8 '" +
      std::string(ORCH_TEST_COMFY_ORCH) + "' top --interval-ms 200 --url " + url() +
      "; echo \\$? > '" + exit_file.string() + "'; sleep 30\"");
  ASSERT_EQ(started.exit_code, 0) << started.err;
  auto wait_for = [&](const std::vector<std::string>& texts) {
    std::string pane;
    const bool seen = wait_until([&] {
      pane = run_command("tmux capture-pane -p -t " + session).out;
      for (const auto& t : texts)
        if (pane.find(t) == std::string::npos) return false;
      return true;
    });
    EXPECT_TRUE(seen) << pane;
    return pane;
  };
  wait_for({"PROCESS", "host-0/host", "host-1/host", "host-2/host"});
  ::kill(hosts_[1]->pid(), SIGKILL);
  const std::string screen = wait_for({"did not answer: host-1 (down", "host-2/host"});
  EXPECT_EQ(screen.find("host-1/host"), std::string::npos) << screen;
  run_command("tmux send-keys -t " + session + " q");
  std::string status;
  wait_until(
      [&] { return !(status = orch::testing::slurp(exit_file)).empty() && status.back() == '\n'; });
  EXPECT_EQ(status, "0\n") << "top did not quit cleanly";
  run_command("tmux kill-session -t " + session);
  hosts_[1].reset();  // reaped
}

// A port nothing listens on: one the kernel gave and was closed again.
unsigned short closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

TEST(live_url, nothing_listening_or_a_url_of_another_form_exits_2_naming_the_url) {
  const std::string url = "http://127.0.0.1:" + std::to_string(closed_port());
  for (const char* command : {"status", "diverge", "top"}) {
    const auto r = run_command(std::string(ORCH_TEST_COMFY_ORCH) + " " + command + " --url " + url);
    EXPECT_EQ(r.exit_code, 2) << command << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("cannot read " + url + "/orch/"), std::string::npos)
        << command << ": " << r.err;
    EXPECT_NE(r.err.find("is a `comfy-orch serve` or `comfy-orch gateway` listening there"),
              std::string::npos)
        << r.err;
  }
  const auto form =
      run_command(std::string(ORCH_TEST_COMFY_ORCH) + " status --url https://example.invalid/x");
  EXPECT_EQ(form.exit_code, 2);
  EXPECT_NE(form.err.find("is not http://HOST:PORT"), std::string::npos) << form.err;
  const auto both =
      run_command(std::string(ORCH_TEST_COMFY_ORCH) + " status --socket /nowhere --url " + url);
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("without a deployment or --socket"), std::string::npos) << both.err;
}

}  // namespace
}  // namespace orch::serve_testing
