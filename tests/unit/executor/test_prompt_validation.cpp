// Validation with ComfyUI's error types, one behaviour per test.
#include <set>

#include <gtest/gtest.h>

#include "orch/executor/prompt_validation.hpp"

namespace orch::executor {
namespace {

using runtime::node_catalogue;
using runtime::node_class;
using runtime::node_input;
node_catalogue catalogue() {
  node_catalogue c;
  (void)c.add({"MakeImage",
               "Make Image",
               "image",
               {{"width", "INT", true, 64, 1, 4096, {}},
                {"fill", "FLOAT", false, 0.5, 0, 1, {}},
                {"mode", "COMBO", false, "rgb", {}, {}, {"rgb", "gray"}}},
               {"IMAGE"},
               false,
               false,
               "imageops-nodes",
               {},
               false,
               {},
               {},
               false,
               {}});
  (void)c.add({"Invert",
               "Invert",
               "image",
               {{"image", "IMAGE", true, {}, {}, {}, {}}},
               {"IMAGE"},
               false,
               false,
               "imageops-nodes",
               {},
               false,
               {},
               {},
               false,
               {}});
  (void)c.add({"LoadModel",
               "Load Model",
               "model",
               {},
               {"MODEL"},
               false,
               false,
               "sampler",
               {},
               false,
               {},
               {},
               false,
               {}});
  (void)c.add(
      {"Save",
       "Save",
       "image",
       {{"image", "IMAGE", true, {}, {}, {}, {}}, {"flag", "BOOLEAN", false, {}, {}, {}, {}}},
       {},
       true,
       false,
       "imageops-nodes",
       {},
       false,
       {},
       {},
       false,
       {}});
  return c;
}

// The catalogue and Blend, a class with two image inputs (for graphs with several cycles).
node_catalogue catalogue_with_blend() {
  node_catalogue c = catalogue();
  node_class blend;
  blend.class_type = "Blend";
  blend.inputs = {{"a", "IMAGE", true, {}, {}, {}, {}}, {"b", "IMAGE", true, {}, {}, {}, {}}};
  blend.outputs = {"IMAGE"};
  blend.env = "imageops-nodes";
  (void)c.add(blend);
  return c;
}

// The prompt's text is not named `json`: in the unit test's unity source, nlohmann::json is.
validation_report check(const std::string& text) {
  auto p = parse_prompt(text);
  EXPECT_TRUE(p.ok()) << p.err().message;
  return validate_prompt(*p, catalogue());
}

const validation_error& only_error(const validation_report& r, const std::string& node) {
  static const validation_error none{};
  auto it = r.node_errors.find(node);
  EXPECT_NE(it, r.node_errors.end()) << r.to_json().dump(2);
  if (it == r.node_errors.end()) return none;
  EXPECT_EQ(it->second.errors.size(), 1u) << r.to_json().dump(2);
  return it->second.errors.at(0);
}

TEST(prompt_validation, valid_chain_yields_its_output) {
  auto r = check(R"({"1": {"class_type": "MakeImage", "inputs": {"width": 8}},
                     "2": {"class_type": "Invert", "inputs": {"image": ["1", 0]}},
                     "3": {"class_type": "Save", "inputs": {"image": ["2", 0]}}})");
  EXPECT_TRUE(r.ok()) << r.to_json().dump(2);
  EXPECT_EQ(r.outputs, std::vector<std::string>{"3"});
  EXPECT_TRUE(r.node_errors.empty());
}

TEST(prompt_validation, missing_node_type_names_id_and_class) {
  auto r = check(R"({"4": {"class_type": "Nope", "inputs": {}, "_meta": {"title": "T"}},
                     "3": {"class_type": "Save", "inputs": {"image": ["4", 0]}}})");
  ASSERT_FALSE(r.ok());
  // ComfyUI's: the node's title in the message, no node_errors.
  const auto& e = *r.error;
  EXPECT_EQ(e.type, "missing_node_type");
  EXPECT_EQ(e.message, "Node 'T' not found. The custom node may not be installed.");
  EXPECT_EQ(e.details, "Node ID '#4'");
  EXPECT_EQ(e.extra_info["node_id"], "4");
  EXPECT_EQ(e.extra_info["class_type"], "Nope");
  EXPECT_EQ(e.extra_info["node_title"], "T");
  EXPECT_TRUE(r.node_errors.empty());
  EXPECT_EQ(r.missing_classes, std::set<std::string>{"Nope"});
}

