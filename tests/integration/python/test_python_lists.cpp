// ComfyUI's list mapping, the class methods the host forwards to a worker (VALIDATE_INPUTS,
// IS_CHANGED) and the hidden values DYNPROMPT and EXTRA_PNGINFO, through a real Python worker
// (tests/integration/python/packs/PyLists; docs/python.md).
#include "python_fixture.hpp"

namespace orch::python_testing {
namespace {

class python_lists : public python_worker_test {
 protected:
  void SetUp() override {
    python_worker_test::SetUp();
    if (!IsSkipped()) {
      ASSERT_NO_FATAL_FAILURE(start_python({"PyLists"}));
    }
  }
  executor::validation_report check(const json& prompt) {
    auto p = executor::parse_prompt(prompt.dump());
    EXPECT_TRUE(p.ok());
    return validate(*p);
  }
  static std::vector<std::string> error_types(const executor::validation_report& r,
                                              const std::string& node) {
    std::vector<std::string> out;
    auto it = r.node_errors.find(node);
    if (it == r.node_errors.end()) return out;
    for (const auto& e : it->second.errors) out.push_back(e.type);
    return out;
  }
};

TEST_F(python_lists, a_list_output_maps_its_consumer_once_per_item_and_a_list_input_takes_all) {
  const auto o = run_json(
      {{"1", {{"class_type", "Fanout"}, {"inputs", {{"count", 4}}}}},
       {"2", {{"class_type", "Scale"}, {"inputs", {{"value", {"1", 0}}, {"factor", 10}}}}},
       {"3", {{"class_type", "Join"}, {"inputs", {{"values", {"2", 0}}, {"separator", ","}}}}}});
  ASSERT_TRUE(o.ok) << o.error->dump();
  EXPECT_EQ(o.nodes.at("1").output_lists, json::parse(R"([[1,2,3,4],["fanout of 4"]])"));
  // Scale ran four times: one item per call, collected into its output's list.
  EXPECT_EQ(o.nodes.at("2").output_lists, json::parse("[[10,20,30,40]]"));
  EXPECT_EQ(o.nodes.at("2").outputs, json::parse("[[10,20,30,40]]"));
  // Join (INPUT_IS_LIST) ran once, with the list; its literal separator is a list of one.
  EXPECT_EQ(output(o, "3", 0), "10,20,30,40");
}

// numpy costs a worker's start about 40 ms: a pack that uses no tensors never pays it, through
// lists, ints and strings crossing in and out.
TEST_F(python_lists, a_pack_without_tensors_runs_without_importing_numpy_or_torch) {
  const auto o = run_json(
      {{"1", {{"class_type", "Fanout"}, {"inputs", {{"count", 2}}}}},
       {"2", {{"class_type", "Join"}, {"inputs", {{"values", {"1", 0}}, {"separator", ","}}}}},
       {"3", {{"class_type", "Imported"}, {"inputs", json::object()}}}});
  ASSERT_TRUE(o.ok) << o.error->dump();
  EXPECT_EQ(output(o, "2", 0), "1,2");
  EXPECT_EQ(output(o, "3", 0), "numpy=False torch=False");
}

TEST_F(python_lists, a_shorter_input_list_repeats_its_last_item) {
  const auto o = run_json(
      {{"1", {{"class_type", "Fanout"}, {"inputs", {{"count", 3}}}}},
       {"2", {{"class_type", "Fanout"}, {"inputs", {{"count", 2}}}}},
       {"3", {{"class_type", "Scale"}, {"inputs", {{"value", {"1", 0}}, {"factor", {"2", 0}}}}}},
       {"4", {{"class_type", "Join"}, {"inputs", {{"values", {"3", 0}}, {"separator", ","}}}}}});
  ASSERT_TRUE(o.ok) << o.error->dump();
  EXPECT_EQ(output(o, "4", 0), "1,4,6");  // 1*1, 2*2, 3*2
}

TEST_F(python_lists, an_empty_list_and_a_declared_list_that_is_not_one_are_typed_errors) {
  const auto empty = run_json(
      {{"1", {{"class_type", "Fanout"}, {"inputs", {{"count", 0}}}}},
       {"2", {{"class_type", "Scale"}, {"inputs", {{"value", {"1", 0}}, {"factor", 10}}}}},
       {"3", {{"class_type", "Join"}, {"inputs", {{"values", {"2", 0}}, {"separator", ","}}}}}});
  ASSERT_FALSE(empty.ok);
  EXPECT_EQ((*empty.error)["node_id"], "2");
  EXPECT_EQ((*empty.error)["exception_type"], "invalid_input");
  EXPECT_NE((*empty.error)["exception_message"].get<std::string>().find("'value'"),
            std::string::npos)
      << empty.error->dump();

  const auto wrong = run_json(
      {{"1", {{"class_type", "NotAList"}, {"inputs", json::object()}}},
       {"2", {{"class_type", "Join"}, {"inputs", {{"values", {"1", 0}}, {"separator", ","}}}}}});
  ASSERT_FALSE(wrong.ok);
  EXPECT_EQ((*wrong.error)["node_id"], "1");
  EXPECT_EQ((*wrong.error)["exception_type"], "TypeError");
  EXPECT_NE((*wrong.error)["exception_message"].get<std::string>().find("OUTPUT_IS_LIST"),
            std::string::npos)
      << wrong.error->dump();
}

TEST_F(python_lists, validate_inputs_runs_in_the_worker_and_replaces_the_combo_check) {
  // b.gif is in no combo list; VALIDATE_INPUTS takes `name`, so only its verdict counts.
  auto refused =
      check({{"1", {{"class_type", "Picky"}, {"inputs", {{"name", "b.gif"}, {"count", 2}}}}}});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(error_types(refused, "1"), std::vector<std::string>{"custom_validation_failed"});
  EXPECT_EQ(refused.node_errors.at("1").errors[0].details, "b.gif is not a png");

  auto unlucky =
      check({{"1", {{"class_type", "Picky"}, {"inputs", {{"name", "a.png"}, {"count", 13}}}}}});
  ASSERT_FALSE(unlucky.ok());
  EXPECT_EQ(unlucky.node_errors.at("1").errors[0].details, "count 13 is unlucky");

  // c.png is outside the combo's list too, and accepted: the pack lists its files itself.
  const auto o =
      run_json({{"1", {{"class_type", "Picky"}, {"inputs", {{"name", "c.png"}, {"count", 2}}}}}});
  ASSERT_TRUE(o.ok) << o.error->dump();
  EXPECT_EQ(output(o, "1", 0), "c.png x2");
  // ComfyUI's own range check still applies to what the method does not take... it takes
  // both here, so 30 (past max 20) is its call too, and it accepts it.
  EXPECT_TRUE(
      check({{"1", {{"class_type", "Picky"}, {"inputs", {{"name", "a.png"}, {"count", 30}}}}}})
          .ok());
}

TEST_F(python_lists, validate_inputs_with_input_types_checks_link_types_itself) {
  // An INT into a FLOAT input: ComfyUI's return_type_mismatch, unless the class takes
  // input_types, as TypeChecker does; a STRING it refuses with its own words.
  const auto o =
      run_json({{"1", {{"class_type", "Fanout"}, {"inputs", {{"count", 1}}}}},
                {"2", {{"class_type", "TypeChecker"}, {"inputs", {{"anything", {"1", 0}}}}}}});
  ASSERT_TRUE(o.ok) << o.error->dump();
  EXPECT_EQ(output(o, "2", 0), "1.0");  // a number reaches a FLOAT input as a float

  auto refused =
      check({{"1", {{"class_type", "Fanout"}, {"inputs", {{"count", 1}}}}},
             {"2", {{"class_type", "TypeChecker"}, {"inputs", {{"anything", {"1", 1}}}}}}});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(error_types(refused, "2"), std::vector<std::string>{"custom_validation_failed"});
  EXPECT_EQ(refused.node_errors.at("2").errors[0].details, "anything must be a number, got STRING");
}

TEST_F(python_lists, validate_inputs_sees_a_linked_input_as_none_and_is_never_interrupted) {
  // Fanout's slot 1 is a STRING: Checked's `path` is linked, so VALIDATE_INPUTS gets None for it,
  // not the default "" (which it would refuse), in a fresh worker whose interrupted epoch is 0.
  const json linked = {
      {"1", {{"class_type", "Fanout"}, {"inputs", {{"count", 1}}}}},
      {"2", {{"class_type", "Checked"}, {"inputs", {{"path", {"1", 1}}, {"allocate", false}}}}}};
  const auto o = run_json(linked);
  ASSERT_TRUE(o.ok) << o.error->dump();
  EXPECT_EQ(output(o, "2", 0), "fanout of 1");
  EXPECT_TRUE(o.nodes.at("2").change_key.is_null()) << "NaN is ComfyUI's always-changed";

  // A literal "" is refused, and the hidden UNIQUE_ID its signature names is there.
  auto refused =
      check({{"5", {{"class_type", "Checked"}, {"inputs", {{"path", ""}, {"allocate", false}}}}}});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.node_errors.at("5").errors.at(0).details, "node 5: path is empty");

