// Prompts that once crashed `comfy-orch run` or printed only to stderr: each is refused as
// ComfyUI's invalid_prompt (or, for a graph, a validation error) in the shape of every other
// refusal, on stdout, with exit code 1 (docs/cli.md). Real host, real workers.
#include <sys/wait.h>

#include <fstream>
#include <sstream>

#include "../cli/command_runner.hpp"
#include "runtime_fixture.hpp"

namespace orch::runtime_testing {
namespace {

using cli_result = orch::testing::command_result;
using orch::testing::slurp;

class invalid_prompt_cli : public runtime_test {
 protected:
  fs::path prompt_file(const std::string& text) {
    const fs::path file = dir_ / ("prompt-" + std::to_string(++files_) + ".json");
    std::ofstream(file, std::ios::binary) << text;
    return file;
  }

  cli_result run_cli(const fs::path& prompt, bool json) {
    if (deployment_.empty()) deployment_ = write_deployment();
    return orch::testing::run_command("'" + std::string(ORCH_TEST_COMFY_ORCH) + "' run '" +
                                      deployment_.string() + "' --prompt '" + prompt.string() + "'" +
                                      (json ? " --json" : ""));
  }

  // --json: exactly one line, ComfyUI's /prompt answer for an invalid prompt; text: the refusal.
  void expect_invalid_prompt(const fs::path& prompt, const std::string& message_part) {
    SCOPED_TRACE(prompt.string());
    const auto json = run_cli(prompt, true);
    EXPECT_EQ(json.exit_code, 1) << json.out << json.err;
    ASSERT_TRUE(nlohmann::json::accept(json.out)) << json.out << json.err;
    const auto line = nlohmann::json::parse(json.out);
    EXPECT_EQ(line["type"], "validation_error");
    EXPECT_EQ(line["data"]["error"]["type"], "invalid_prompt");
    EXPECT_EQ(line["data"]["error"]["details"], "");
    EXPECT_EQ(line["data"]["error"]["extra_info"], nlohmann::json::object());
    EXPECT_EQ(line["data"]["node_errors"], nlohmann::json::object());
    const std::string message = line["data"]["error"]["message"];
    EXPECT_NE(message.find(message_part), std::string::npos) << message;

    const auto text = run_cli(prompt, false);
    EXPECT_EQ(text.exit_code, 1) << text.out << text.err;
    EXPECT_EQ(text.out.rfind("prompt refused: invalid_prompt: ", 0), 0u) << text.out << text.err;
    EXPECT_NE(text.out.find(message_part), std::string::npos) << text.out;
  }

  fs::path deployment_;
  int files_ = 0;
};

TEST_F(invalid_prompt_cli, a_refusal_in_text_mode_escapes_what_the_prompt_said) {
  // A class name with an ANSI escape and a forged newline: the terminal gets it escaped.
  const auto text = run_cli(
      prompt_file(R"({"1\u001b[2J": {"class_type": "Evil\u001b[31m\nnode 9 (X): ok", "inputs": {}}})"),
      false);
  EXPECT_EQ(text.exit_code, 1) << text.out << text.err;
  EXPECT_NE(text.out.find("prompt refused: "), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find('\x1b'), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("\nnode 9 (X): ok"), std::string::npos) << text.out;
}

TEST_F(invalid_prompt_cli, an_output_that_fails_validation_is_ignored_and_said_as_comfyui_does) {
  // Output 1 is valid, output 2's input is not a number: the prompt runs output 1 only.
  const auto prompt = prompt_file(R"({"1": {"class_type": "TestEmpty", "inputs": {}},
                                      "2": {"class_type": "TestSleep", "inputs": {"ms": "soon"}}})");
  const auto text = run_cli(prompt, false);
  EXPECT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_NE(text.out.find("Failed to validate prompt for output 2:\n* TestSleep 2:\n  - "),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("Output will be ignored"), std::string::npos) << text.out;

  const auto json = run_cli(prompt, true);
  EXPECT_EQ(json.exit_code, 0) << json.out << json.err;
  bool said = false;
  std::istringstream lines(json.out);
  for (std::string line; std::getline(lines, line);) {
    const auto event = nlohmann::json::parse(line, nullptr, false);
    if (event.is_discarded() || event["type"] != "outputs_ignored") continue;
    said = true;
    const auto& errors = event["data"]["node_errors"];
    ASSERT_TRUE(errors.contains("2")) << line;
    EXPECT_EQ(errors["2"]["class_type"], "TestSleep");
    EXPECT_EQ(errors["2"]["dependent_outputs"], nlohmann::json::array({"2"}));
    EXPECT_FALSE(errors.contains("1")) << line;
  }
  EXPECT_TRUE(said) << json.out;
}

TEST_F(invalid_prompt_cli, an_array_is_refused_as_invalid_prompt_on_stdout) {
  expect_invalid_prompt(prompt_file(R"([{"class_type": "SolidImage"}])"), "not array");
}

TEST_F(invalid_prompt_cli, a_node_without_class_type_is_comfyuis_missing_node_type) {
  const auto prompt = prompt_file(R"({"4": {"inputs": {}}})");
  const auto json = run_cli(prompt, true);
  EXPECT_EQ(json.exit_code, 1) << json.out << json.err;
  nlohmann::json refused;
  std::istringstream lines(json.out);
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.value("type", "") == "validation_error") refused = j["data"];
  }
  ASSERT_TRUE(refused.is_object()) << json.out;
  EXPECT_EQ(refused["error"]["type"], "missing_node_type");
  EXPECT_EQ(refused["error"]["message"],
            "Cannot execute because a node is missing the class_type property.");
  EXPECT_EQ(refused["error"]["details"], "Node ID '#4'");
  EXPECT_TRUE(refused["error"]["extra_info"]["class_type"].is_null());
  EXPECT_EQ(refused["node_errors"], nlohmann::json::object());
  const auto text = run_cli(prompt, false);
  EXPECT_EQ(text.exit_code, 1) << text.out << text.err;
  EXPECT_NE(text.out.find("prompt refused: missing_node_type: Cannot execute because a node is "
                          "missing the class_type property."),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("node 4 (no class_type): missing_node_type"), std::string::npos)
      << text.out;
}

TEST_F(invalid_prompt_cli, text_that_is_not_json_is_refused_with_its_byte_offset) {
  expect_invalid_prompt(prompt_file("{\"1\": \xff\xfe"), "not valid JSON at byte");
}

TEST_F(invalid_prompt_cli, a_number_out_of_range_is_refused_not_a_crash) {
  expect_invalid_prompt(
      prompt_file(R"({"1": {"class_type": "SolidImage", "inputs": {"value": 1e999}}})"),
      "number overflow");
}

TEST_F(invalid_prompt_cli, a_value_nested_100000_deep_is_refused_not_a_stack_overflow) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  expect_invalid_prompt(
      prompt_file(R"({"1": {"class_type": "SolidImage", "inputs": {"value": )" + deep + "}}}"),
      "nests deeper than 256");
}

