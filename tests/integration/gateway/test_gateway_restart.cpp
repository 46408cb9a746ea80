// `comfy-orch gateway` across a restart and a host in doubt (docs/fleet.md, "The gateway's state"
// and "A prompt in doubt"), over the fixture's three real hosts (gateway_fixture.hpp): a gateway
// SIGKILLed with prompts running on hosts and prompts waiting comes back on the same fleet file
// with the same queue and history, and every prompt runs once; prompts that ended at their hosts
// while it was down are taken from the hosts' histories; a prompt whose host stops answering
// after it was sent stays that host's and runs there once, never on another host too.
#include "../cli/command_runner.hpp"
#include "gateway_fixture.hpp"

namespace orch::serve_testing {
namespace {

// Whether host `h`'s own /history has `id` (the fleet's secret opens it).
bool host_ran(const serve_process& h, const std::string& id) {
  const auto r =
      orch::testing::request(h.port(), http::verb::get, "/history/" + id, {}, "application/json",
                             false, {{"Authorization", "Bearer " + fleet_secret}});
  return r.status == 200 && r.json().contains(id);
}

std::set<std::string> ids_of(const json& items) {
  std::set<std::string> ids;
  for (const auto& item : items) ids.insert(item[1].get<std::string>());
  return ids;
}

TEST_F(gateway_test, a_gateway_killed_and_started_again_keeps_its_queue_and_history) {
  ws_client client(gateway_->port(), "r");
  const std::string done = queue_at_gateway(quick_prompt, "r");
  ASSERT_EQ(finished_at_gateway(done)["status"]["status_str"], "success");
  // One sleeping prompt a host, then three that wait for them.
  std::vector<std::string> running;
  for (int i = 0; i < 3; ++i) running.push_back(queue_at_gateway(sleep_prompt(4000), "r"));
  std::vector<std::string> waiting;
  for (int i = 0; i < 3; ++i) waiting.push_back(queue_at_gateway(quick_prompt, "r"));
  std::set<std::string> started;
  while (started.size() < 3) {
    auto m = client.next();
    ASSERT_TRUE(m.has_value()) << "a running prompt's node never started";
    if ((*m)["type"] == "executing" && (*m)["data"]["node"].is_string())
      started.insert((*m)["data"]["prompt_id"].get<std::string>());
  }
  // Nothing moves while the gateway is down and comes back: the hosts are stopped.
  for (auto& h : hosts_) ::kill(h->pid(), SIGSTOP);
  const json before = gateway_->get("/queue").json();
  ASSERT_EQ(ids_of(before["queue_running"]), std::set<std::string>(running.begin(), running.end()))
      << before.dump();
  ASSERT_EQ(ids_of(before["queue_pending"]), std::set<std::string>(waiting.begin(), waiting.end()));
  ::kill(gateway_->pid(), SIGKILL);
  gateway_.reset();  // reaped

  start_gateway(fleet_file(hosts_));
  const json after = gateway_->get("/queue").json();
  EXPECT_EQ(after["queue_pending"], before["queue_pending"]) << "numbers, ids, bodies, order";
  EXPECT_EQ(ids_of(after["queue_running"]), ids_of(before["queue_running"])) << after.dump();
  EXPECT_EQ(gateway_history_of(done)["status"]["status_str"], "success");

  ws_client again(gateway_->port(), "r");  // the client reconnects, with its id
  for (auto& h : hosts_) ::kill(h->pid(), SIGCONT);
  std::vector<std::string> all = running;
  all.insert(all.end(), waiting.begin(), waiting.end());
  double highest = 0;
  for (const auto& item : before["queue_pending"])
    highest = std::max(highest, item[0].get<double>());
  for (const auto& id : all) {
    const json entry = finished_at_gateway(id);
    ASSERT_FALSE(entry.is_null()) << id;
    EXPECT_EQ(entry["status"]["status_str"], "success") << id << " " << entry.dump();
    int ran = 0;
    for (const auto& h : hosts_) ran += host_ran(*h, id) ? 1 : 0;
    EXPECT_EQ(ran, 1) << id << " ran on " << ran << " hosts";
  }
  // The counter went on: a new prompt's number is above every old one.
  const auto r = gateway_->post("/prompt", {{"prompt", quick_prompt}, {"client_id", "r"}});
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_GT(r.json()["number"].get<double>(), highest);
  // What the restarted gateway heard from the hosts for the prompts they ran for the one before
  // reached the client: each ended.
  const auto heard = events_of(again, std::set<std::string>(waiting.begin(), waiting.end()));
  for (const auto& id : waiting) EXPECT_TRUE(heard.count(id)) << id;
}

// Prompts that ended at their hosts while the gateway was down: their events went to no one, and
// the gateway started again takes their entries from the hosts' histories.
TEST_F(gateway_test, prompts_that_ended_while_the_gateway_was_down_are_taken_from_their_hosts) {
  ws_client client(gateway_->port(), "d");
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(queue_at_gateway(sleep_prompt(300), "d"));
  std::set<std::string> started;
  while (started.size() < 3) {
    auto m = client.next();
    ASSERT_TRUE(m.has_value()) << "a running prompt's node never started";
    if ((*m)["type"] == "executing" && (*m)["data"]["node"].is_string())
      started.insert((*m)["data"]["prompt_id"].get<std::string>());
  }
  ::kill(gateway_->pid(), SIGKILL);
  gateway_.reset();  // reaped
  ASSERT_TRUE(wait_until([&] {
    for (const auto& id : ids) {
      bool ran = false;
      for (const auto& h : hosts_) ran = ran || host_ran(*h, id);
      if (!ran) return false;
    }
    return true;
  }));
  // The hosts stopped while the gateway starts, so that what it holds can be seen first.
  for (auto& h : hosts_) ::kill(h->pid(), SIGSTOP);
  start_gateway(fleet_file(hosts_));
  const json q = gateway_->get("/queue").json();
  EXPECT_EQ(ids_of(q["queue_running"]), std::set<std::string>(ids.begin(), ids.end())) << q.dump();
  for (auto& h : hosts_) ::kill(h->pid(), SIGCONT);
  for (const auto& id : ids) {
    const json entry = finished_at_gateway(id);
    ASSERT_FALSE(entry.is_null()) << id;
    EXPECT_EQ(entry["status"]["status_str"], "success") << id << " " << entry.dump();
    EXPECT_EQ(entry["prompt"][1], id);
    EXPECT_EQ(entry["prompt"][3]["client_id"], "d") << "the gateway's client, not the host's";
    int ran = 0;
    for (const auto& h : hosts_) ran += host_ran(*h, id) ? 1 : 0;
    EXPECT_EQ(ran, 1) << id;
  }
  EXPECT_TRUE(gateway_->get("/queue").json()["queue_running"].empty());
}

// A POST /prompt whose answer never comes (the host stopped after accepting the connection) may
// still be run by that host when it goes on. The prompt stays the host's while it does not
// answer, and is never given to another host: it runs once, there.
TEST_F(gateway_test, a_prompt_whose_host_stops_answering_after_it_was_sent_runs_there_once) {
  for (auto& h : hosts_) ::kill(h->pid(), SIGSTOP);
  const std::string id = queue_at_gateway(quick_prompt, "s");
  std::string first;
  ASSERT_TRUE(wait_until([&] { return !(first = host_of(id)).empty(); }));
  ASSERT_TRUE(wait_until([&] { return up_hosts().empty(); }));
  const auto index = static_cast<std::size_t>(std::stoi(first.substr(first.find('-') + 1)));
  std::set<std::string> others;
  for (std::size_t i = 0; i < hosts_.size(); ++i)
    if (i != index) {
      ::kill(hosts_[i]->pid(), SIGCONT);
      others.insert("host-" + std::to_string(i));
    }
  ASSERT_TRUE(wait_until([&] { return up_hosts() == others; }));
  const json q = gateway_->get("/queue").json();
  EXPECT_EQ(ids_of(q["queue_running"]), std::set<std::string>{id}) << q.dump();
  ::kill(hosts_[index]->pid(), SIGCONT);
  const json entry = finished_at_gateway(id);
  ASSERT_FALSE(entry.is_null());
  EXPECT_EQ(entry["status"]["status_str"], "success") << entry.dump();
  EXPECT_EQ(host_of(id), first) << "the prompt was given to another host as well";
  for (std::size_t i = 0; i < hosts_.size(); ++i)
    EXPECT_EQ(host_ran(*hosts_[i], id), i == index) << "host-" << i;
}

// A host that reads a prompt and runs it, but whose answer is lost (dropping_host.py: the
// connection dropped after the request was read). The gateway does not send it again: it asks the
// host, which has it, and takes its end; the host saw one POST of it.
TEST_F(gateway_test, a_prompt_whose_post_lost_its_answer_is_asked_about_not_sent_again) {
  const fs::path port_file = dir_ / "dropping.port";
  const fs::path posts = dir_ / "dropping.posts";
  const auto started = orch::testing::run_command(
      "/usr/bin/python3 '" + std::string(ORCH_TEST_DROPPING_HOST) + "' '" + port_file.string() +
      "' '" + posts.string() + "' > '" + (dir_ / "dropping.log").string() + "' 2>&1 & echo $!");
  ASSERT_EQ(started.exit_code, 0) << started.err;
  const pid_t dropping = static_cast<pid_t>(std::stol(started.out));
  ASSERT_TRUE(wait_until([&] { return fs::exists(port_file); }));
  std::ifstream in(port_file);
  std::string port;
  in >> port;
  start_gateway("[gateway]\nsecret_file = \"fleet.secret\"\n\n[[host]]\nurl = \"http://127.0.0.1:" +
                port + "\"\n");
  ASSERT_TRUE(wait_until([&] { return up_hosts().size() == 1; }));
  const std::string id =
      queue_at_gateway({{"1", {{"class_type", "TestSleep"}, {"inputs", {{"ms", 1}}}}}}, "c");
  const json entry = finished_at_gateway(id);
  ::kill(dropping, SIGKILL);
  ASSERT_FALSE(entry.is_null());
  EXPECT_EQ(entry["status"]["status_str"], "success") << entry.dump();
  std::ifstream sent(posts);
  std::vector<std::string> lines;
  for (std::string line; std::getline(sent, line);) lines.push_back(line);
  EXPECT_EQ(lines, std::vector<std::string>{id}) << "the prompt was sent more than once";
}

}  // namespace
}  // namespace orch::serve_testing