TEST(prompt_validation, missing_node_type_names_the_first_missing_node_in_document_order) {
  auto r = check(R"({"9": {"class_type": "Gone", "inputs": {}},
                     "1": {"class_type": "AlsoGone", "inputs": {}},
                     "3": {"class_type": "Save", "inputs": {"image": ["9", 0]}}})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->extra_info["node_id"], "9");
  EXPECT_EQ(r.error->message, "Node 'Gone' not found. The custom node may not be installed.");
  ASSERT_EQ(r.error->extra_info["orch_missing_nodes"].size(), 2u);
  EXPECT_EQ(r.error->extra_info["orch_missing_nodes"][1]["node_id"], "1");
}

TEST(prompt_validation, no_output_node_is_prompt_no_outputs) {
  auto r = check(R"({"1": {"class_type": "MakeImage", "inputs": {"width": 8}}})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->type, "prompt_no_outputs");
}

TEST(prompt_validation, required_input_missing) {
  auto r = check(R"({"3": {"class_type": "Save", "inputs": {}}})");
  EXPECT_EQ(r.error->type, "prompt_outputs_failed_validation");
  // As ComfyUI's: each reason of each failed output, one per line; extra_info an empty object.
  EXPECT_EQ(r.error->details, "Required input is missing: image");
  EXPECT_EQ(r.error->extra_info, nlohmann::json::object());
  const auto& e = only_error(r, "3");
  EXPECT_EQ(e.type, "required_input_missing");
  EXPECT_EQ(e.details, "image");
  EXPECT_EQ(r.node_errors.at("3").dependent_outputs, std::vector<std::string>{"3"});
}

TEST(prompt_validation, link_to_absent_node_is_bad_linked_input) {
  auto r = check(R"({"3": {"class_type": "Save", "inputs": {"image": ["9", 0]}}})");
  EXPECT_EQ(only_error(r, "3").type, "bad_linked_input");
}

TEST(prompt_validation, link_slot_out_of_range_is_bad_linked_input) {
  auto r = check(R"({"1": {"class_type": "MakeImage", "inputs": {"width": 8}},
                     "3": {"class_type": "Save", "inputs": {"image": ["1", 3]}}})");
  EXPECT_EQ(only_error(r, "3").type, "bad_linked_input");
}

TEST(prompt_validation, malformed_link_is_bad_linked_input) {
  auto r = check(R"({"3": {"class_type": "Save", "inputs": {"image": ["1", "x"]}}})");
  EXPECT_EQ(only_error(r, "3").type, "bad_linked_input");
}

TEST(prompt_validation, wrong_linked_type_is_return_type_mismatch) {
  auto r = check(R"({"1": {"class_type": "LoadModel", "inputs": {}},
                     "3": {"class_type": "Save", "inputs": {"image": ["1", 0]}}})");
  const auto& e = only_error(r, "3");
  EXPECT_EQ(e.type, "return_type_mismatch");
  EXPECT_EQ(e.details, "image, received_type(MODEL) mismatch input_type(IMAGE)");
}

TEST(prompt_validation, below_min_and_above_max) {
  auto low = check(R"({"1": {"class_type": "MakeImage", "inputs": {"width": 0}},
                       "3": {"class_type": "Save", "inputs": {"image": ["1", 0]}}})");
  EXPECT_EQ(only_error(low, "1").type, "value_smaller_than_min");
  // As ComfyUI's f-string prints them: an INT's bound as an integer ("min of 1", not 1.0), a
  // FLOAT's value as float() made it.
  EXPECT_EQ(only_error(low, "1").message, "Value 0 smaller than min of 1");
  auto high = check(R"({"1": {"class_type": "MakeImage", "inputs": {"width": 8, "fill": 2}},
                        "3": {"class_type": "Save", "inputs": {"image": ["1", 0]}}})");
  EXPECT_EQ(only_error(high, "1").type, "value_bigger_than_max");
  EXPECT_EQ(only_error(high, "1").details, "fill");
  EXPECT_EQ(only_error(high, "1").message, "Value 2.0 bigger than max of 1.0");
}

