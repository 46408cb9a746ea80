// ComfyUI's list mapping (list_mapping.hpp), one rule per test.
#include <gtest/gtest.h>

#include "orch/executor/list_mapping.hpp"

namespace orch::executor {
namespace {

using nlohmann::json;
using runtime::node_class;

node_class two_outputs(bool input_is_list, std::vector<bool> output_is_list) {
  node_class c;
  c.class_type = "Pair";
  c.outputs = {"INT", "STRING"};
  c.input_is_list = input_is_list;
  c.output_is_list = std::move(output_is_list);
  return c;
}

TEST(list_mapping, a_node_is_called_once_per_item_of_its_longest_list) {
  auto calls = call_inputs(two_outputs(false, {}),
                           {{"a", json::array({1, 2, 3})}, {"b", json::array({"x", "y"})}});
  ASSERT_TRUE(calls.ok());
  ASSERT_EQ(calls->size(), 3u);
  EXPECT_EQ((*calls)[0], json::parse(R"({"a": 1, "b": "x"})"));
  EXPECT_EQ((*calls)[1], json::parse(R"({"a": 2, "b": "y"})"));
  EXPECT_EQ((*calls)[2], json::parse(R"({"a": 3, "b": "y"})"));  // the shorter list repeats
}

TEST(list_mapping, a_node_without_inputs_is_called_once) {
  auto calls = call_inputs(two_outputs(false, {}), {});
  ASSERT_TRUE(calls.ok());
  EXPECT_EQ(*calls, std::vector<json>{json::object()});
}

TEST(list_mapping, input_is_list_is_one_call_with_the_whole_lists) {
  auto calls = call_inputs(two_outputs(true, {}),
                           {{"a", json::array({1, 2, 3})}, {"b", json::array({"x"})}});
  ASSERT_TRUE(calls.ok());
  EXPECT_EQ(*calls, std::vector<json>{json::parse(R"({"a": [1, 2, 3], "b": ["x"]})")});
}

TEST(list_mapping, input_is_list_takes_an_empty_list_as_it_is) {
  auto calls = call_inputs(two_outputs(true, {}), {{"a", json::array()}});
  ASSERT_TRUE(calls.ok());
  EXPECT_EQ(*calls, std::vector<json>{json::parse(R"({"a": []})")});
}

TEST(list_mapping, an_empty_list_is_an_error_naming_the_input) {
  auto calls = call_inputs(two_outputs(false, {}), {{"a", json::array({1})}, {"b", json::array()}});
  ASSERT_FALSE(calls.ok());
  EXPECT_EQ(calls.err().code, "invalid_input");
  EXPECT_NE(calls.err().message.find("'b'"), std::string::npos) << calls.err().message;
}

TEST(list_mapping, outputs_collect_one_item_per_call_and_list_slots_concatenate) {
  auto merged = merge_call_outputs(two_outputs(false, {true, false}),
                                   {json::parse(R"([[1, 2], "a"])"), json::parse(R"([[3], "b"])")});
  ASSERT_TRUE(merged.ok());
  EXPECT_EQ(*merged, json::parse(R"([[1, 2, 3], ["a", "b"]])"));
}

TEST(list_mapping, a_list_slot_that_is_not_a_list_is_an_invalid_output) {
  auto merged = merge_call_outputs(two_outputs(false, {true}), {json::parse(R"([7, "a"])")});
  ASSERT_FALSE(merged.ok());
  EXPECT_EQ(merged.err().code, "invalid_output");
  EXPECT_NE(merged.err().message.find("OUTPUT_IS_LIST"), std::string::npos);
}

}  // namespace
}  // namespace orch::executor