  // After an interrupted prompt, validation still runs uninterrupted.
  executor_->interrupt();
  auto after = check(linked);
  EXPECT_TRUE(after.ok()) << after.to_json().dump();
}

TEST_F(python_lists, a_validate_inputs_that_raises_is_comfyuis_exception_during_validation) {
  // comfy_orch.empty() inside VALIDATE_INPUTS: a class method cannot allocate, so it raises.
  auto r =
      check({{"1", {{"class_type", "Checked"}, {"inputs", {{"path", "x"}, {"allocate", true}}}}}});
  ASSERT_FALSE(r.ok());
  const auto& e = r.node_errors.at("1").errors.at(0);
  EXPECT_EQ(e.type, "exception_during_validation");
  EXPECT_EQ(e.message, "Exception when validating node");
  EXPECT_EQ(e.extra_info["exception_type"], "MemoryError") << e.extra_info.dump();
  EXPECT_FALSE(e.extra_info["traceback"].empty());
  // The worker is fine: the same node validates and runs with allocate off.
  const auto o = run_json(
      {{"1", {{"class_type", "Checked"}, {"inputs", {{"path", "x"}, {"allocate", false}}}}}});
  ASSERT_TRUE(o.ok) << o.error->dump();
}

TEST_F(python_lists, extra_pnginfo_a_call_cannot_carry_reaches_the_node_as_none) {
  json deep = "bottom";
  for (int i = 0; i < 20; ++i) deep = json::array({deep});
  const json body = {{"prompt", {{"7", {{"class_type", "Hidden"}, {"inputs", json::object()}}}}},
                     {"extra_data", {{"extra_pnginfo", {{"workflow", deep}}}}}};
  const auto o = run(body.dump());
  ASSERT_TRUE(o.ok) << o.error->dump();
  EXPECT_EQ(output(o, "7", 1), "null");
  const json big = {{"prompt", {{"7", {{"class_type", "Hidden"}, {"inputs", json::object()}}}}},
                    {"extra_data", {{"extra_pnginfo", {{"workflow", std::string(600000, 'x')}}}}}};
  const auto o2 = run(big.dump());
  ASSERT_TRUE(o2.ok) << o2.error->dump();
  EXPECT_EQ(output(o2, "7", 1), "null");
}

TEST_F(python_lists, is_changed_gives_the_change_key_and_a_failure_means_always_changed) {
  const auto o = run_json(
      {{"1", {{"class_type", "Picky"}, {"inputs", {{"name", "a.png"}, {"count", 4}}}}},
       {"2", {{"class_type", "Fickle"}, {"inputs", json::object()}}},
       {"3", {{"class_type", "Join"}, {"inputs", {{"values", {"4", 0}}, {"separator", ","}}}}},
       {"4", {{"class_type", "Fanout"}, {"inputs", {{"count", 1}}}}}});
  ASSERT_TRUE(o.ok) << o.error->dump();
  EXPECT_EQ(o.nodes.at("1").change_key, "key:a.png");
  EXPECT_TRUE(o.nodes.at("2").change_key.is_null());
  EXPECT_TRUE(o.nodes.at("4").change_key.is_null());  // no IS_CHANGED at all
}

TEST_F(python_lists, a_nodes_ui_dict_is_what_executed_carries_merged_over_its_calls) {
  const auto o = run_json({{"1", {{"class_type", "Fanout"}, {"inputs", {{"count", 2}}}}},
                           {"2", {{"class_type", "Shown"}, {"inputs", {{"value", {"1", 0}}}}}}});
  ASSERT_TRUE(o.ok) << o.error->dump();
  const json ui = {{"text", {"value 1", "value 2"}},
                   {"images",
                    {{{"filename", "v1.png"}, {"subfolder", ""}, {"type", "output"}},
                     {{"filename", "v2.png"}, {"subfolder", ""}, {"type", "output"}}}}};
  EXPECT_EQ(o.nodes.at("2").ui, ui);
  std::vector<json> executed;
  for (const auto& e : events_.events())
    if (e["type"] == "executed") executed.push_back(e["data"]);
  ASSERT_EQ(executed.size(), 1u) << "only the node with a UI";
  EXPECT_EQ(executed[0]["node"], "2");
  EXPECT_EQ(executed[0]["output"], ui);
}

TEST_F(python_lists, an_is_changed_of_nan_or_one_that_raises_is_never_served_from_the_cache) {
  executor_ =
      std::make_unique<executor::executor>(*host_, events_, manifests::cache_policy::classic, 1);
  const json prompt = {
      {"1", {{"class_type", "Picky"}, {"inputs", {{"name", "a.png"}, {"count", 4}}}}},
      {"2", {{"class_type", "Fickle"}, {"inputs", json::object()}}},
      {"3", {{"class_type", "Checked"}, {"inputs", {{"path", "x"}, {"allocate", false}}}}}};
  ASSERT_TRUE(run_json(prompt).ok);
  const auto again = run_json(prompt);
  ASSERT_TRUE(again.ok) << again.error->dump();
  EXPECT_TRUE(again.nodes.at("1").cached) << "IS_CHANGED gave the same key";
  EXPECT_FALSE(again.nodes.at("2").cached) << "IS_CHANGED raised: always changed";
  EXPECT_FALSE(again.nodes.at("3").cached) << "IS_CHANGED gave NaN: always changed";
}

TEST_F(python_lists, dynprompt_and_extra_pnginfo_reach_the_node) {
  const json body = {
      {"prompt",
       {{"7", {{"class_type", "Hidden"}, {"inputs", json::object()}}},
        {"8", {{"class_type", "Fanout"}, {"inputs", {{"count", 1}}}}},
        {"9", {{"class_type", "Join"}, {"inputs", {{"values", {"8", 0}}, {"separator", ","}}}}}}},
      {"extra_data", {{"extra_pnginfo", {{"workflow", {{"nodes", json::array()}}}}}}}};
  const auto o = run(body.dump());
  ASSERT_TRUE(o.ok) << o.error->dump();
  EXPECT_EQ(output(o, "7", 0), "Hidden ['7', '8', '9']");
  EXPECT_EQ(output(o, "7", 1), R"({"workflow": {"nodes": []}})");

  // A prompt alone has no extra data: EXTRA_PNGINFO is None, as in ComfyUI's API without it.
  const auto plain = run_json({{"7", {{"class_type", "Hidden"}, {"inputs", json::object()}}}});
  ASSERT_TRUE(plain.ok) << plain.error->dump();
  EXPECT_EQ(output(plain, "7", 1), "null");
}

}  // namespace
}  // namespace orch::python_testing
