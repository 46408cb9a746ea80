// Memory semantics across processes (docs/memory-semantics.md), end to end: the one pinned
// budget that eight workers share, and the documented example run through the CLI. Each
// behaviour has its own file as well: test_memory_selection.cpp (which manager and plugins a
// worker gets), test_memory_releases.cpp (release mirroring, eviction through stand-ins) and
// test_memory_divergence.cpp (divergence reports); the fixture is memory_semantics_fixture.hpp.
#include <set>
#include <sstream>

#include "memory_semantics_fixture.hpp"

namespace orch::runtime_testing {
namespace {

using nlohmann::json;

// --- The one pinned budget ---------------------------------------------------------------------

TEST_F(memory_semantics, eight_workers_never_promise_more_than_one_pinned_budget) {
  // Eight packs of the test library, each asking for a third of the budget to pin and keep.
  ASSERT_NO_FATAL_FAILURE(start_test_library_packs(8, "\n[shm]\npinned_pool_size = \"16MiB\"\n"));
  const auto workers = host_->on_io_thread([&] { return host_->workers().workers(); });
  ASSERT_EQ(workers.size(), 8u);
  const std::uint64_t budget = host_->on_io_thread([&] { return host_->memory().budget_bytes(); });
  const std::int64_t third_mib = static_cast<std::int64_t>(budget / 3 / mib);
  int refused = 0;
  for (const auto& w : workers) {
    ASSERT_EQ(w.state, runtime::worker_state::ready);
    const json r = call(w.env, "TestSleep", {{"ms", 0}, {"pin_mib", third_mib}}, 1);
    refused += r["status"] == "error" ? 1 : 0;
    const std::uint64_t sum = host_->on_io_thread([&] {
      std::uint64_t total = 0;
      auto& control = host_->memory().control();
      for (std::uint32_t s = 0; s < control.slot_count(); ++s) {
        total += control.claimed_reserved(s);
      }
      return total;
    });
    EXPECT_LE(sum, budget);
  }
  EXPECT_GE(refused, 5) << "at most two thirds-of-the-budget pins fit next to the pool";
}

// The documented example end to end through the CLI: examples/sim-pressure-deployment.toml with
// its pack paths made absolute, run by `comfy-orch run --json --free-after`. The example names no
// build path: comfy-orch finds this build's plugins and node libraries from its own location
// (docs/deployment.md).
TEST(memory_semantics_example, the_pressure_example_shows_every_behaviour_it_documents) {
  char tmpl[] = "/tmp/orch-example-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path dir = tmpl;
  const fs::path examples = fs::path(ORCH_SOURCE_DIR) / "examples";
  std::ifstream in(examples / "sim-pressure-deployment.toml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto replace = [&text](const std::string& from, const std::string& to) {
    const auto at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  };
  for (const char* pack : {"ComfyUI-ImageOps", "ComfyUI-SimSampler", "ComfyUI-LegacySampler"}) {
    replace(std::string("\"packs/") + pack + "\"", "\"" + (examples / "packs" / pack).string() + "\"");
  }
  std::ofstream(dir / "deployment.toml") << text;
  const std::string cmd = std::string(ORCH_TEST_COMFY_ORCH) + " run " +
                          (dir / "deployment.toml").string() + " --prompt " +
                          (examples / "prompts/two-managers.json").string() +
                          " --json --free-after 2>" + (dir / "log.txt").string();
  FILE* out = ::popen(cmd.c_str(), "r");
  ASSERT_NE(out, nullptr);
  std::string stdout_text;
  char buffer[4096];
  while (std::size_t n = std::fread(buffer, 1, sizeof buffer, out)) stdout_text.append(buffer, n);
  const int status = ::pclose(out);
  std::ifstream log_in(dir / "log.txt");
  const std::string log((std::istreambuf_iterator<char>(log_in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(WEXITSTATUS(status), 0) << stdout_text << log;

  nlohmann::json table, receipts;
  bool success = false;
  std::istringstream lines(stdout_text);
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    if (j["type"] == "memory_table") table = j["data"];
    if (j["type"] == "free") receipts = j["data"];
    if (j["type"] == "execution_success") success = true;
  }
  EXPECT_TRUE(success) << stdout_text;
  // The WARNING, once, for the pack that pins the ledger.
  EXPECT_NE(log.find("WARNING legacysampler-nodes: memory manager=ledger, host=pager"),
            std::string::npos)
      << log;
  // Eviction through a stand-in, then the node once more.
  EXPECT_NE(log.find("through its stand-in"), std::string::npos) << log;
  EXPECT_NE(log.find("freed through stand-ins, retrying"), std::string::npos) << log;
  // Node-boundary releases.
  EXPECT_NE(log.find("node boundary: released"), std::string::npos) << log;
  // A mixed run in the table, and the pinned reservations within one budget.
  ASSERT_TRUE(table.is_array()) << stdout_text;
  std::uint64_t pinned = 0, budget = 0;
  std::set<std::string> managers;
  for (const auto& row : table) {
    pinned += row["pinned_reserved_bytes"].get<std::uint64_t>();
    budget = row["budget_bytes"].get<std::uint64_t>();
    if (row["mode"] == "worker") {
      managers.insert(row["manager"].get<std::string>());
      EXPECT_TRUE(row["settings_match"].get<bool>()) << row.dump();
      EXPECT_GE(row["boundary_releases"].get<std::uint64_t>(), 1u) << row.dump();
    }
  }
  EXPECT_EQ(managers, (std::set<std::string>{"pager", "ledger"}));
  EXPECT_LE(pinned, budget);
  // --free-after: every worker answered, and the two samplers gave their models back.
  ASSERT_TRUE(receipts.is_object()) << stdout_text;
  EXPECT_EQ(receipts.size(), 3u);
  EXPECT_GT(receipts["simsampler-nodes"]["freed"].get<std::uint64_t>(), 0u);
  EXPECT_GT(receipts["legacysampler-nodes"]["freed"].get<std::uint64_t>(), 0u);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace orch::runtime_testing
