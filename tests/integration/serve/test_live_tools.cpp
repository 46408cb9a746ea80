// The live divergence tools (docs/cli.md) on a real `comfy-orch serve`: `ls`, `status`,
// `diverge` and `report` over its control socket, /orch/* and /metrics over HTTP, a divergence
// introduced while it runs, the socket's refusals, and `top` in tmux. Each test gets its own
// XDG_RUNTIME_DIR, so its servers are the only ones `ls` sees.
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <system_error>
#include <tuple>
#include <vector>

#include "../cli/command_runner.hpp"
#include "runtime_fixture.hpp"
#include "serve_client.hpp"
#include "wait_until.hpp"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using orch::testing::run_command;
using orch::testing::serve_process;
using orch::serve_testing::wait_until;

const std::string orch_binary = ORCH_TEST_COMFY_ORCH;

class live_tools : public orch::runtime_testing::runtime_test {
 protected:
  void SetUp() override {
    runtime_test::SetUp();
    runtime_dir_ = dir_ / "run";
    fs::create_directories(runtime_dir_);
    const char* old = std::getenv("XDG_RUNTIME_DIR");
    if (old != nullptr) old_runtime_dir_ = old;
    ::setenv("XDG_RUNTIME_DIR", runtime_dir_.c_str(), 1);
  }
  void TearDown() override {
    if (old_runtime_dir_) {
      ::setenv("XDG_RUNTIME_DIR", old_runtime_dir_->c_str(), 1);
    } else {
      ::unsetenv("XDG_RUNTIME_DIR");
    }
    runtime_test::TearDown();
  }

  std::unique_ptr<serve_process> serve(const orch::runtime_testing::deployment_options& o = {},
                                       std::vector<std::string> extra = {"--sample-ms", "100"}) {
    deployment_ = write_deployment(o);
    const bool registers = std::find(extra.begin(), extra.end(), "--no-control-socket") ==
                           extra.end();
    auto s = std::make_unique<serve_process>(orch_binary, deployment_.string(), std::move(extra));
    EXPECT_NE(s->port(), 0) << "serve did not print its 'listening on' line";
    // The registration is written once serve listens; `ls` finds it from then on. Without a
    // control socket there is none to wait for.
    for (int i = 0; registers && i < 3000 && !fs::exists(control_dir() / (std::to_string(s->pid()) + ".json"));
         ++i)
      std::this_thread::sleep_for(10ms);
    return s;
  }
  fs::path control_dir() const { return runtime_dir_ / "comfy-orch"; }
  std::string socket_of(const serve_process& s) const {
    return (control_dir() / (std::to_string(s.pid()) + ".sock")).string();
  }
  orch::testing::command_result cli(const std::string& args) const {
    return run_command("XDG_RUNTIME_DIR='" + runtime_dir_.string() + "' '" + orch_binary + "' " +
                       args);
  }
  json cli_json(const std::string& args, int expected_exit = 0) const {
    const auto r = cli(args);
    EXPECT_EQ(r.exit_code, expected_exit) << args << "\n" << r.out << r.err;
    const json j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << args << ": not JSON:\n" << r.out << r.err;
    return j;
  }
  static json entry(const json& status, const std::string& process) {
    for (const auto& e : status["processes"])
      if (e["process"] == process) return e;
    return json();
  }
  std::string test_env(const serve_process& s) const {
    return s.get("/object_info/TestSleep").json()["TestSleep"]["orch_env"];
  }
  // Deployment options whose test pack has plugins of its own (ORCH_PLUGIN_PATH): the sim
  // backend, allocator and ledger, and the built pager `pager`, linked into `dir_/name`.
  orch::runtime_testing::deployment_options pack_plugins(const std::string& name,
                                                         const std::string& pager) const {
    const fs::path plugins = dir_ / name;
    fs::create_directories(plugins);
    for (const std::string file :
         {"orch-backend-sim.so", "orch-allocator-sim.so", "orch-ledger-sim.so", pager.c_str()})
      fs::create_symlink(fs::path(ORCH_TEST_PLUGIN_DIR) / file, plugins / file);
    orch::runtime_testing::deployment_options o;
    o.test_pack_env = "ORCH_PLUGIN_PATH = \"" + plugins.string() + "\"\n";
    return o;
  }

