// Every real prompt of the corpus parses, and against the example packs each one is refused
// before any node runs, with missing_node_type naming the first node whose class no pack
// provides, and orch_missing_nodes each of them
// (docs/runtime.md). The corpus is read in place: $ORCH_SHARED_DIR/corpus/prompts, else
// ../shared/corpus/prompts next to the source tree; the test skips with a message without it.
#include <set>

#include "runtime_fixture.hpp"

namespace orch::runtime_testing {
namespace {

fs::path prompts_dir() {
  if (const char* dir = std::getenv("ORCH_SHARED_DIR")) return fs::path(dir) / "corpus/prompts";
  return fs::path(ORCH_SOURCE_DIR) / ".." / "shared" / "corpus" / "prompts";
}

class corpus_refusal : public runtime_test {};

TEST_F(corpus_refusal, every_corpus_prompt_is_refused_with_missing_node_type_before_running) {
  const fs::path dir = prompts_dir();
  if (!fs::is_directory(dir)) {
    GTEST_SKIP() << "no prompt corpus at " << dir
                 << " (set ORCH_SHARED_DIR to the shared/ directory to run it)";
  }
  ASSERT_NO_FATAL_FAILURE(start());
  ASSERT_GT(host_->catalogue().size(), 0u);
  std::size_t prompts = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    ++prompts;
    SCOPED_TRACE(entry.path().filename().string());
    auto p = executor::parse_prompt_file(entry.path());
    ASSERT_TRUE(p.ok()) << p.err().message;
    const auto report = executor::validate_prompt(*p, host_->catalogue());
    ASSERT_FALSE(report.ok());
    std::set<std::string> unknown;
    for (const auto& [id, node] : p->nodes) {
      if (host_->catalogue().find(node.class_type) == nullptr) unknown.insert(id);
    }
    ASSERT_FALSE(unknown.empty());
    // ComfyUI's error names the first unknown node; comfy-orch lists every one beside it.
    EXPECT_EQ(report.error->type, "missing_node_type");
    EXPECT_TRUE(report.node_errors.empty());
    std::set<std::string> listed;
    for (const auto& m : report.error->extra_info["orch_missing_nodes"]) {
      const std::string id = m["node_id"];
      listed.insert(id);
      EXPECT_EQ(m["class_type"], p->nodes.at(id).class_type);
    }
    EXPECT_EQ(listed, unknown);
  }
  EXPECT_GT(prompts, 0u);
  EXPECT_TRUE(events_.events().empty()) << "a refused prompt must run nothing";
}

TEST_F(corpus_refusal, the_cli_refuses_a_corpus_prompt_before_any_event) {
  const fs::path dir = prompts_dir();
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no prompt corpus at " << dir;
  fs::path first;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") first = entry.path();
  }
  const fs::path deployment = write_deployment();
  const std::string cmd = std::string(ORCH_TEST_COMFY_ORCH) + " run " + deployment.string() +
                          " --prompt '" + first.string() + "' --json 2>/dev/null";
  FILE* out = ::popen(cmd.c_str(), "r");
  ASSERT_NE(out, nullptr);
  std::string text;
  char buffer[4096];
  while (std::size_t n = std::fread(buffer, 1, sizeof buffer, out)) text.append(buffer, n);
  const int status = ::pclose(out);
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_NE(text.find("\"validation_error\""), std::string::npos);
  EXPECT_NE(text.find("missing_node_type"), std::string::npos);
  EXPECT_EQ(text.find("execution_start"), std::string::npos);
}

}  // namespace
}  // namespace orch::runtime_testing