TEST_F(invalid_prompt_cli, dev_zero_is_refused_before_it_is_read) {
  expect_invalid_prompt("/dev/zero", "not a regular file");
}

// A graph problem is a validation error, not invalid_prompt: the recursive validator overflowed
// the stack on long chains; a cycle of 100,000 nodes is now a dependency_cycle.
TEST_F(invalid_prompt_cli, a_cycle_of_100000_nodes_is_refused_as_a_dependency_cycle) {
  constexpr int n = 100000;
  std::string text = R"({"0": {"class_type": "ImageChecksum", "inputs": {"image": ["1", 0]}})";
  for (int i = 1; i < n; ++i) {
    const int from = i + 1 < n ? i + 1 : 1;
    text += ",\"" + std::to_string(i) +
            R"(": {"class_type": "InvertImage", "inputs": {"image": [")" + std::to_string(from) +
            R"(", 0]}})";
  }
  text += "}";
  const auto json = run_cli(prompt_file(text), true);
  EXPECT_EQ(json.exit_code, 1) << json.err;
  std::istringstream lines(json.out);
  std::string line;
  bool refused = false;
  while (std::getline(lines, line)) {
    ASSERT_TRUE(nlohmann::json::accept(line)) << line;
    const auto j = nlohmann::json::parse(line);
    if (j["type"] != "validation_error") continue;
    refused = true;
    EXPECT_EQ(j["data"]["error"]["type"], "prompt_outputs_failed_validation");
    EXPECT_EQ(j["data"]["node_errors"]["1"]["errors"][0]["type"], "dependency_cycle");
  }
  EXPECT_TRUE(refused) << json.out;
}

// A literal travels to the worker inside the call body, whose nesting the worker's decoder caps
// (ipc::max_body_depth): one level deeper and the worker refused the whole body and dropped its
// channel, so a prompt could kill a worker. Validation refuses that; the deepest literal it lets
// through reaches the worker, which stays up.
TEST_F(invalid_prompt_cli, the_deepest_literal_validation_accepts_does_not_kill_the_worker) {
  ASSERT_NO_FATAL_FAILURE(start());
  const auto nested = [](int depth) {
    std::string text = "1";
    for (int i = 0; i < depth; ++i) text = R"({"a": )" + text + "}";
    return R"({"1": {"class_type": "ImageChecksum", "inputs": {"image": )" + text + "}}}";
  };
  const std::string env = env_of(*host_, "ImageChecksum");
  const auto before = info(env);
  const auto outcome = run(nested(14));
  ASSERT_FALSE(outcome.ok);  // an object is not an image
  EXPECT_NE((*outcome.error)["exception_type"], "worker_died") << outcome.error->dump();
  const auto after = info(env);
  EXPECT_EQ(after.generation, before.generation) << "the worker was restarted";
  EXPECT_EQ(after.state, runtime::worker_state::ready);

  auto p = executor::parse_prompt(nested(15));
  ASSERT_TRUE(p.ok());
  const auto report = executor::validate_prompt(*p, host_->catalogue());
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.node_errors.at("1").errors.at(0).type, "invalid_input_type");
}

}  // namespace
}  // namespace orch::runtime_testing