  fs::path runtime_dir_;
  fs::path deployment_;
  std::optional<std::string> old_runtime_dir_;
};

// The keys docs/cli.md documents for schema `name`: the first column of the table that follows
// its `<!-- schema: name -->` marker, each in backticks; true for those marked (optional).
std::map<std::string, bool> documented_keys(const std::string& name) {
  std::ifstream in(std::string(ORCH_TEST_SOURCE_DIR) + "/docs/cli.md");
  std::string line;
  bool inside = false;
  std::map<std::string, bool> keys;
  const std::regex row(R"(^\| `([a-z_]+)` \|)");
  while (std::getline(in, line)) {
    if (line == "<!-- schema: " + name + " -->") {
      inside = true;
      continue;
    }
    if (!inside) continue;
    if (!keys.empty() && line.rfind('|', 0) != 0) break;
    std::smatch m;
    if (std::regex_search(line, m, row))
      keys[m[1]] = line.find("| (optional)") != std::string::npos;
  }
  return keys;
}

void expect_documented(const json& object, const std::string& schema) {
  const auto documented = documented_keys(schema);
  ASSERT_FALSE(documented.empty()) << "docs/cli.md has no table for schema " << schema;
  std::set<std::string> live;
  for (const auto& [k, v] : object.items()) live.insert(k);
  for (const auto& k : live)
    EXPECT_EQ(documented.count(k), 1u) << schema << ": " << k << " is not documented";
  for (const auto& [k, optional] : documented)
    EXPECT_TRUE(optional || live.count(k) == 1)
        << schema << ": " << k << " is documented but absent";
}