TEST(prompt_validation, combo_value_outside_the_list) {
  auto r = check(R"({"1": {"class_type": "MakeImage", "inputs": {"width": 8, "mode": "cmyk"}},
                     "3": {"class_type": "Save", "inputs": {"image": ["1", 0]}}})");
  const auto& e = only_error(r, "1");
  EXPECT_EQ(e.type, "value_not_in_list");
  EXPECT_EQ(e.details, "mode: 'cmyk' not in ['rgb', 'gray']");  // str() of a Python list
}

TEST(prompt_validation, unconvertible_literal_is_invalid_input_type) {
  auto r = check(R"({"1": {"class_type": "MakeImage", "inputs": {"width": "wide"}},
                     "3": {"class_type": "Save", "inputs": {"image": ["1", 0], "flag": "no"}}})");
  const auto& wide = only_error(r, "1");
  EXPECT_EQ(wide.type, "invalid_input_type");
  EXPECT_EQ(wide.message, "Failed to convert an input value to a INT value");
  EXPECT_EQ(wide.details, "width, wide, invalid literal for int() with base 10: 'wide'");
  EXPECT_EQ(wide.extra_info["exception_message"],
            "invalid literal for int() with base 10: 'wide'");
  EXPECT_EQ(only_error(r, "3").type, "invalid_input_type");
  for (const char* literal : {R"("8.5")", "8.5", "null", "{}"}) {
    auto bad = check(std::string(R"({"1": {"class_type": "MakeImage", "inputs": {"width": )") +
                     literal +
                     R"(}}, "3": {"class_type": "Save", "inputs": {"image": ["1", 0]}}})");
    EXPECT_EQ(only_error(bad, "1").type, "invalid_input_type") << literal;
  }
  auto fill = check(R"({"1": {"class_type": "MakeImage", "inputs": {"width": 8, "fill": "x"}},
                        "3": {"class_type": "Save", "inputs": {"image": ["1", 0]}}})");
  EXPECT_EQ(only_error(fill, "1").extra_info["exception_message"],
            "could not convert string to float: 'x'");
  auto none = check(R"({"1": {"class_type": "MakeImage", "inputs": {"width": 8, "fill": null}},
                        "3": {"class_type": "Save", "inputs": {"image": ["1", 0]}}})");
  EXPECT_EQ(only_error(none, "1").extra_info["exception_message"],
            "float() argument must be a string or a real number, not 'NoneType'");
  // What int() and float() take: numeric strings, whole floats, booleans.
  auto fine = check(R"({"1": {"class_type": "MakeImage",
                              "inputs": {"width": true, "fill": "0.5", "mode": "rgb"}},
                        "3": {"class_type": "Save", "inputs": {"image": ["1", 0]}}})");
  EXPECT_TRUE(fine.ok()) << fine.to_json().dump();
  auto spaced = check(R"({"1": {"class_type": "MakeImage", "inputs": {"width": " 12"}},
                          "3": {"class_type": "Save", "inputs": {"image": ["1", 0]}}})");
  EXPECT_TRUE(spaced.ok()) << spaced.to_json().dump();
}

// Every node of the cycle is marked; the first one's error names the whole cycle and its path.
TEST(prompt_validation, cycle_is_dependency_cycle_on_every_node_of_it) {
  auto r = check(R"({"1": {"class_type": "Invert", "inputs": {"image": ["2", 0]}},
                     "2": {"class_type": "Invert", "inputs": {"image": ["4", 0]}},
                     "4": {"class_type": "Invert", "inputs": {"image": ["1", 0]}},
                     "3": {"class_type": "Save", "inputs": {"image": ["1", 0]}}})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.node_errors.count("3"), 0u) << r.to_json().dump(2);  // outside the cycle
  const auto& first = only_error(r, "1");
  EXPECT_EQ(first.details, "1 -> 2 -> 4 -> 1");
  EXPECT_EQ(first.extra_info["cycle_nodes"], nlohmann::json({"1", "2", "4"}));
  for (const std::string id : {"1", "2", "4"}) {
    const auto& e = only_error(r, id);
    EXPECT_EQ(e.type, "dependency_cycle");
    EXPECT_EQ(e.message, "Dependency cycle detected");
    EXPECT_EQ(e.extra_info["node_id"], id);
    EXPECT_EQ(e.extra_info["cycle_length"], 3);
    if (id != "1") {
      EXPECT_EQ(e.extra_info["cycle_start"], "1");
    }
    EXPECT_EQ(r.node_errors.at(id).dependent_outputs, std::vector<std::string>{"3"});
  }
}

