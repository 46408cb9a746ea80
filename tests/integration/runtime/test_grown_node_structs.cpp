// A pack built against longer node ABI structs than this worker's (grown_structs_pack.cpp): the
// worker walks its classes and inputs by each element's own struct_size (nodes.h), reports them
// to the host as declared and runs them. Real host, real workers.
#include <fstream>

#include "../cli/command_runner.hpp"
#include "runtime_fixture.hpp"

namespace orch::runtime_testing {
namespace {

class grown_node_structs : public runtime_test {
 protected:
  // The fixture's deployment plus the grown-structs pack.
  fs::path deployment() {
    const fs::path file = write_deployment();
    write(dir_ / "packs/ComfyUI-GrownStructs/nodes/comfy-env.toml",
          "[worker]\nlibrary = \"liborch_pack_grown_structs.so\"\n");
    std::string text = orch::testing::slurp(file);
    const std::string last = "\"packs/ComfyUI-TestNodes\"]";
    const auto at = text.find(last);
    if (at == std::string::npos) {
      ADD_FAILURE() << "the fixture's deployment changed shape:\n" << text;
      return file;
    }
    text.replace(at, last.size(), "\"packs/ComfyUI-TestNodes\", \"packs/ComfyUI-GrownStructs\"]");
    std::ofstream(file, std::ios::trunc) << text;
    return file;
  }
};

TEST_F(grown_node_structs, a_pack_built_against_longer_structs_reports_its_classes_as_declared) {
  ASSERT_NO_FATAL_FAILURE(start_file(deployment()));
  const auto* add = host_->catalogue().find("GrownAdd");
  ASSERT_NE(add, nullptr) << "the second class is found past the first one's appended fields";
  const auto* repeat = host_->catalogue().find("GrownRepeat");
  ASSERT_NE(repeat, nullptr);
  EXPECT_EQ(repeat->category, "test/grown");
  ASSERT_EQ(add->inputs.size(), 3u);
  EXPECT_EQ(add->inputs[0].name, "a");
  EXPECT_EQ(add->inputs[1].name, "b");
  EXPECT_EQ(add->inputs[2].name, "c");
  EXPECT_FALSE(add->inputs[2].required);
  ASSERT_TRUE(add->inputs[1].default_value.has_value());
  EXPECT_EQ(*add->inputs[1].default_value, 2);
  ASSERT_EQ(repeat->inputs.size(), 2u);
  EXPECT_EQ(repeat->inputs[1].name, "times");
  ASSERT_TRUE(repeat->inputs[0].default_value.has_value());
  EXPECT_EQ(*repeat->inputs[0].default_value, "ab");
}

TEST_F(grown_node_structs, a_pack_built_against_longer_structs_runs_its_nodes) {
  ASSERT_NO_FATAL_FAILURE(start_file(deployment()));
  const auto outcome = run(R"({
    "1": {"class_type": "GrownAdd", "inputs": {"a": 2, "b": 5, "c": 10}},
    "2": {"class_type": "GrownAdd", "inputs": {"a": 2, "b": 5}},
    "3": {"class_type": "GrownRepeat", "inputs": {"text": "abcd", "times": 3}}})");
  ASSERT_TRUE(outcome.ok) << (outcome.error ? outcome.error->dump() : "");
  EXPECT_EQ(outcome.nodes.at("1").outputs.at(0).get<std::int64_t>(), 17);
  EXPECT_EQ(outcome.nodes.at("2").outputs.at(0).get<std::int64_t>(), 7);  // c absent
  EXPECT_EQ(outcome.nodes.at("3").outputs.at(0).get<std::int64_t>(), 12);
}

}  // namespace
}  // namespace orch::runtime_testing