TEST_F(live_tools, ls_status_and_diverge_read_a_live_serve_in_their_documented_shapes) {
  auto s = serve();
  const json listed = cli_json("ls --json");
  ASSERT_EQ(listed.size(), 1u) << listed.dump(2);
  EXPECT_EQ(listed[0]["pid"], s->pid());
  EXPECT_EQ(listed[0]["deployment"], fs::canonical(deployment_).string());
  EXPECT_EQ(listed[0]["http"], "http://127.0.0.1:" + std::to_string(s->port()));
  EXPECT_TRUE(listed[0]["answering"].get<bool>());
  expect_documented(listed[0], "ls");

  struct stat st {};
  ASSERT_EQ(::stat(control_dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat(socket_of(*s).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  // By deployment file, by socket, and as the only server: the same document.
  const json status = cli_json("status --json '" + deployment_.string() + "'");
  ASSERT_EQ(status["processes"].size(), 4u) << status.dump(2);
  EXPECT_EQ(cli_json("status --json --socket '" + socket_of(*s) + "'")["pid"], s->pid());
  EXPECT_EQ(cli_json("status --json")["pid"], s->pid());
  expect_documented(status, "status");
  for (const auto& p : status["processes"]) expect_documented(p, "status.process");
  const json worker = entry(status, test_env(*s));
  expect_documented(worker["memory_view"], "status.memory_view");
  EXPECT_EQ(worker["memory_view"]["budget_bytes"], status["budget_bytes"]);

  const auto table = cli("status");
  EXPECT_EQ(table.exit_code, 0) << table.err;
  for (const auto& p : status["processes"])
    EXPECT_NE(table.out.find("\n" + p["process"].get<std::string>() + " "), std::string::npos)
        << table.out;

  // A second server, of another deployment file: each has its own socket, `ls` lists both, and
  // a command that names neither is told to choose.
  const fs::path second_file = dir_ / "second.toml";
  fs::copy_file(deployment_, second_file);
  serve_process second(orch_binary, second_file.string(), {"--sample-ms", "100"});
  ASSERT_NE(second.port(), 0);
  for (int i = 0; i < 3000 && cli_json("ls --json").size() < 2; ++i)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(cli_json("ls --json").size(), 2u);
  const auto ambiguous = cli("status");
  EXPECT_EQ(ambiguous.exit_code, 2);
  EXPECT_NE(ambiguous.err.find("2 servers match"), std::string::npos) << ambiguous.err;
  EXPECT_EQ(cli_json("status --json '" + second_file.string() + "'")["pid"], second.pid());
  EXPECT_EQ(second.stop(), 0);

  const json found = cli_json("diverge --json");
  EXPECT_FALSE(found["divergent"].get<bool>()) << found.dump(2);
  expect_documented(found, "diverge");
  for (const auto& d : found["differences"]) {
    expect_documented(d, "diverge.difference");
    EXPECT_EQ(d["severity"], "note") << d.dump(2);
  }
  EXPECT_EQ(s->get("/orch/diverge").json(), found);

  // A timeline over HTTP: samples every 100 ms (waited for, not slept: a loaded machine samples
  // late).
  json timeline;
  for (int i = 0; i < 600; ++i, std::this_thread::sleep_for(50ms)) {
    timeline = s->get("/orch/timeline?since=1m").json();
    if (timeline.contains("samples") && timeline["samples"].size() >= 2) break;
  }
  expect_documented(timeline, "timeline");
  EXPECT_GE(timeline["samples"].size(), 2u) << timeline.dump(2);
  expect_documented(timeline["samples"][0], "timeline.sample");
  expect_documented(timeline["samples"][0]["processes"]["host"], "timeline.figures");
  EXPECT_EQ(s->get("/orch/timeline?since=soon").status, 400u);
  EXPECT_EQ(s->post("/orch/diverge", json::object()).status, 405u);
  EXPECT_EQ(s->stop(), 0);

  EXPECT_TRUE(cli_json("ls --json").empty()) << "a stopped server removes its registration";
  EXPECT_FALSE(fs::exists(socket_of(*s)));
  const auto gone = cli("status");
  EXPECT_EQ(gone.exit_code, 2);
  EXPECT_NE(gone.err.find("no running `comfy-orch serve`"), std::string::npos) << gone.err;
}

TEST_F(live_tools, a_worker_replaced_by_an_l2_build_diverges_live_in_status_diverge_and_timeline) {
  // The test pack's plugins are its own (ORCH_PLUGIN_PATH): the full sim pager at first.
  const fs::path plugins = dir_ / "pack-plugins";
  auto s = serve(pack_plugins("pack-plugins", "orch-pager-sim.so"), {"--sample-ms", "200"});
  const std::string env = test_env(*s);
  const json before = entry(cli_json("status --json"), env);
  ASSERT_EQ(before["level"], 4) << before.dump(2);
  cli_json("diverge --json", 0);

  // The pager file at that path becomes a build that speaks only L2, and the worker is lost:
  // its replacement loads the new build.
  fs::remove(plugins / "orch-pager-sim.so");
  fs::create_symlink(fs::path(ORCH_TEST_PLUGIN_DIR) / "orch-pager-sim-l2.so",
                     plugins / "orch-pager-sim.so");
  ASSERT_EQ(::kill(before["pid"].get<pid_t>(), SIGKILL), 0);
  json after;
  for (int i = 0; i < 500; ++i, std::this_thread::sleep_for(20ms)) {
    after = entry(s->get("/orch/status").json(), env);
    if (after["state"] == "ready" && after["pid"] != before["pid"]) break;
  }
  // The host asks for L4, which the L2 build cannot open: the worker falls back to the ledger,
  // the silent fallback comfy-env's workers make, here named with its reason.
  ASSERT_EQ(after["state"], "ready") << after.dump(2);
  EXPECT_EQ(after["manager"], "ledger") << after.dump(2);
  EXPECT_NE(after["manager_reason"].get<std::string>().find("pager init failed"), std::string::npos)
      << after.dump(2);
  EXPECT_EQ(entry(cli_json("status --json"), env)["manager"], "ledger");

  const json found = cli_json("diverge --json", 1);
  EXPECT_TRUE(found["divergent"].get<bool>());
  json manager;
  for (const auto& d : found["differences"])
    if (d["process"] == env && d["kind"] == "manager") manager = d;
  ASSERT_FALSE(manager.is_null()) << found.dump(2);
  EXPECT_EQ(manager["host"], "pager");
  EXPECT_EQ(manager["worker"], "ledger");
  EXPECT_NE(manager["explanation"].get<std::string>().find("pager init failed"), std::string::npos);
  const auto text = cli("diverge");
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_NE(text.out.find(env + ": DIVERGES in manager\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("fix:"), std::string::npos);

  // Within a sampling period or two the timeline has the restart and the divergence.
  json timeline;
  std::set<std::string> kinds;
  for (int i = 0; i < 300 && (kinds.count("restart") == 0 || kinds.count("divergence") == 0);
       ++i, std::this_thread::sleep_for(100ms)) {
    timeline = cli_json("report --json --since 5m");
    kinds.clear();
    for (const auto& m : timeline["timeline"]["markers"])
      if (m["process"] == env) kinds.insert(m["kind"].get<std::string>());
  }
  EXPECT_EQ(kinds.count("restart"), 1u) << timeline["timeline"]["markers"].dump(2);
  EXPECT_EQ(kinds.count("divergence"), 1u) << timeline["timeline"]["markers"].dump(2);
  EXPECT_EQ(s->stop(), 0);
}

// The control socket's own defences: one JSON object per line, bounded, from this user only.
TEST_F(live_tools, the_control_socket_answers_bad_requests_with_errors_and_stays_up) {
  auto s = serve();
  const std::string path = socket_of(*s);
  auto exchange = [&](const std::string& bytes) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    path.copy(addr.sun_path, path.size());
    EXPECT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
    timeval tv{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    for (std::size_t sent = 0; sent < bytes.size();) {
      const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<std::size_t>(n);
    }
    std::string answer;
    char c;
    while (::recv(fd, &c, 1, 0) == 1 && c != '\n') answer += c;
    ::close(fd);
    return json::parse(answer, nullptr, false);
  };
  EXPECT_EQ(exchange("not json\n")["error"]["code"], "invalid_request");
  EXPECT_EQ(exchange("[1]\n")["error"]["code"], "invalid_request");
  EXPECT_EQ(exchange("{\"get\": \"everything\"}\n")["error"]["code"], "invalid_request");
  EXPECT_EQ(exchange(std::string(100000, 'x'))["error"]["code"], "request_too_large");
  EXPECT_EQ(exchange("{\"get\": \"timeline\", \"since\": \"x\"}\n")["error"]["code"],
            "invalid_request");
  EXPECT_EQ(exchange("{\"get\": \"hello\"}\n")["pid"], s->pid());
  EXPECT_EQ(s->get("/orch/status").status, 200u);
  EXPECT_EQ(s->stop(), 0);
}

// A pre-existing control directory that is not this user's own is refused, and serve says how
// to go on; --no-control-socket serves without one.
TEST_F(live_tools, serve_refuses_a_control_directory_open_to_others) {
  fs::create_directories(control_dir());
  fs::permissions(control_dir(), fs::perms::all);
  const auto r =
      run_command("XDG_RUNTIME_DIR='" + runtime_dir_.string() + "' timeout 30 '" + orch_binary +
                  "' serve '" + write_deployment().string() + "' --port 0");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("it is open to other users (mode 777)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("chmod 700"), std::string::npos) << r.err;
  auto s = serve({}, {"--no-control-socket"});
  EXPECT_EQ(s->get("/orch/status").status, 200u);
  EXPECT_EQ(s->stop(), 0);
}

// The two example deployments, as an operator serves them: every tool reads them live. The
// pressure deployment's legacy pack pins the ledger on purpose (not acknowledged), and its
// worker's model is evicted through its stand-in: diverge says so with exit 1, and the report
// marks the eviction with its receipt.
TEST_F(live_tools, the_example_and_pressure_deployments_show_in_every_tool) {
  const std::string examples = std::string(ORCH_TEST_SOURCE_DIR) + "/examples/";
  for (const auto& [file, prompt_file, divergent] :
       {std::tuple{"sim-deployment.toml", "sim-sampler.json", false},
        std::tuple{"sim-pressure-deployment.toml", "two-managers.json", true}}) {
    SCOPED_TRACE(file);
    const std::string deployment = examples + file;
    serve_process s(orch_binary, deployment, {"--sample-ms", "100"});
    ASSERT_NE(s.port(), 0);
    for (int i = 0; i < 3000 && !fs::exists(control_dir() / (std::to_string(s.pid()) + ".json"));
         ++i)
      std::this_thread::sleep_for(10ms);
    json prompt;
    std::ifstream(examples + "prompts/" + prompt_file) >> prompt;
    const auto queued = s.post("/prompt", {{"prompt", prompt}});
    ASSERT_EQ(queued.status, 200u) << queued.body;
    const std::string id = queued.json()["prompt_id"];
    json done;
    for (int i = 0; i < 3000 && done.empty(); ++i, std::this_thread::sleep_for(10ms))
      done = s.get("/history/" + id).json();
    ASSERT_EQ(done[id]["status"]["status_str"], "success") << done.dump(2);
    EXPECT_EQ(s.post("/free", {{"free_memory", true}}).status, 200u);
    std::this_thread::sleep_for(300ms);

    const json status = cli_json("status --json '" + deployment + "'");
    for (const auto& p : status["processes"]) {
      expect_documented(p, "status.process");
      for (const auto& m : p["models"]) expect_documented(m, "status.model");
    }
    const json found = cli_json("diverge --json '" + deployment + "'", divergent ? 1 : 0);
    EXPECT_EQ(found["divergent"], divergent) << found.dump(2);
    std::string sampler_env;
    for (const auto& p : status["processes"])
      if (p["calls"].get<int>() > 0 && p["mode"] == "worker") sampler_env = p["process"];
    const auto metrics = run_command("/usr/bin/python3 '" + std::string(ORCH_TEST_METRICS_CHECK) +
                                     "' http://127.0.0.1:" + std::to_string(s.port()) +
                                     "/metrics '" + sampler_env + "'");
    EXPECT_EQ(metrics.exit_code, 0) << metrics.out << metrics.err;
    const json all = cli_json("report --json '" + deployment + "'");
    std::set<std::string> kinds;
    for (const auto& m : all["timeline"]["markers"]) {
      expect_documented(m, "timeline.marker");
      kinds.insert(m["kind"].get<std::string>());
    }
    EXPECT_EQ(kinds.count("boundary"), 1u) << all["timeline"]["markers"].dump(2);
    EXPECT_EQ(kinds.count("free"), 1u);
    if (divergent) {
      EXPECT_EQ(kinds.count("eviction"), 1u) << all["timeline"]["markers"].dump(2);
      EXPECT_EQ(kinds.count("divergence"), 1u);
      bool ledger = false;
      for (const auto& d : found["differences"])
        if (d["kind"] == "manager" && d["worker"] == "ledger") ledger = true;
      EXPECT_TRUE(ledger) << found.dump(2);
    }
    EXPECT_EQ(s.stop(), 0);
  }
}

// /metrics in Prometheus' format, read with prometheus_client's own parser, after a prompt and
// a /free, so the call histogram and the free counter have something in them.
TEST_F(live_tools, metrics_parse_with_prometheus_client_and_count_calls_and_frees) {
  auto s = serve();
  const std::string env = test_env(*s);
  const auto r = s->post(
      "/prompt", {{"prompt", {{"1", {{"class_type", "TestSleep"}, {"inputs", {{"ms", 1}}}}}}}});
  ASSERT_EQ(r.status, 200u) << r.body;
  const std::string id = r.json()["prompt_id"];
  for (int i = 0; i < 3000 && s->get("/history/" + id).json().empty(); ++i)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(s->post("/free", {{"free_memory", true}}).status, 200u);
  const auto check =
      run_command("/usr/bin/python3 '" + std::string(ORCH_TEST_METRICS_CHECK) +
                  "' http://127.0.0.1:" + std::to_string(s->port()) + "/metrics '" + env + "'");
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_NE(check.out.find("ok:"), std::string::npos) << check.out << check.err;
  EXPECT_EQ(s->stop(), 0);
}

// `report --html` on the pressure deployment (an eviction through a stand-in, a pack on the
// ledger on purpose), loaded in headless Chromium.
TEST_F(live_tools, the_html_report_renders_its_timelines_in_headless_chromium) {
  if (!fs::exists("/usr/bin/chromium"))
    GTEST_SKIP() << "chromium is not installed (scripts/install-deps installs it)";
  const std::string examples = std::string(ORCH_TEST_SOURCE_DIR) + "/examples/";
  auto s = std::make_unique<serve_process>(orch_binary, examples + "sim-pressure-deployment.toml",
                                           std::vector<std::string>{"--sample-ms", "100"});
  ASSERT_NE(s->port(), 0);
  json prompt;
  std::ifstream(examples + "prompts/two-managers.json") >> prompt;
  for (int round = 0; round < 2; ++round) {
    prompt["3"]["inputs"]["steps"] = 2 + round;  // a new prompt each round: nothing cached
    const auto r = s->post("/prompt", {{"prompt", prompt}});
    ASSERT_EQ(r.status, 200u) << r.body;
    const std::string id = r.json()["prompt_id"];
    ASSERT_TRUE(wait_until([&] { return !s->get("/history/" + id).json().empty(); })) << id;
  }
  EXPECT_EQ(s->post("/free", {{"free_memory", true}}).status, 200u);
  // The release is answered later, on the io thread, and the boundaries are seen by the sampler's
  // next sample: the report is written once the timeline holds each marker it is checked for.
  std::set<std::string> kinds;
  ASSERT_TRUE(wait_until([&] {
    const json timeline = s->get("/orch/timeline").json();
    for (const auto& m : timeline["markers"]) kinds.insert(m["kind"].get<std::string>());
    return kinds.count("free") && kinds.count("boundary") && kinds.count("eviction");
  })) << "markers seen: " << ::testing::PrintToString(kinds);
  const fs::path html = dir_ / "report.html";
  ASSERT_TRUE(wait_until(
      [&] { return fs::exists(control_dir() / (std::to_string(s->pid()) + ".json")); }));
  const auto written = cli("report --html '" + html.string() + "' --since 5m");
  ASSERT_EQ(written.exit_code, 0) << written.out << written.err;
  EXPECT_NE(written.err.find("wrote " + html.string()), std::string::npos) << written.err;
  const std::string text = orch::testing::slurp(html);
  EXPECT_EQ(text.find("<script"), std::string::npos);
  for (const char* fetch : {"src=", "href=", "url(", "@import"})
    EXPECT_EQ(text.find(fetch), std::string::npos) << fetch << ": nothing is fetched";
  EXPECT_NE(text.find("marker-free"), std::string::npos) << "the /free has its marker";
  EXPECT_NE(text.find("marker-boundary"), std::string::npos);
  EXPECT_NE(text.find("marker-eviction"), std::string::npos);
  EXPECT_NE(text.find("<tr class=\"diverges\">"), std::string::npos) << "the ledger pack's row";
  const fs::path work = dir_ / "chromium";
  fs::create_directories(work);
  const auto check =
      run_command("timeout 240 /usr/bin/python3 '" + std::string(ORCH_TEST_REPORT_CHECK) + "' '" +
                  html.string() + "' '" + work.string() + "'");
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_NE(check.out.find("ok:"), std::string::npos) << check.out << check.err;
  EXPECT_EQ(s->stop(), 0);
}

// `top` under tmux: it draws every process, sorts and filters with one key, marks a diverging
// row in red, and quits cleanly on q.
TEST_F(live_tools, top_renders_sorts_marks_a_diverging_row_red_and_quits_under_tmux) {
  if (run_command("command -v tmux").exit_code != 0)
    GTEST_SKIP() << "tmux is not installed (scripts/install-deps installs it)";
  // The test pack speaks only L2 from the start: its row diverges.
  const auto o = pack_plugins("l2-plugins", "orch-pager-sim-l2.so");
  auto s = serve(o);
  const std::string env = test_env(*s);
  const std::string session = "orch-top-" + std::to_string(::getpid());
  const fs::path exit_file = dir_ / "top-exit";
  const auto started =
      run_command("tmux new-session -d -s " + session + " -x 220 -y 40 \"XDG_RUNTIME_DIR='" +
                  runtime_dir_.string() + "' TERM=xterm-256color LANG=C.UTF-8 '" + orch_binary +
                  "' top --interval-ms 200; echo \\$? > '" + exit_file.string() + "'; sleep 30\"");
  ASSERT_EQ(started.exit_code, 0) << started.err;
  auto pane = [&](bool escapes) {
    return run_command("tmux capture-pane -p " + std::string(escapes ? "-e " : "") + "-t " +
                       session)
        .out;
  };
  // Generous: each wait ends as soon as the text shows. The first run on a fresh, loaded
  // machine had taken longer than 10 s to show the diverging row (issue 41's flaky test), and
  // the row is known diverging a sample after it appears: wait for what is asserted.
  auto wait_for = [&](const std::string& text) {
    std::string p;
    for (int i = 0; i < 600; ++i, std::this_thread::sleep_for(100ms))
      if ((p = pane(false)).find(text) != std::string::npos) return p;
    return p;
  };
  wait_for(env);
  std::string screen = wait_for("DIVERGES");
  EXPECT_NE(screen.find("PROCESS"), std::string::npos) << screen;
  EXPECT_NE(screen.find("host"), std::string::npos) << screen;
  EXPECT_NE(screen.find("sort: process"), std::string::npos) << screen;
  EXPECT_NE(screen.find("DIVERGES"), std::string::npos) << screen;
  // The diverging row is drawn in red (SGR 31, or 91 bright), and only that one.
  std::string coloured;
  std::istringstream lines(pane(true));
  for (std::string line; std::getline(lines, line);)
    if (line.find(env) != std::string::npos) coloured = line;
  EXPECT_TRUE(coloured.find("\x1b[31m") != std::string::npos ||
              coloured.find(";31m") != std::string::npos ||
              coloured.find("\x1b[91m") != std::string::npos)
      << coloured;
  run_command("tmux send-keys -t " + session + " s");
  EXPECT_NE(wait_for("sort: resident").find("sort: resident"), std::string::npos);
  run_command("tmux send-keys -t " + session + " f");
  screen = wait_for("filter: workers");
  EXPECT_EQ(screen.find("\nhost "), std::string::npos) << "the host is filtered out:\n" << screen;
  run_command("tmux send-keys -t " + session + " q");
  // The shell creates the file, then writes the status into it: wait for the whole line (it had
  // been read between the two on a loaded machine, and found empty).
  std::string status;
  for (int i = 0; i < 600; ++i, std::this_thread::sleep_for(100ms))
    if (!(status = orch::testing::slurp(exit_file)).empty() && status.back() == '\n') break;
  EXPECT_EQ(status, "0\n") << "top did not quit cleanly";
  const std::string after = pane(false);
  EXPECT_EQ(after.find("PROCESS"), std::string::npos) << "the screen was not restored:\n" << after;
  run_command("tmux kill-session -t " + session);
  EXPECT_EQ(s->stop(), 0);
}

// `plan` decides as serve would and starts nothing: a pack whose pager speaks only L2 is planned
// with the adapter, its dropped settings and the divergence to expect.
TEST_F(live_tools, plan_shows_each_envs_decision_and_the_divergences_to_expect) {
  const auto o = pack_plugins("l2-plugins", "orch-pager-sim-l2.so");
  const fs::path file = write_deployment(o);
  // Beside a live serve of the same deployment: a plan takes no share of the machine's budget.
  auto s = serve(o);
  const json plan = cli_json("plan --json '" + file.string() + "'");
  expect_documented(plan, "plan");
  ASSERT_EQ(plan["envs"].size(), 3u) << plan.dump(2);
  EXPECT_EQ(plan["host"]["manager"], "pager");
  EXPECT_EQ(plan["host"]["level"], 4);
  bool saw_adapted = false;
  for (const auto& e : plan["envs"]) {
    expect_documented(e, "plan.env");
    EXPECT_EQ(e["device"], "sim");
    if (e["plugins"]["pager"].is_object() && e["plugins"]["pager"]["name"] == "sim-pager-l2") {
      saw_adapted = true;
      EXPECT_EQ(e["level"], 2);
      EXPECT_FALSE(e["dropped_settings"].empty()) << e.dump(2);
      ASSERT_FALSE(e["expected_divergences"].empty());
      EXPECT_EQ(e["expected_divergences"][0]["kind"], "plugin");
    }
  }
  EXPECT_TRUE(saw_adapted) << plan.dump(2);
  const auto text = cli("plan '" + file.string() + "'");
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("expect      divergence: its pager speaks level 2"), std::string::npos)
      << text.out;
  EXPECT_EQ(cli("plan /nonexistent.toml").exit_code, 105) << "CLI11's missing-file exit";
  EXPECT_EQ(s->stop(), 0);
}

// Gives others the search (x) bit on each directory from the given ones up to the root that
// lacks it, and takes it back on destruction: the permissions end as they began.
class others_may_pass {
 public:
  explicit others_may_pass(const std::vector<fs::path>& leaves) {
    for (const auto& leaf : leaves)
      for (fs::path p = fs::absolute(leaf); p != p.root_path(); p = p.parent_path()) {
        const auto perms = fs::status(p).permissions();
        if ((perms & fs::perms::others_exec) != fs::perms::none) continue;
        fs::permissions(p, fs::perms::others_exec, fs::perm_options::add);
        opened_.push_back(p);
      }
  }
  ~others_may_pass() {
    std::error_code ignored;  // a directory the test removed has nothing to restore
    for (const auto& p : opened_)
      fs::permissions(p, fs::perms::others_exec, fs::perm_options::remove, ignored);
  }
  others_may_pass(const others_may_pass&) = delete;
  others_may_pass& operator=(const others_may_pass&) = delete;

 private:
  std::vector<fs::path> opened_;
};

// The control socket refuses another uid: a user made for the test (useradd) cannot reach the
// socket through the 0700 directory, and when the directory is opened up by hand, SO_PEERCRED
// still refuses them.
TEST_F(live_tools, the_control_socket_refuses_another_uid) {
  if (::geteuid() != 0) GTEST_SKIP() << "creating a second user needs root";
  if (run_command("command -v useradd && command -v setpriv").exit_code != 0)
    GTEST_SKIP() << "useradd or setpriv (util-linux) is missing";
  const std::string user = "orch-live-test";
  if (::getpwnam(user.c_str()) == nullptr) {
    const auto added =
        run_command("useradd --system --no-create-home --shell /usr/sbin/nologin " + user);
    ASSERT_EQ(added.exit_code, 0) << added.err;
  }
  const passwd* pw = ::getpwnam(user.c_str());
  ASSERT_NE(pw, nullptr);
  auto s = serve();
  const std::string socket = socket_of(*s);
  // The other user must get as far as the socket and run the CLI: the test's directories and
  // the build's must be passable. A clone under a 0700 directory (mktemp -d, as .ci/run makes)
  // is not, so each directory that lacks the bit gets it until the test ends.
  const others_may_pass passable({runtime_dir_, fs::path(orch_binary).parent_path()});
  auto as_other = [&](const std::string& command) {
    return run_command("setpriv --reuid=" + std::to_string(pw->pw_uid) + " --regid=" +
                       std::to_string(pw->pw_gid) +
                       " --clear-groups env XDG_RUNTIME_DIR=/nonexistent " + command);
  };
  const std::string status = "'" + orch_binary + "' status --socket '" + socket + "'";
  const auto blocked = as_other(status);
  EXPECT_EQ(blocked.exit_code, 2) << blocked.out << blocked.err;
  EXPECT_NE(blocked.err.find("belongs to another user"), std::string::npos) << blocked.err;
  fs::permissions(control_dir(), fs::perms::all);
  fs::permissions(socket, fs::perms::all);
  // Past the directory, each side checks the other's uid: the CLI will not ask another user's
  // server, and the server (asked with a raw connection) refuses by name and says nothing else.
  const auto not_asked = as_other(status);
  EXPECT_EQ(not_asked.exit_code, 2) << not_asked.out << not_asked.err;
  EXPECT_NE(not_asked.err.find("runs as uid 0, not as this user"), std::string::npos)
      << not_asked.err;
  const fs::path raw = dir_ / "raw_request.py";
  std::ofstream(raw) << "import socket, sys\n"
                        "s = socket.socket(socket.AF_UNIX)\n"
                        "s.connect(sys.argv[1])\n"
                        "try:\n"
                        "    s.sendall(b'{\"get\": \"status\"}\\n')\n"
                        "except BrokenPipeError:\n"  // refused before the request was sent
                        "    pass\n"
                        "print(s.makefile().readline())\n";
  fs::permissions(raw, fs::perms::others_read, fs::perm_options::add);
  const auto refused = as_other("/usr/bin/python3 '" + raw.string() + "' '" + socket + "'");
  EXPECT_EQ(refused.exit_code, 0) << refused.err;
  const json answer = json::parse(refused.out, nullptr, false);
  ASSERT_TRUE(answer.is_object()) << refused.out;
  EXPECT_EQ(answer["error"]["code"], "peer_refused") << refused.out;
  EXPECT_NE(refused.out.find("answers only its own user"), std::string::npos) << refused.out;
  EXPECT_FALSE(answer.contains("processes")) << "nothing of the status reached the other user";
  fs::permissions(control_dir(), fs::perms::owner_all);
  EXPECT_EQ(cli("status --socket '" + socket + "'").exit_code, 0) << "its own user still gets in";
  EXPECT_EQ(s->stop(), 0);
}

}  // namespace