// Two cycles through one node (a figure 8): both are reported, and every node of each marked.
TEST(prompt_validation, two_cycles_through_one_node_are_both_marked) {
  const node_catalogue c = catalogue_with_blend();
  auto p = parse_prompt(R"({"1": {"class_type": "Blend", "inputs": {"a": ["2", 0], "b": ["3", 0]}},
                            "2": {"class_type": "Invert", "inputs": {"image": ["1", 0]}},
                            "3": {"class_type": "Invert", "inputs": {"image": ["1", 0]}},
                            "9": {"class_type": "Save", "inputs": {"image": ["1", 0]}}})");
  ASSERT_TRUE(p.ok());
  const auto r = validate_prompt(*p, c);
  ASSERT_FALSE(r.ok());
  ASSERT_EQ(r.node_errors.count("2"), 1u) << r.to_json().dump(2);
  ASSERT_EQ(r.node_errors.count("3"), 1u) << r.to_json().dump(2);
  EXPECT_EQ(r.node_errors.at("1").errors.size(), 2u);  // it starts both cycles
  EXPECT_EQ(r.node_errors.at("1").errors[0].details, "1 -> 2 -> 1");
  EXPECT_EQ(r.node_errors.at("1").errors[1].details, "1 -> 3 -> 1");
  EXPECT_EQ(r.error->type, "prompt_outputs_failed_validation");
}

// A chain of 50,000 two-input nodes, each linking back to the one before it: 49,999 cycles of
// two. Each is found from the path's index of its first node, not by a scan of the path (that
// was quadratic: billions of compares on one POST).
TEST(prompt_validation, many_cycles_on_a_long_path_are_each_reported_at_once) {
  const node_catalogue c = catalogue_with_blend();
  constexpr int n = 50000;
  std::string text = R"({"m": {"class_type": "MakeImage", "inputs": {"width": 8}},
                         "out": {"class_type": "Save", "inputs": {"image": ["0", 0]}})";
  for (int i = 0; i < n; ++i) {
    const std::string a = i + 1 < n ? std::to_string(i + 1) : "m";
    const std::string b = i > 0 ? std::to_string(i - 1) : "m";
    text += ",\"" + std::to_string(i) + R"(": {"class_type": "Blend", "inputs": {"a": [")" + a +
            R"(", 0], "b": [")" + b + R"(", 0]}})";
  }
  auto p = parse_prompt(text + "}");
  ASSERT_TRUE(p.ok()) << p.err().message;
  const auto r = validate_prompt(*p, c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.node_errors.size(), static_cast<std::size_t>(n));
  EXPECT_EQ(r.node_errors.at("7").errors[0].details, "7 -> 8 -> 7");
}

// ComfyUI's extra_info.input_config: the input as INPUT_TYPES gives it, on every error about
// one input's value or link (required_input_missing has only the name).
TEST(prompt_validation, errors_about_an_input_carry_its_input_config) {
  const nlohmann::json width = nlohmann::json::parse(R"(["INT", {"default": 64, "min": 1,
                                                                  "max": 4096}])");
  const nlohmann::json image = nlohmann::json::parse(R"(["IMAGE", {}])");
  const auto config_of = [](const validation_report& r, const std::string& id) {
    return only_error(r, id).extra_info.value("input_config", nlohmann::json("absent"));
  };
  auto small = check(R"({"1": {"class_type": "MakeImage", "inputs": {"width": 0}},
                         "3": {"class_type": "Save", "inputs": {"image": ["1", 0]}}})");
  EXPECT_EQ(config_of(small, "1"), width);
  auto big = check(R"({"1": {"class_type": "MakeImage", "inputs": {"width": 5000}},
                       "3": {"class_type": "Save", "inputs": {"image": ["1", 0]}}})");
  EXPECT_EQ(config_of(big, "1"), width);
  auto text = check(R"({"1": {"class_type": "MakeImage", "inputs": {"width": "wide"}},
                        "3": {"class_type": "Save", "inputs": {"image": ["1", 0]}}})");
  EXPECT_EQ(config_of(text, "1"), width);
  auto mismatch = check(R"({"1": {"class_type": "LoadModel", "inputs": {}},
                            "3": {"class_type": "Save", "inputs": {"image": ["1", 0]}}})");
  EXPECT_EQ(config_of(mismatch, "3"), image);
  auto gone = check(R"({"3": {"class_type": "Save", "inputs": {"image": ["9", 0]}}})");
  EXPECT_EQ(config_of(gone, "3"), image);
  auto malformed = check(R"({"3": {"class_type": "Save", "inputs": {"image": ["1", "x"]}}})");
  EXPECT_EQ(config_of(malformed, "3"), image);
  auto combo = check(R"({"1": {"class_type": "MakeImage", "inputs": {"width": 8, "mode": "x"}},
                         "3": {"class_type": "Save", "inputs": {"image": ["1", 0]}}})");
  EXPECT_EQ(config_of(combo, "1"),
            nlohmann::json::parse(R"([["rgb", "gray"], {"default": "rgb"}])"));
  auto missing = check(R"({"3": {"class_type": "Save", "inputs": {}}})");
  EXPECT_EQ(config_of(missing, "3"), "absent");
}

