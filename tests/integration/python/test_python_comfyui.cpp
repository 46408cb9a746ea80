// Python packs inside a ComfyUI tree ([comfyui] root; the fixture tree in comfyui/): V3 classes
// (comfy_api.latest io.ComfyNode) reach the host with their schema and run, and ComfyUI's own
// ProgressBar and interrupt check work unchanged inside a worker (docs/python.md).
#include "python_fixture.hpp"

namespace orch::python_testing {
namespace {

class python_comfyui : public python_worker_test {};

TEST_F(python_comfyui, v3_classes_from_mappings_and_from_the_entrypoint_reach_the_host) {
  ASSERT_NO_FATAL_FAILURE(start_python({"PyV3"}, /*comfyui=*/true));
  const auto* scale = host_->catalogue().find("V3Scale");
  ASSERT_NE(scale, nullptr) << "V3Scale is not in the catalogue";
  EXPECT_EQ(scale->display_name, "Scale (V3)");
  EXPECT_EQ(scale->category, "test/v3");
  ASSERT_EQ(scale->inputs.size(), 4u);
  EXPECT_EQ(scale->inputs[1].name, "factor");
  EXPECT_EQ(scale->inputs[1].max, 8.0);
  EXPECT_EQ(scale->inputs[2].type, "COMBO");
  EXPECT_EQ(scale->inputs[2].options, (std::vector<std::string>{"mul", "add"}));
  EXPECT_FALSE(scale->inputs[3].required);
  EXPECT_EQ(scale->outputs, (std::vector<std::string>{"IMAGE", "STRING"}));
  EXPECT_TRUE(scale->output_node);
  ASSERT_NE(host_->catalogue().find("V3Steps"), nullptr) << "the extension's node is missing";
  EXPECT_TRUE(host_->catalogue().find("V3Steps")->output_node);
}

TEST_F(python_comfyui, a_v3_node_runs_with_its_hidden_values_and_returns_a_node_output) {
  ASSERT_NO_FATAL_FAILURE(start_python({"PyContract", "PyV3"}, /*comfyui=*/true));
  const auto o = run_json(
      {{"1", {{"class_type", "MakeImage"}, {"inputs", {{"value", 0.5}}}}},
       {"2", {{"class_type", "V3Scale"},
              {"inputs", {{"image", {"1", 0}}, {"factor", 3.0}, {"mode", "mul"}}}}},
       {"3", {{"class_type", "Describe"}, {"inputs", {{"image", {"2", 0}}}}}}});
  ASSERT_TRUE(o.ok) << o.error->dump();
  EXPECT_EQ(output(o, "2", 1), "2/None");
  EXPECT_DOUBLE_EQ(output(o, "3", 2).get<double>(), 1.5 * 4 * 8 * 3);
}

TEST_F(python_comfyui, v3_validate_inputs_and_fingerprint_inputs_run_only_where_a_node_has_them) {
  ASSERT_NO_FATAL_FAILURE(start_python({"PyV3"}, /*comfyui=*/true));
  // comfy_api's base class declares both methods; V3Scale inherits them and so has neither.
  EXPECT_FALSE(host_->catalogue().find("V3Scale")->validate_inputs.present);
  EXPECT_FALSE(host_->catalogue().find("V3Scale")->is_changed);
  EXPECT_TRUE(host_->catalogue().find("V3Steps")->validate_inputs.present);

  auto p = executor::parse_prompt(
      json{{"1", {{"class_type", "V3Steps"}, {"inputs", {{"steps", 13}}}}}}.dump());
  ASSERT_TRUE(p.ok());
  const auto refused = validate(*p);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.node_errors.at("1").errors.at(0).type, "custom_validation_failed");
  EXPECT_EQ(refused.node_errors.at("1").errors.at(0).details, "13 steps are not allowed");

  const auto o = run_json({{"1", {{"class_type", "V3Steps"}, {"inputs", {{"steps", 2}}}}}});
  ASSERT_TRUE(o.ok) << o.error->dump();
  EXPECT_EQ(o.nodes.at("1").change_key, "steps:2");
}

TEST_F(python_comfyui, comfyuis_progress_bar_reports_the_nodes_progress) {
  ASSERT_NO_FATAL_FAILURE(start_python({"PyV3"}, /*comfyui=*/true));
  const auto o = run_json({{"4", {{"class_type", "LegacyProgress"}, {"inputs", {{"steps", 3}}}}},
                           {"5", {{"class_type", "V3Steps"}, {"inputs", {{"steps", 4}}}}}});
  ASSERT_TRUE(o.ok) << o.error->dump();
  std::vector<std::string> seen;
  for (const auto& e : events_.events()) {
    if (e["type"] != "progress") continue;
    seen.push_back(e["data"]["node"].get<std::string>() + ":" + e["data"]["value"].dump() + "/" +
                   e["data"]["max"].dump());
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"4:1/3", "4:2/3", "4:3/3", "5:1/4", "5:2/4", "5:3/4",
                                            "5:4/4"}));
}

TEST_F(python_comfyui, an_interrupt_reaches_comfyuis_own_check_inside_the_node) {
  ASSERT_NO_FATAL_FAILURE(start_python({"PyV3"}, /*comfyui=*/true));
  auto running = run_async(
      json{{"1", {{"class_type", "V3Steps"}, {"inputs", {{"steps", 3000}}}}}}.dump(), "1");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  executor_->interrupt();
  const auto o = running.get();
  ASSERT_FALSE(o.ok);
  EXPECT_EQ((*o.error)["exception_type"], "interrupted") << o.error->dump();
}

TEST_F(python_comfyui, a_comfyui_root_without_comfy_is_refused_naming_the_key) {
  write(dir_ / "not-comfyui/README", "x");
  write(dir_ / "d.toml", "[comfyui]\nroot = \"not-comfyui\"\n");
  manifests::diagnostics diags;
  EXPECT_FALSE(manifests::load_deployment(dir_ / "d.toml", diags).has_value());
  std::string all;
  for (const auto& d : diags.items()) all += d.format() + "\n";
  EXPECT_NE(all.find("comfyui.root: \"not-comfyui\""), std::string::npos) << all;
  EXPECT_NE(all.find("is not a ComfyUI tree"), std::string::npos) << all;
}

}  // namespace
}  // namespace orch::python_testing
