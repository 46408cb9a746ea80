// ComfyUI's VALIDATE_INPUTS and IS_CHANGED through the node ABI 1.2's C entry points, on a real
// native worker (TestChecked in test_nodes_pack.cpp): the same worker path a Python pack's class
// methods take, here also under the sanitizers.
#include "runtime_fixture.hpp"

namespace orch::runtime_testing {
namespace {

using nlohmann::json;

class class_methods : public runtime_test {
 protected:
  executor::validation_report check(std::int64_t value) {
    auto p = executor::parse_prompt(
        json{{"1", {{"class_type", "TestChecked"}, {"inputs", {{"value", value}}}}}}.dump());
    EXPECT_TRUE(p.ok());
    return validate(*p);
  }
  static std::string details(const executor::validation_report& r) {
    auto it = r.node_errors.find("1");
    return it == r.node_errors.end() ? "" : it->second.errors.at(0).details;
  }
};

TEST_F(class_methods, a_native_class_reports_both_and_validate_inputs_refuses_with_its_reason) {
  ASSERT_NO_FATAL_FAILURE(start());
  const auto* cls = host_->catalogue().find("TestChecked");
  ASSERT_NE(cls, nullptr);
  EXPECT_TRUE(cls->validate_inputs.present);
  EXPECT_FALSE(cls->validate_inputs.declared);  // no schema key: every literal, every check
  EXPECT_TRUE(cls->is_changed);
  EXPECT_FALSE(host_->catalogue().find("TestEmpty")->validate_inputs.present);

  EXPECT_TRUE(check(7).ok());
  const auto refused = check(13);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.node_errors.at("1").errors.at(0).type, "custom_validation_failed");
  EXPECT_EQ(details(refused), "13 is refused");
  // The class does not declare what it checks, so the host's own range check stands.
  const auto past_max = check(101);
  ASSERT_FALSE(past_max.ok());
  EXPECT_EQ(past_max.node_errors.at("1").errors.at(0).type, "value_bigger_than_max");
}

TEST_F(class_methods, a_class_method_cannot_allocate_and_no_interrupt_reaches_it) {
  ASSERT_NO_FATAL_FAILURE(start());
  EXPECT_EQ(details(check(99)), "output_tensor refused");
  executor_->interrupt();  // a prompt's interrupt: validation is no part of it
  EXPECT_TRUE(check(7).ok()) << check(7).to_json().dump();
}

TEST_F(class_methods, is_changed_gives_each_node_its_change_key) {
  ASSERT_NO_FATAL_FAILURE(start());
  const auto o = run(json{{"1", {{"class_type", "TestChecked"}, {"inputs", {{"value", 21}}}}},
                          {"2", {{"class_type", "TestEmpty"}, {"inputs", json::object()}}}}
                         .dump());
  ASSERT_TRUE(o.ok) << o.error->dump();
  EXPECT_EQ(o.nodes.at("1").change_key, 42);
  EXPECT_TRUE(o.nodes.at("2").change_key.is_null());
}

}  // namespace
}  // namespace orch::runtime_testing