// As ComfyUI: a list of more than 20 choices (a folder of model files) is not sent back.
TEST(prompt_validation, a_long_combo_list_is_not_sent_back) {
  node_catalogue c;
  node_input choice{"ckpt", "COMBO", true, {}, {}, {}, {}};
  for (int i = 0; i < 21; ++i) choice.options.push_back("model" + std::to_string(i) + ".bin");
  node_class cls;
  cls.class_type = "Loader";
  cls.inputs = {choice};
  cls.output_node = true;
  cls.env = "e";
  (void)c.add(cls);
  auto p = parse_prompt(R"({"1": {"class_type": "Loader", "inputs": {"ckpt": "other.bin"}}})");
  ASSERT_TRUE(p.ok());
  const auto r = validate_prompt(*p, c);
  const auto& e = only_error(r, "1");
  EXPECT_EQ(e.type, "value_not_in_list");
  EXPECT_EQ(e.details, "ckpt: 'other.bin' not in (list of length 21)");
  EXPECT_TRUE(e.extra_info.contains("input_config"));
  EXPECT_TRUE(e.extra_info["input_config"].is_null());
}

// ComfyUI's partial_execution_targets: only the output nodes it names run, and the others are
// not validated; naming none of them leaves the prompt without outputs.
TEST(prompt_validation, partial_execution_targets_choose_the_outputs_that_run) {
  const std::string graph = R"("prompt": {"1": {"class_type": "MakeImage", "inputs": {"width": 8}},
                     "3": {"class_type": "Save", "inputs": {"image": ["1", 0]}},
                     "4": {"class_type": "Save", "inputs": {}}})";
  auto p = parse_prompt("{" + graph + R"(, "partial_execution_targets": ["3"]})");
  ASSERT_TRUE(p.ok()) << p.err().message;
  auto r = validate_prompt(*p, catalogue());
  EXPECT_EQ(r.outputs, std::vector<std::string>{"3"});
  EXPECT_TRUE(r.node_errors.empty()) << r.to_json().dump();  // 4 is not validated at all
  p = parse_prompt("{" + graph + R"(, "partial_execution_targets": ["1"]})");
  ASSERT_TRUE(p.ok());
  r = validate_prompt(*p, catalogue());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->type, "prompt_no_outputs");
  p = parse_prompt("{" + graph + R"(, "partial_execution_targets": null})");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(validate_prompt(*p, catalogue()).outputs, std::vector<std::string>{"3"});
  EXPECT_EQ(validate_prompt(*p, catalogue()).node_errors.count("4"), 1u);
  EXPECT_FALSE(parse_prompt("{" + graph + R"(, "partial_execution_targets": "3"})").ok());
  EXPECT_FALSE(parse_prompt("{" + graph + R"(, "partial_execution_targets": [3]})").ok());
}

TEST(prompt_validation, one_bad_output_does_not_block_a_good_one) {
  auto r = check(R"({"1": {"class_type": "MakeImage", "inputs": {"width": 8}},
                     "3": {"class_type": "Save", "inputs": {"image": ["1", 0]}},
                     "4": {"class_type": "Save", "inputs": {}}})");
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.outputs, std::vector<std::string>{"3"});
  EXPECT_EQ(r.node_errors.count("4"), 1u);
}

