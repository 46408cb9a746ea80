// Parsing ComfyUI API-format prompts, including the real ones of shared/corpus/prompts.
#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>

#include "orch/orchestrator/prompt.hpp"
#include "orch/orchestrator/prompt_validation.hpp"

namespace orch::orchestrator {
namespace {

namespace fs = std::filesystem;

fs::path prompts_dir() {
  if (const char* dir = std::getenv("ORCH_SHARED_DIR")) return fs::path(dir) / "corpus/prompts";
  return fs::path(ORCH_SOURCE_DIR) / ".." / "shared" / "corpus" / "prompts";
}

TEST(prompt, parses_links_literals_and_titles) {
  auto p = parse_prompt(R"({"1": {"class_type": "A", "inputs": {"x": 3, "s": "hi"},
                                  "_meta": {"title": "First"}},
                            "2": {"class_type": "B", "inputs": {"in": ["1", 0]}}})");
  ASSERT_TRUE(p.ok()) << p.err().message;
  ASSERT_EQ(p->nodes.size(), 2u);
  EXPECT_EQ(p->nodes.at("1").title, "First");
  EXPECT_EQ(std::get<nlohmann::json>(p->nodes.at("1").inputs.at("x")), 3);
  const auto& link = std::get<node_link>(p->nodes.at("2").inputs.at("in"));
  EXPECT_EQ(link.node_id, "1");
  EXPECT_EQ(link.slot, 0);
}

TEST(prompt, accepts_a_request_body_with_a_prompt_key) {
  auto p =
      parse_prompt(R"({"prompt": {"1": {"class_type": "A", "inputs": {}}}, "client_id": "c"})");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->nodes.size(), 1u);
}

TEST(prompt, numeric_link_ids_are_links_too) {
  auto p = parse_prompt(R"({"1": {"class_type": "A", "inputs": {"in": [2, 1]}}})");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(std::get<node_link>(p->nodes.at("1").inputs.at("in")).node_id, "2");
}

TEST(prompt, malformed_link_stays_a_literal_for_validation_to_report) {
  auto p = parse_prompt(R"({"1": {"class_type": "A", "inputs": {"in": ["2", "x"]}}})");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(std::holds_alternative<nlohmann::json>(p->nodes.at("1").inputs.at("in")));
}

TEST(prompt, rejects_invalid_json_with_the_byte_offset) {
  auto p = parse_prompt("{\"1\": {");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.err().code, "invalid_prompt");
  EXPECT_NE(p.err().message.find("byte"), std::string::npos);
}

TEST(prompt, rejects_a_node_without_class_type_naming_it) {
  auto p = parse_prompt(R"({"7": {"inputs": {}}})");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.err().message.find("'7'"), std::string::npos);
}

TEST(prompt, rejects_non_object_shapes) {
  EXPECT_FALSE(parse_prompt("[]").ok());
  EXPECT_FALSE(parse_prompt(R"({"1": 5})").ok());
  EXPECT_FALSE(parse_prompt(R"({"1": {"class_type": "A", "inputs": []}})").ok());
}

TEST(prompt_corpus, every_real_prompt_parses_and_is_refused_for_each_unknown_class) {
  if (!fs::exists(prompts_dir())) GTEST_SKIP() << "prompt corpus not found at " << prompts_dir();
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(prompts_dir())) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    auto p = parse_prompt_file(entry.path());
    ASSERT_TRUE(p.ok()) << entry.path() << ": " << p.err().message;
    // No pack provides any of these classes: every node is missing_node_type, by id and class.
    const auto report = validate_prompt(*p, node_catalogue{});
    ASSERT_FALSE(report.ok());
    EXPECT_EQ(report.error->type, "missing_node_type");
    ASSERT_EQ(report.node_errors.size(), p->nodes.size()) << entry.path();
    for (const auto& [id, node] : p->nodes) {
      const auto& ne = report.node_errors.at(id);
      ASSERT_EQ(ne.errors.size(), 1u);
      EXPECT_EQ(ne.errors[0].type, "missing_node_type");
      EXPECT_EQ(ne.errors[0].extra_info["node_id"], id);
      EXPECT_EQ(ne.errors[0].extra_info["class_type"], node.class_type);
      EXPECT_NE(ne.errors[0].message.find(node.class_type), std::string::npos);
    }
  }
  EXPECT_EQ(files, 9u);
}

}  // namespace
}  // namespace orch::orchestrator
