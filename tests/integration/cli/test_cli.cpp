// The comfy-orch executable as an operator runs it: exit codes, --help, --version, envs and
// validate output in both forms.
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../../unit/manifests/manifest_test_support.hpp"
#include "command_runner.hpp"

namespace {

namespace fs = std::filesystem;
using orch::manifests::testing::temp_dir;

using orch::testing::command_result;
using orch::testing::slurp;

// Runs comfy-orch with `args` (already shell-quoted) and `env_prefix` (e.g. "ORCH_ENV_ROOT=x").
command_result run(const std::string& args, const std::string& env_prefix = "") {
  return orch::testing::run_command("cd '" + std::string(ORCH_SOURCE_DIR) + "' && env " +
                                    env_prefix + " '" + COMFY_ORCH_BIN + "' " + args);
}

TEST(cli, version_prints_the_project_version) {
  const auto r = run("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out.rfind("comfy-orch ", 0), 0u) << r.out;
}

TEST(cli, every_subcommand_has_help) {
  for (const char* sub : {"envs", "plugins", "validate"}) {
    const auto r = run(std::string(sub) + " --help");
    EXPECT_EQ(r.exit_code, 0) << sub;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << sub << r.out;
    EXPECT_NE(r.out.find("--json"), std::string::npos) << sub;
  }
}

// `text` with every run of whitespace made one space: a paragraph as help wraps it, to search.
std::string one_line(const std::string& text) {
  std::istringstream words(text);
  std::string out;
  for (std::string word; words >> word;) out += (out.empty() ? "" : " ") + word;
  return out;
}

const std::vector<std::string> commands = {
    "diverge", "doctor",  "envs", "gateway", "gc",     "install", "launch",  "ls",
    "plan",    "plugins", "report", "run",   "serve",  "status",  "top",     "validate"};

// `comfy-orch --help` lists its commands as git, cargo and kubectl list theirs: each on one line
// of its own, the whole a screen. What a command does, in paragraphs, is its own --help.
TEST(cli, the_top_help_lists_each_command_on_one_line) {
  const auto r = run("--help");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  for (const auto& command : commands) {
    std::size_t naming = 0;
    for (const auto& line : lines) {
      std::istringstream words(line);
      std::string first;
      words >> first;
      if (first == command) ++naming;
    }
    EXPECT_EQ(naming, 1u) << command << " in:\n" << r.out;
  }
  // The usage line names the program, not the path it was started by (a clone 200 characters
  // deep made it one line of 258).
  EXPECT_EQ(std::count(lines.begin(), lines.end(), "Usage: comfy-orch [OPTIONS] SUBCOMMAND"), 1)
      << r.out;
  for (const auto& line : lines) EXPECT_LE(line.size(), 100u) << line;
  EXPECT_LE(lines.size(), commands.size() + 12) << r.out;
  EXPECT_EQ(one_line(r.out).find("keep them warm"), std::string::npos) << "serve's paragraph";
}

TEST(cli, a_commands_own_help_keeps_its_paragraphs_and_shows_the_defaults) {
  const auto r = run("serve --help");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string text = one_line(r.out);
  EXPECT_EQ(r.out.rfind("Serve ComfyUI's HTTP and WebSocket API over warm workers\n", 0), 0u)
      << r.out;
  EXPECT_NE(text.find("Start the deployment's workers and keep them warm behind ComfyUI's HTTP"),
            std::string::npos)
      << r.out;
  EXPECT_NE(text.find("SIGINT/SIGTERM/SIGHUP stop it gracefully; exit 0."), std::string::npos);
  // serve_config's defaults, as the flags show them.
  for (const char* flag : {"--port UINT=8188", "--max-body UINT=8388608", "=10000 A request's",
                           "--on-stop TEXT:{interrupt,finish}=interrupt"})
    EXPECT_NE(text.find(flag), std::string::npos) << flag << " in:\n" << r.out;
  for (const auto& command : commands)
    EXPECT_EQ(run(command + " --help").exit_code, 0) << command;
}

// comfy-orch carries its own runtime, linked from the same archives as liborch_host.so, which
// it never loads: the library holds no serve, envs, control or CLI, and exports its C API alone
// (docs/design-changes.md, "Libraries with one direction").
TEST(cli, the_executable_carries_the_runtime_and_loads_no_host_library) {
  const auto dynamic = orch::testing::run_command(std::string("readelf -d '") + COMFY_ORCH_BIN +
                                                  "'");
  ASSERT_EQ(dynamic.exit_code, 0) << dynamic.err;
  EXPECT_EQ(dynamic.out.find("liborch_host"), std::string::npos) << dynamic.out;
  const auto symbols = orch::testing::run_command(std::string("nm -C --defined-only '") +
                                                  COMFY_ORCH_BIN + "'");
  ASSERT_EQ(symbols.exit_code, 0) << symbols.err;
  for (const char* part : {" T orch::executor::parse_prompt(", " T orch::runtime::supervisor::",
                           " T orch::serve::http_server::", " T orch::cli::"})
    EXPECT_NE(symbols.out.find(part), std::string::npos) << part;
  EXPECT_EQ(run("--version").exit_code, 0);
}

TEST(cli, no_subcommand_is_a_usage_error) {
  const auto r = run("");
  EXPECT_NE(r.exit_code, 0);
}

TEST(cli, envs_lists_the_example_packs_with_states_matching_the_disk) {
  temp_dir ws;
  const auto r =
      run("envs examples/sim-deployment.toml --json", "ORCH_ENV_ROOT=" + ws.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["workspace_root"], ws.path().string());
  EXPECT_EQ(doc["workspace_root_source"], "ORCH_ENV_ROOT");
  ASSERT_EQ(doc["envs"].size(), 4u) << r.out;
  std::map<std::string, nlohmann::json> by_env;
  for (const auto& e : doc["envs"]) by_env[e["env"]] = e;
  ASSERT_TRUE(by_env.count("imageops-nodes"));
  ASSERT_TRUE(by_env.count("simsampler-nodes"));
  ASSERT_TRUE(by_env.count("depthtools-nodes"));
  ASSERT_TRUE(by_env.count("torchfilters-nodes"));
  // Native packs: ok exactly when their library has been built.
  for (const auto& [env, lib] : {std::pair{"imageops-nodes", "liborch_pack_image_ops.so"},
                                 std::pair{"simsampler-nodes", "liborch_pack_sim_sampler.so"}}) {
    const bool built = fs::exists(fs::path(ORCH_BINARY_DIR) / "examples" / lib);
    EXPECT_EQ(by_env[env]["kind"], "native");
    EXPECT_EQ(by_env[env]["state"], built ? "ok" : "missing") << env;
  }
  // The Python pack's env is not in the fresh workspace.
  EXPECT_EQ(by_env["depthtools-nodes"]["state"], "missing");
  EXPECT_EQ(by_env["depthtools-nodes"]["python"], "3.11");
  EXPECT_EQ(by_env["depthtools-nodes"]["path"], (ws.path() / "envs" / "depthtools-nodes").string());

  // Materialise it the way comfy-env lays it out, for this host's stack: the state follows
  // the disk.
  ASSERT_TRUE(doc["abi_tag"].is_string()) << r.out;
  const std::string tag = doc["abi_tag"];
  const fs::path env_dir = ws.path() / "envs" / ("depthtools-nodes_" + tag);
  fs::create_directories(env_dir / ".pixi/envs/default/bin");
  fs::create_directories(env_dir / ".pixi/envs/default/lib/python3.11");
  std::ofstream(env_dir / ".pixi/envs/default/bin/python");
  const auto again =
      run("envs examples/sim-deployment.toml --json", "ORCH_ENV_ROOT=" + ws.path().string());
  const auto doc2 = nlohmann::json::parse(again.out);
  const std::string python = (env_dir / ".pixi/envs/default/bin/python").string();
  for (const auto& e : doc2["envs"]) {
    if (e["env"] == "depthtools-nodes") {
      // A materialised Python env runs as a Python worker on its own interpreter.
      EXPECT_EQ(e["state"], "ok");
      EXPECT_EQ(e["runnable"], true);
      EXPECT_EQ(e["interpreter"], python);
      EXPECT_EQ(e["python"], "3.11");
      EXPECT_EQ(e["abi_tag"], tag);
      EXPECT_EQ(e["stamp"], "unstamped (not verified)");
    } else {
      EXPECT_EQ(e["runnable"], e["state"] == "ok") << e;
    }
  }
  const auto text = run("envs examples/sim-deployment.toml", "ORCH_ENV_ROOT=" + ws.path().string());
  EXPECT_NE(text.out.find("depthtools-nodes    ok       yes   3.11    " + tag + "  " + python),
            std::string::npos)
      << text.out;

  // The same env, named for a stack without torch: built for another ABI, never launched.
  fs::rename(env_dir, ws.path() / "envs/depthtools-nodes-py311-notorch");
  const auto foreign = nlohmann::json::parse(
      run("envs examples/sim-deployment.toml --json", "ORCH_ENV_ROOT=" + ws.path().string()).out);
  for (const auto& e : foreign["envs"]) {
    if (e["env"] != "depthtools-nodes") continue;
    if (tag == "py311-notorch") continue;  // a host without torch: the name is its own
    EXPECT_EQ(e["state"], "stale") << e;
    EXPECT_EQ(e["runnable"], false);
  }
}

TEST(cli, envs_table_has_one_line_per_node_directory) {
  temp_dir ws;
  const auto r = run("envs examples/sim-deployment.toml", "ORCH_ENV_ROOT=" + ws.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("PACK"), std::string::npos);
  EXPECT_NE(r.out.find("ComfyUI-DepthTools    nodes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("comfy-orch install examples/sim-deployment.toml"), std::string::npos);
}

TEST(cli, envs_on_an_invalid_deployment_exits_1_naming_the_key) {
  temp_dir tmp;
  tmp.write("bad.toml", "[host]\ndevice = \"gpu\"\n");
  const auto r = run("envs '" + (tmp.path() / "bad.toml").string() + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("bad.toml:2:10: error: host.device: unknown device \"gpu\""),
            std::string::npos)
      << r.err;
}

TEST(cli, validate_reports_errors_and_exits_1) {
  temp_dir tmp;
  const auto good = tmp.write("ComfyUI-X/nodes/comfy-env.toml", "python = \"3.11\"\n");
  const auto bad = tmp.write("ComfyUI-Y/nodes/comfy-env.toml", "python = 3.10\n");
  const auto r = run("validate '" + good.string() + "' '" + bad.string() + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find(bad.string() + ":1:10: error: python:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(good.string() + ": ok (env manifest"), std::string::npos) << r.out;
}

TEST(cli, validate_json_gives_role_and_counts_per_file) {
  temp_dir tmp;
  const auto root = tmp.write("p/comfy-env-root.toml", "[apt]\npackages = [\"x\"]\n");
  const auto r = run("validate --json '" + root.string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["files"].size(), 1u);
  EXPECT_EQ(doc["files"][0]["role"], "root manifest");
  EXPECT_EQ(doc["files"][0]["valid"], true);
  EXPECT_EQ(doc["files"][0]["warnings"], 1);
  EXPECT_EQ(doc["files"][0]["diagnostics"][0]["key"], "[apt]");
  EXPECT_EQ(doc["files"][0]["diagnostics"][0]["line"], 1);
}

TEST(cli, validate_accepts_the_example_deployment) {
  const auto r = run("validate examples/sim-deployment.toml");
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

std::set<std::string> sim_plugin_kinds(const nlohmann::json& doc) {
  std::set<std::string> kinds;
  for (const auto& p : doc["plugins"]) {
    if (p["backend"] == "sim") kinds.insert(p["kind"].get<std::string>());
    if (p["name"] == "sim-pager-l2") {
      EXPECT_EQ(p["min_level"], 2);
      EXPECT_EQ(p["max_level"], 2);
    }
  }
  return kinds;
}

TEST(cli, plugins_scans_the_deployments_search_paths) {
  temp_dir tmp;
  const auto file =
      tmp.write("d.toml", "[plugins]\nsearch_paths = [\"" +
                              (fs::path(ORCH_BINARY_DIR) / "plugins/lib").string() + "\"]\n");
  const auto r = run("plugins --json '" + file.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["directories"].size(), 1u);
  EXPECT_EQ(sim_plugin_kinds(doc), (std::set<std::string>{"allocator", "backend", "pager"}));
}

TEST(cli, plugins_on_the_example_deployment_reads_the_plugins_built_with_this_comfy_orch) {
  // The example names no build path: whichever build directory comfy-orch runs from, its own
  // plugin directory is read (docs/deployment.md, "Install and relocation").
  const auto r = run("plugins examples/sim-deployment.toml --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path build = fs::path(ORCH_BINARY_DIR) / "plugins" / "lib";
  const auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["directories"].size(), 1u);
  EXPECT_EQ(fs::path(doc["directories"][0].get<std::string>()).lexically_normal(),
            build.lexically_normal());
  EXPECT_EQ(sim_plugin_kinds(doc), (std::set<std::string>{"allocator", "backend", "pager"}));
}

TEST(cli, validate_of_a_missing_file_is_a_usage_error) {
  const auto r = run("validate /nonexistent/comfy-orch.toml");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("nonexistent"), std::string::npos) << r.err;
}

}  // namespace