// A pack's ROUTES entry reaches the catalogue as a class with a route: it is found only as a
// route, so a prompt naming it meets a missing class, and a second env's same route is a clash.
TEST(prompt_validation, a_route_is_no_node_class_a_prompt_can_name) {
  node_catalogue c = catalogue();
  node_class route;
  route.class_type = "orch.route:POST /x";
  route.inputs = {{"body", "STRING", true, {}, {}, {}, {}}};
  route.outputs = {"STRING"};
  route.env = "a-nodes";
  route.route = {{"method", "POST"}, {"path", "/x"}, {"module", "m"}, {"handler", "h"}};
  ASSERT_FALSE(c.add(route).has_value());
  EXPECT_EQ(c.find("orch.route:POST /x"), nullptr);
  ASSERT_NE(c.find_route("orch.route:POST /x"), nullptr);
  EXPECT_EQ(c.find_route("orch.route:POST /x")->env, "a-nodes");
  route.env = "b-nodes";
  route.class_type = "orch.route:POST  /x";  // another name, the same method and path
  const auto clash = c.add(route);
  ASSERT_TRUE(clash.has_value());
  EXPECT_NE(clash->find("route POST /x is declared by both env 'a-nodes' and env 'b-nodes'"),
            std::string::npos)
      << *clash;
  auto p = parse_prompt(R"({"1": {"class_type": "orch.route:POST /x", "inputs": {"body": "{}"}},
                            "3": {"class_type": "Save", "inputs": {"image": ["1", 0]}}})");
  ASSERT_TRUE(p.ok());
  const auto r = validate_prompt(*p, c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->type, "missing_node_type");
}

TEST(prompt_validation, json_shape_matches_comfyui) {
  auto r = check(R"({"3": {"class_type": "Save", "inputs": {}}})");
  const auto j = r.to_json();
  EXPECT_EQ(j["error"]["type"], "prompt_outputs_failed_validation");
  EXPECT_EQ(j["node_errors"]["3"]["class_type"], "Save");
  EXPECT_EQ(j["node_errors"]["3"]["errors"][0]["type"], "required_input_missing");
  EXPECT_EQ(j["node_errors"]["3"]["dependent_outputs"][0], "3");
}

// A catalogue whose MakeImage has VALIDATE_INPUTS declared to take `mode` and `width` (or, with
// `declared` false, saying nothing of what it takes, as a native pack may), and whose Invert has
// one taking nothing but, with `input_types`, the link types.
node_catalogue with_custom_validation(bool input_types, bool declared = true) {
  node_catalogue c = catalogue();
  node_catalogue out;
  for (auto [name, cls] : c.classes()) {
    if (name == "MakeImage")
      cls.validate_inputs = {true, declared, {"mode", "width"}, false, false};
    if (name == "Invert") cls.validate_inputs = {true, true, {}, false, input_types};
    (void)out.add(cls);
  }
  return out;
}

using refusal = std::optional<validation_error>;

TEST(prompt_validation, custom_validation_gets_the_literals_it_takes_and_its_refusal_is_reported) {
  auto p = parse_prompt(R"({"1": {"class_type": "MakeImage",
                                  "inputs": {"width": 9000, "fill": 0.2, "mode": "cmyk"}},
                            "2": {"class_type": "Save", "inputs": {"image": ["1", 0]}}})");
  ASSERT_TRUE(p.ok());
  std::vector<nlohmann::json> seen;
  const auto r = validate_prompt(
      *p, with_custom_validation(false),
      [&](const prompt&, const std::string& id, const node_class& cls,
          const nlohmann::json& literals, const nlohmann::json&) -> refusal {
        EXPECT_EQ(id, "1");
        EXPECT_EQ(cls.class_type, "MakeImage");
        seen.push_back(literals);
        return validation_error{"custom_validation_failed", "Custom validation failed for node",
                                "cmyk is not supported", nlohmann::json::object()};
      });
  ASSERT_EQ(seen.size(), 1u);
  // Only what the method takes; width 9000 (past max) and the combo value are its call.
  EXPECT_EQ(seen[0], nlohmann::json::parse(R"({"width": 9000, "mode": "cmyk"})"));
  const auto& e = only_error(r, "1");
  EXPECT_EQ(e.type, "custom_validation_failed");
  EXPECT_EQ(e.message, "Custom validation failed for node");
  EXPECT_EQ(e.details, "cmyk is not supported");
  EXPECT_EQ(r.node_errors.at("1").dependent_outputs, std::vector<std::string>{"2"});
}

