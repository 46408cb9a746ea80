// Text from a worker is untrusted (untrusted_text.hpp): a pack's STRING output and fail()
// message with invalid UTF-8 and ANSI escapes reach the events, the terminal and the logs as
// U+FFFD and escaped text, and the host lives. Real workers, the untrusted_text_pack.
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "../cli/command_runner.hpp"
#include "runtime_fixture.hpp"

#include "orch/executor/events.hpp"
#include "orch/support/untrusted_text.hpp"

namespace orch::runtime_testing {
namespace {

const std::string fffd = "\xEF\xBF\xBD";

using cli_result = orch::testing::command_result;
using orch::testing::slurp;

class untrusted_text : public runtime_test {
 protected:
  // The fixture's deployment plus the untrusted_text pack.
  fs::path deployment() {
    const fs::path file = write_deployment();
    write(dir_ / "packs/ComfyUI-UntrustedText/nodes/comfy-env.toml",
          "[worker]\nlibrary = \"liborch_pack_untrusted_text.so\"\n");
    std::string text = slurp(file);
    const std::string last = "\"packs/ComfyUI-TestNodes\"]";
    const auto at = text.find(last);
    if (at == std::string::npos) {
      ADD_FAILURE() << "the fixture's deployment changed shape:\n" << text;
      return file;
    }
    text.replace(at, last.size(), "\"packs/ComfyUI-TestNodes\", \"packs/ComfyUI-UntrustedText\"]");
    std::ofstream(file, std::ios::trunc) << text;
    return file;
  }

  void start_with_pack() { start_file(deployment()); }

  executor::prompt_outcome run_with(executor::event_sink& sink, const std::string& json) {
    auto p = executor::parse_prompt(json);
    EXPECT_TRUE(p.ok());
    const auto report = executor::validate_prompt(*p, host_->catalogue());
    EXPECT_TRUE(report.ok()) << report.to_json().dump();
    executor::executor ex(*host_, sink);
    return ex.run(*p, report.outputs, "untrusted-" + std::to_string(++prompts_));
  }

  cli_result cli(const fs::path& deployment, const std::string& prompt_json, bool json) {
    const fs::path prompt = dir_ / "prompt.json";
    std::ofstream(prompt, std::ios::trunc) << prompt_json;
    return orch::testing::run_command("'" + std::string(ORCH_TEST_COMFY_ORCH) + "' run '" +
                                      deployment.string() + "' --prompt '" + prompt.string() + "'" +
                                      (json ? " --json" : ""));
  }
};

constexpr const char* string_prompt = R"({"1": {"class_type": "UntrustedString", "inputs": {}}})";
constexpr const char* fail_prompt = R"({"1": {"class_type": "UntrustedFail", "inputs": {}}})";

// Every line of `text` is one JSON object, and none holds a raw escape character.
void expect_json_lines(const std::string& text) {
  std::istringstream lines(text);
  std::string line;
  std::size_t count = 0;
  while (std::getline(lines, line)) {
    ++count;
    EXPECT_TRUE(nlohmann::json::accept(line)) << line;
  }
  EXPECT_GT(count, 0u);
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
}

TEST_F(untrusted_text, a_string_output_with_invalid_utf8_reaches_the_events_as_replacement) {
  start_with_pack();
  std::ostringstream json_out;
  executor::json_event_sink lines(json_out);
  const auto outcome = run_with(lines, string_prompt);
  ASSERT_TRUE(outcome.ok) << (outcome.error ? outcome.error->dump() : "");
  const std::string value = outcome.nodes.at("1").outputs.at(0).get<std::string>();
  EXPECT_TRUE(is_valid_utf8(value));
  EXPECT_EQ(value.rfind("bad" + fffd + fffd + " ", 0), 0u) << value;
  // The events carry no node's values (executed has UI dicts only); the CLI's outputs line does,
  // checked below.
  expect_json_lines(json_out.str());
}

TEST_F(untrusted_text, a_fail_message_with_invalid_utf8_and_ansi_is_replaced_and_escaped) {
  start_with_pack();
  std::ostringstream json_out, text_out;
  executor::json_event_sink lines(json_out);
  executor::text_event_sink text(text_out);
  const auto outcome = run_with(lines, fail_prompt);
  ASSERT_FALSE(outcome.ok);
  ASSERT_TRUE(outcome.error.has_value());
  const std::string message = (*outcome.error)["exception_message"].get<std::string>();
  EXPECT_TRUE(is_valid_utf8(message));
  expect_json_lines(json_out.str());

  (void)run_with(text, fail_prompt);
  const std::string shown = text_out.str();
  EXPECT_EQ(shown.find('\x1b'), std::string::npos) << shown;
  EXPECT_NE(shown.find("bad" + fffd + fffd + " \\e[31mred\\e[0m \\e[2J\\nforged line"),
            std::string::npos)
      << shown;
  EXPECT_EQ(shown.find("\nforged line"), std::string::npos) << "a pack forged a line";
}

TEST_F(untrusted_text, class_names_from_the_ready_message_are_printable) {
  start_with_pack();
  const auto* c = host_->catalogue().find("UntrustedString");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->display_name, "Untrusted \\e[31mString" + fffd);
  EXPECT_EQ(c->category, "test\\e]0;retitled\\x07");
}

TEST_F(untrusted_text, the_cli_survives_a_bad_string_output_in_text_and_json_mode) {
  const fs::path file = deployment();
  const auto text = cli(file, string_prompt, false);
  EXPECT_EQ(text.exit_code, 0) << text.out << text.err;
  // The output is a JSON value in the event line: its escapes are JSON's.
  EXPECT_NE(text.out.find("bad" + fffd + fffd + " \\u001b[31mred"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find('\x1b'), std::string::npos) << text.out;
  // The pack's log() line went through the worker's log formatter.
  EXPECT_NE(text.err.find("node 1: bad" + fffd + fffd + " \\e[31mred\\e[0m \\e[2J\\nforged line"),
            std::string::npos)
      << text.err;
  EXPECT_EQ(text.err.find('\x1b'), std::string::npos) << text.err;
  EXPECT_EQ(text.err.find("\nforged line"), std::string::npos) << text.err;

  const auto json = cli(file, string_prompt, true);
  EXPECT_EQ(json.exit_code, 0) << json.out << json.err;
  expect_json_lines(json.out);
  EXPECT_NE(json.out.find("\"outputs\""), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("bad" + fffd + fffd), std::string::npos) << json.out;
}

TEST_F(untrusted_text, the_cli_survives_a_bad_fail_message_in_text_and_json_mode) {
  const fs::path file = deployment();
  const auto json = cli(file, fail_prompt, true);
  EXPECT_EQ(json.exit_code, 2) << json.out << json.err;  // a node failed (docs/cli.md)
  expect_json_lines(json.out);
  EXPECT_NE(json.out.find("\"execution_error\""), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("bad" + fffd + fffd), std::string::npos) << json.out;

  const auto text = cli(file, fail_prompt, false);
  EXPECT_EQ(text.exit_code, 2) << text.out << text.err;
  EXPECT_NE(text.out.find("exception_message=bad" + fffd + fffd + " \\e[31m"), std::string::npos)
      << text.out;
  EXPECT_EQ(text.out.find('\x1b'), std::string::npos) << text.out;
  EXPECT_EQ(text.err.find('\x1b'), std::string::npos) << text.err;
}

}  // namespace
}  // namespace orch::runtime_testing
