// `comfy-orch run` when it cannot start: every cause is printed with its fix and the command
// exits non-zero, never hangs (docs/cli.md).
// Each run is wrapped in `timeout -s KILL`, so a hang fails the test (exit 137) instead of
// hanging the suite; no test asserts how fast it was.
#include <sys/wait.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../../unit/manifests/manifest_test_support.hpp"
#include "command_runner.hpp"

namespace {

namespace fs = std::filesystem;
using orch::manifests::testing::temp_dir;

constexpr int killed_by_timeout = 128 + 9;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool built_with_address_sanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool built_with_address_sanitizer = true;
#else
constexpr bool built_with_address_sanitizer = false;
#endif
#else
constexpr bool built_with_address_sanitizer = false;
#endif

using orch::testing::command_result;

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// Runs `comfy-orch <args>` in a shell that first runs `shell_prefix` (e.g. "ulimit -n 8;").
command_result run(const std::string& args, const std::string& shell_prefix = "") {
  return orch::testing::run_command("cd '" + std::string(ORCH_SOURCE_DIR) +
                                    "' && timeout -s KILL 30 sh -c \"" + shell_prefix + " exec '" +
                                    COMFY_ORCH_BIN + "' " + args + "\"");
}

std::string prompt_file() {
  return std::string(ORCH_SOURCE_DIR) + "/examples/prompts/image-ops.json";
}

// A deployment with the example packs and the build's plugins, with `extra` appended.
std::string deployment_text(const std::string& host, const std::string& extra) {
  const std::string src = ORCH_SOURCE_DIR;
  return "[host]\n" + host + "\n[packs]\npaths = [\"" + src + "/examples/packs/ComfyUI-ImageOps\"]\n" +
         "library_paths = [\"" + std::string(ORCH_EXAMPLES_LIB_DIR) + "\"]\n" + extra;
}

TEST(startup_failures, an_empty_deployment_file_runs_no_worker_and_ends) {
  temp_dir dir;
  write(dir.path() / "empty.toml", "");
  const auto r = run("run '" + (dir.path() / "empty.toml").string() + "' --prompt '" +
                     prompt_file() + "'");
  ASSERT_NE(r.exit_code, killed_by_timeout) << "hung";
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;  // the prompt's nodes are provided by no pack
  EXPECT_NE(r.err.find("names no packs"), std::string::npos) << r.err;
}

TEST(startup_failures, a_gpu_device_that_cannot_be_opened_says_why_and_exits) {
  for (const char* device : {"cuda:0", "hip:0"}) {
    temp_dir dir;
    write(dir.path() / "d.toml", deployment_text(std::string("device = \"") + device + "\"", ""));
    const auto r = run("run '" + (dir.path() / "d.toml").string() + "' --prompt '" +
                       prompt_file() + "'");
    ASSERT_NE(r.exit_code, killed_by_timeout) << device << " hung";
    EXPECT_NE(r.exit_code, 0) << device;
    // Either the build has no such backend (preflight, exit 1, names the key), or it has one
    // and the device does not open here (exit 2, the driver's own words).
    if (r.exit_code == 1) {
      EXPECT_NE(r.err.find("host.device"), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("fix:"), std::string::npos) << r.err;
    } else {
      EXPECT_EQ(r.exit_code, 2) << r.err;
      EXPECT_NE(r.err.find("cannot start the host"), std::string::npos) << r.err;
    }
  }
}

TEST(startup_failures, a_pinned_pool_above_the_machine_budget_is_refused_with_its_line) {
  temp_dir dir;
  write(dir.path() / "d.toml",
        deployment_text("device = \"sim\"", "[shm]\npinned_pool_size = \"100000GiB\"\n"));
  const auto r =
      run("run '" + (dir.path() / "d.toml").string() + "' --prompt '" + prompt_file() + "'");
  ASSERT_NE(r.exit_code, killed_by_timeout) << "hung";
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("d.toml:7:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("shm.pinned_pool_size"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("pinned budget"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("worker"), std::string::npos) << "a worker started: " << r.out;
}

TEST(startup_failures, search_paths_without_a_backend_plugin_are_named_and_nothing_starts) {
  temp_dir dir;
  fs::create_directories(dir.path() / "libs");
  fs::copy_file("/etc/hostname", dir.path() / "libs" / "libz.so.1");
  write(dir.path() / "d.toml",
        deployment_text("device = \"sim\"", "[plugins]\nsearch_paths = [\"/etc/passwd\", \"libs\", "
                                            "\"missing\"]\n"));
  const auto r =
      run("run '" + (dir.path() / "d.toml").string() + "' --prompt '" + prompt_file() + "'");
  ASSERT_NE(r.exit_code, killed_by_timeout) << "hung";
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("/etc/passwd is not a directory"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("holds no comfy-orch plugin"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("missing does not exist"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("orch-backend-sim.so"), std::string::npos) << r.err;
}

TEST(startup_failures, the_example_copied_anywhere_runs_with_what_was_built_with_comfy_orch) {
  // It names no build path: comfy-orch finds its plugins and the example packs' libraries from
  // where it runs (docs/deployment.md, "Install and relocation").
  temp_dir dir;
  fs::create_directories(dir.path() / "examples");
  fs::copy(std::string(ORCH_SOURCE_DIR) + "/examples", dir.path() / "examples",
           fs::copy_options::recursive);
  const auto r = run("run '" + (dir.path() / "examples/sim-deployment.toml").string() +
                     "' --prompt '" + prompt_file() + "'");
  ASSERT_NE(r.exit_code, killed_by_timeout) << "hung";
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("execution_success"), std::string::npos) << r.out;
}

TEST(startup_failures, validate_reports_what_run_would_refuse) {
  temp_dir dir;
  write(dir.path() / "d.toml",
        deployment_text("device = \"sim\"",
                        "[plugins]\nsearch_paths = [\"/etc\"]\n[shm]\npinned_pool_size = "
                        "\"100000GiB\"\n"));
  const auto r = run("validate --json '" + (dir.path() / "d.toml").string() + "'");
  ASSERT_EQ(r.exit_code, 1) << r.out << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  std::set<std::string> keys;
  for (const auto& diag : doc["files"][0]["diagnostics"]) keys.insert(diag["key"].get<std::string>());
  EXPECT_TRUE(keys.count("plugins.search_paths")) << r.out;
  EXPECT_TRUE(keys.count("host.device")) << r.out;
  EXPECT_TRUE(keys.count("shm.pinned_pool_size")) << r.out;
}

TEST(startup_failures, run_and_plugins_read_the_same_directories) {
  // No search_paths: both fall back to the build's plugin directory, so run starts.
  temp_dir dir;
  write(dir.path() / "d.toml", deployment_text("device = \"sim\"", ""));
  const auto plugins = run("plugins --json '" + (dir.path() / "d.toml").string() + "'");
  ASSERT_EQ(plugins.exit_code, 0) << plugins.err;
  const auto doc = nlohmann::json::parse(plugins.out);
  ASSERT_EQ(doc["directories"].size(), 1u);
  EXPECT_EQ(fs::path(doc["directories"][0].get<std::string>()), fs::path(ORCH_PLUGIN_BUILD_DIR));
  const auto r =
      run("run '" + (dir.path() / "d.toml").string() + "' --prompt '" + prompt_file() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

TEST(startup_failures, a_low_open_file_limit_is_an_error_not_an_abort) {
  for (const char* limit : {"8", "12", "16"}) {
    temp_dir dir;
    write(dir.path() / "d.toml", deployment_text("device = \"sim\"", ""));
    const auto r = run("run '" + (dir.path() / "d.toml").string() + "' --prompt '" +
                           prompt_file() + "'",
                       std::string("ulimit -n ") + limit + ";");
    ASSERT_NE(r.exit_code, killed_by_timeout) << limit << " hung";
    // 2: the start-up failure, said; a signal (an abort) would read 128 + its number.
    EXPECT_EQ(r.exit_code, 2) << "ulimit -n " << limit << ": " << r.err;
    EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("ulimit -n"), std::string::npos) << limit << ": " << r.err;
  }
}

// The smallest `ulimit -v` (KiB) under which `comfy-orch --version` starts. Under AddressSanitizer
// that is about 20 TiB: its shadow memory and allocator space are reserved before main().
std::uint64_t address_space_to_start() {
  std::uint64_t fails = 0;
  std::uint64_t starts = std::uint64_t{1} << 36;  // 64 TiB
  const auto at_most = run("--version", "ulimit -v " + std::to_string(starts) + ";");
  EXPECT_EQ(at_most.exit_code, 0) << "comfy-orch --version does not start under ulimit -v "
                                  << starts << ": " << at_most.err;
  while (starts - fails > 1024) {
    const std::uint64_t mid = fails + (starts - fails) / 2;
    (run("--version", "ulimit -v " + std::to_string(mid) + ";").exit_code == 0 ? starts : fails) =
        mid;
  }
  return starts;
}

// 200,000 KiB of address space, less than the 256 MiB pinned pool; under AddressSanitizer, counted
// above what its runtime reserves.
TEST(startup_failures, a_small_address_space_limit_is_an_error_not_an_abort) {
  const std::uint64_t limit =
      (built_with_address_sanitizer ? address_space_to_start() : 0) + 200000;
  temp_dir dir;
  write(dir.path() / "d.toml", deployment_text("device = \"sim\"", ""));
  const auto r = run("run '" + (dir.path() / "d.toml").string() + "' --prompt '" + prompt_file() +
                         "'",
                     "ulimit -v " + std::to_string(limit) + ";");
  ASSERT_NE(r.exit_code, killed_by_timeout) << "hung";
  EXPECT_EQ(r.exit_code, 2) << r.err;  // a start-up failure, not an abort (128 + 6)
  EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ulimit -v"), std::string::npos) << r.err;
}

TEST(startup_failures, a_pack_manifest_error_stops_run_as_validate_reports_it) {
  temp_dir dir;
  const fs::path pack = dir.path() / "ComfyUI-Bad";
  write(pack / "nodes" / "comfy-env.toml",
        "[env_vars]\n\"A\\u0000B\" = \"x\"\n");
  write(dir.path() / "d.toml", "[host]\ndevice = \"sim\"\n[packs]\npaths = [\"" + pack.string() +
                                   "\"]\n");
  const auto v = run("validate '" + (dir.path() / "d.toml").string() + "'");
  ASSERT_EQ(v.exit_code, 1) << v.out << v.err;
  const auto r =
      run("run '" + (dir.path() / "d.toml").string() + "' --prompt '" + prompt_file() + "'");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("env_vars"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nothing started"), std::string::npos) << r.err;
}

TEST(unheard_inputs, a_pager_flag_that_is_neither_true_nor_false_is_warned_about_once) {
  temp_dir dir;
  write(dir.path() / "d.toml", deployment_text("device = \"sim\"", ""));
  const auto r = run("run '" + (dir.path() / "d.toml").string() + "' --prompt '" + prompt_file() +
                         "'",
                     "export ORCH_WORKER_PAGER=maybe;");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // One warning; the worker's own manager line may quote the reason, as an info line.
  const std::string warning = "ORCH_WORKER_PAGER = \"maybe\" is neither true nor false";
  int warnings = 0;
  std::istringstream lines(r.err);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(warning) != std::string::npos && line.find("[warning]") != std::string::npos) {
      ++warnings;
    }
  }
  EXPECT_EQ(warnings, 1) << r.err;
}

}  // namespace