TEST(prompt_validation, an_undeclared_custom_validation_gets_every_literal_and_all_checks_stand) {
  auto p = parse_prompt(R"({"1": {"class_type": "MakeImage",
                                  "inputs": {"width": 9000, "fill": 0.2, "mode": "rgb"}},
                            "2": {"class_type": "Save", "inputs": {"image": ["1", 0]}}})");
  ASSERT_TRUE(p.ok());
  nlohmann::json seen;
  const auto r =
      validate_prompt(*p, with_custom_validation(false, /*declared=*/false),
                      [&](const prompt&, const std::string&, const node_class&,
                          const nlohmann::json& literals, const nlohmann::json&) -> refusal {
                        seen = literals;
                        return std::nullopt;
                      });
  EXPECT_EQ(seen, nlohmann::json::parse(R"({"width": 9000, "fill": 0.2, "mode": "rgb"})"));
  EXPECT_EQ(only_error(r, "1").type, "value_bigger_than_max");
}

TEST(prompt_validation, custom_validation_with_input_types_replaces_the_link_type_check) {
  auto p = parse_prompt(R"({"1": {"class_type": "LoadModel", "inputs": {}},
                            "2": {"class_type": "Invert", "inputs": {"image": ["1", 0]}},
                            "3": {"class_type": "Save", "inputs": {"image": ["2", 0]}}})");
  ASSERT_TRUE(p.ok());
  nlohmann::json types;
  const auto accept = [&](const prompt&, const std::string&, const node_class&,
                          const nlohmann::json&, const nlohmann::json& input_types) -> refusal {
    types = input_types;
    return std::nullopt;
  };
  EXPECT_TRUE(validate_prompt(*p, with_custom_validation(true), accept).ok());
  EXPECT_EQ(types, nlohmann::json::parse(R"({"image": "MODEL"})"));
  // Without input_types, a MODEL into an IMAGE input is ComfyUI's mismatch, custom or not.
  const auto r = validate_prompt(*p, with_custom_validation(false), accept);
  EXPECT_EQ(only_error(r, "2").type, "return_type_mismatch");
  // Without a validator nothing replaces the host's checks: the mismatch stands.
  EXPECT_EQ(only_error(validate_prompt(*p, with_custom_validation(true)), "2").type,
            "return_type_mismatch");
}

TEST(execution_order, dependencies_first_and_only_the_closure) {
  auto p = parse_prompt(R"({"1": {"class_type": "MakeImage", "inputs": {"width": 8}},
                            "2": {"class_type": "Invert", "inputs": {"image": ["1", 0]}},
                            "9": {"class_type": "MakeImage", "inputs": {"width": 8}},
                            "3": {"class_type": "Save", "inputs": {"image": ["2", 0]}}})");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(execution_order(*p, {"3"}), (std::vector<std::string>{"1", "2", "3"}));
}

// MakeImage -> Invert x (n - 2) -> Save, the Save node last, ids "0".."n-1". When `cycle`, the
// first Invert links to the last one instead of MakeImage, closing a loop of n - 2 nodes.
std::string chain(std::size_t n, bool cycle) {
  std::string text = R"({"0": {"class_type": "MakeImage", "inputs": {"width": 8}})";
  for (std::size_t i = 1; i + 1 < n; ++i) {
    const std::size_t from = (cycle && i == 1) ? n - 2 : i - 1;
    text += ",\"" + std::to_string(i) + R"(": {"class_type": "Invert", "inputs": {"image": [")" +
            std::to_string(from) + R"(", 0]}})";
  }
  text += ",\"" + std::to_string(n - 1) + R"(": {"class_type": "Save", "inputs": {"image": [")" +
          std::to_string(n - 2) + R"(", 0]}}})";
  return text;
}

// The recursive validator overflowed the stack at 12,000 nodes (8,000 worked); ordering recursed
// the same way.
TEST(prompt_validation, a_chain_of_100000_nodes_validates_and_orders_without_recursion) {
  for (const std::size_t n : {std::size_t{12000}, std::size_t{100000}}) {
    auto p = parse_prompt(chain(n, false));
    ASSERT_TRUE(p.ok()) << p.err().message;
    const auto r = validate_prompt(*p, catalogue());
    ASSERT_TRUE(r.ok()) << r.error->type;
    ASSERT_EQ(r.outputs, std::vector<std::string>{std::to_string(n - 1)});
    const auto order = execution_order(*p, r.outputs);
    ASSERT_EQ(order.size(), n);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(order[i], std::to_string(i));
  }
}

TEST(prompt_validation, a_cycle_of_100000_nodes_is_a_dependency_cycle) {
  auto p = parse_prompt(chain(100000, true));
  ASSERT_TRUE(p.ok());
  const auto r = validate_prompt(*p, catalogue());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->type, "prompt_outputs_failed_validation");
  // The walk from the output enters the loop at "99998" and comes back to it from "1": the
  // error marks the cycle's first 100 nodes from there, each naming the output that depends on
  // it, and says how long the cycle is (a bounded answer, not 99,998 errors of 99,998 names).
  ASSERT_EQ(r.node_errors.size(), 100u);
  const auto& ne = r.node_errors.at("99998");
  ASSERT_EQ(ne.errors.size(), 1u);
  EXPECT_EQ(ne.errors[0].type, "dependency_cycle");
  EXPECT_EQ(ne.errors[0].extra_info["cycle_length"], 99998);
  EXPECT_EQ(ne.errors[0].extra_info["cycle_nodes"].size(), 100u);
  EXPECT_NE(ne.errors[0].details.find("... (99998 nodes in the cycle)"), std::string::npos);
  EXPECT_EQ(r.node_errors.at("99899").errors[0].extra_info["cycle_start"], "99998");
  EXPECT_EQ(ne.dependent_outputs, std::vector<std::string>{"99999"});
  EXPECT_EQ(r.node_errors.count("99899"), 1u);
  EXPECT_EQ(r.node_errors.count("99898"), 0u);
  // Ordering a cycle (validation's job to refuse) still ends, each node once.
  EXPECT_EQ(execution_order(*p, {"99999"}).size(), 99999u);
}

// {"a": {"a": ... 1}} nested `depth` objects deep.
std::string nested_objects(std::size_t depth) {
  std::string text = "1";
  for (std::size_t i = 0; i < depth; ++i) text = R"({"a": )" + text + "}";
  return text;
}

// A call body deeper than the wire allows is refused by the worker, which drops its channel: a
// literal that deep would let a prompt kill a worker. It is refused before anything runs.
TEST(prompt_validation, a_literal_deeper_than_a_call_can_carry_is_invalid_input_type) {
  const auto prompt = [](std::size_t depth) {
    return R"({"3": {"class_type": "Save", "inputs": {"image": )" + nested_objects(depth) + "}}}";
  };
  EXPECT_TRUE(check(prompt(14)).ok());
  auto r = check(prompt(15));
  ASSERT_FALSE(r.ok());
  const auto& e = only_error(r, "3");
  EXPECT_EQ(e.type, "invalid_input_type");
  EXPECT_EQ(e.message, "Value nests deeper than 14 levels of arrays and objects");
}

TEST(prompt_validation, input_is_list_leaves_one_level_less_for_a_literal) {
  // The call carries each input of an INPUT_IS_LIST class inside a list: one level more.
  const node_catalogue base = catalogue();
  node_catalogue c;
  for (auto [name, cls] : base.classes()) {
    if (name == "Save") cls.input_is_list = true;
    (void)c.add(cls);
  }
  const auto prompt = [](std::size_t depth) {
    return R"({"3": {"class_type": "Save", "inputs": {"image": )" + nested_objects(depth) + "}}}";
  };
  EXPECT_TRUE(validate_prompt(*parse_prompt(prompt(13)), c).ok());
  auto r = validate_prompt(*parse_prompt(prompt(14)), c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(only_error(r, "3").message, "Value nests deeper than 13 levels of arrays and objects");
}

TEST(prompt_validation, an_unparsable_prompt_is_reported_as_comfyui_invalid_prompt) {
  const auto r = invalid_prompt_report(error{"invalid_prompt", "p.json: not valid JSON at byte 1"});
  EXPECT_FALSE(r.ok());
  const auto j = r.to_json();
  EXPECT_EQ(j["error"]["type"], "invalid_prompt");
  EXPECT_EQ(j["error"]["message"], "p.json: not valid JSON at byte 1");
  EXPECT_EQ(j["error"]["details"], "");
  EXPECT_EQ(j["error"]["extra_info"], nlohmann::json::object());
  EXPECT_EQ(j["node_errors"], nlohmann::json::object());
}

}  // namespace
}  // namespace orch::executor
