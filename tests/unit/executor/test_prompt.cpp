// Parsing ComfyUI API-format prompts, including the real ones of shared/corpus/prompts.
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "orch/executor/prompt.hpp"
#include "orch/executor/prompt_validation.hpp"

namespace orch::executor {
namespace {

namespace fs = std::filesystem;
using runtime::node_catalogue;

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

TEST(prompt, the_client_that_queued_it_is_kept_for_the_workers_client_id) {
  auto top = parse_prompt(R"({"prompt": {"1": {"class_type": "A", "inputs": {}}},
                              "client_id": "c1", "extra_data": {"client_id": "c2"}})");
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(top->client_id, "c1");  // ComfyUI copies the body's over extra_data's
  auto extra = parse_prompt(R"({"prompt": {"1": {"class_type": "A", "inputs": {}}},
                                "extra_data": {"client_id": "c2"}})");
  ASSERT_TRUE(extra.ok());
  EXPECT_EQ(extra->client_id, "c2");
  auto long_id = parse_prompt(R"({"prompt": {"1": {"class_type": "A", "inputs": {}}},
                                  "client_id": ")" + std::string(300, 'x') + R"("})");
  ASSERT_TRUE(long_id.ok());
  EXPECT_EQ(long_id->client_id, "");
  auto bare = parse_prompt(R"({"1": {"class_type": "A", "inputs": {}}})");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->client_id, "");
}

TEST(prompt, a_request_bodys_extra_pnginfo_is_kept_for_the_hidden_value) {
  auto p = parse_prompt(R"({"prompt": {"1": {"class_type": "A", "inputs": {}}},
                            "extra_data": {"extra_pnginfo": {"workflow": {"nodes": [1]}}}})");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->extra_pnginfo, nlohmann::json::parse(R"({"workflow": {"nodes": [1]}})"));
  auto bare = parse_prompt(R"({"1": {"class_type": "A", "inputs": {}}})");
  ASSERT_TRUE(bare.ok());
  EXPECT_TRUE(bare->extra_pnginfo.is_null());
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

TEST(prompt, a_node_without_class_type_is_comfyuis_missing_node_type_naming_it) {
  auto p = parse_prompt(R"({"7": {"inputs": {}}})");
  ASSERT_TRUE(p.ok()) << p.err().message;
  EXPECT_FALSE(p->nodes.at("7").has_class_type);
  const auto report = validate_prompt(*p, node_catalogue{});
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.error->type, "missing_node_type");
  EXPECT_EQ(report.error->message,
            "Cannot execute because a node is missing the class_type property.");
  EXPECT_EQ(report.error->details, "Node ID '#7'");
  EXPECT_TRUE(report.error->extra_info["class_type"].is_null());
  EXPECT_TRUE(report.node_errors.empty());
}

TEST(prompt, the_node_order_is_the_documents_in_a_prompt_and_in_a_request_body) {
  auto bare = parse_prompt(R"({"10": {"class_type": "A"}, "9": {"class_type": "B"},
                               "2": {"class_type": "C"}})");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->order, (std::vector<std::string>{"10", "9", "2"}));
  auto body = parse_prompt(R"({"client_id": "x", "prompt": {"b": {"class_type": "A",
                               "inputs": {"z": {"k": 1}}}, "a": {"class_type": "B"}}})");
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(body->order, (std::vector<std::string>{"b", "a"})) << "inner keys are no node ids";
}

TEST(prompt, rejects_non_object_shapes) {
  EXPECT_FALSE(parse_prompt("[]").ok());
  EXPECT_FALSE(parse_prompt(R"({"1": 5})").ok());
  EXPECT_FALSE(parse_prompt(R"({"1": {"class_type": "A", "inputs": []}})").ok());
}

TEST(prompt, an_array_is_an_invalid_prompt_naming_what_it_got) {
  auto p = parse_prompt(R"([{"class_type": "A"}])");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.err().code, "invalid_prompt");
  EXPECT_NE(p.err().message.find("not array"), std::string::npos) << p.err().message;
}

// nlohmann reports a number it cannot hold as out_of_range.406, which parse_prompt once let
// escape and end the host.
TEST(prompt, a_number_out_of_range_is_an_invalid_prompt_not_an_exception) {
  auto p = parse_prompt(R"({"1": {"class_type": "A", "inputs": {"value": 1e999}}})");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.err().code, "invalid_prompt");
  EXPECT_NE(p.err().message.find("number overflow"), std::string::npos) << p.err().message;
}

std::string nested_arrays(std::size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

// A literal nested 100,000 arrays deep once overflowed the stack when it was copied. It is
// refused while parsing, before a tree that deep exists.
TEST(prompt, nesting_deeper_than_the_limit_is_refused_while_parsing) {
  auto p = parse_prompt(R"({"1": {"class_type": "A", "inputs": {"value": )" +
                        nested_arrays(100000) + "}}}");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.err().code, "invalid_prompt");
  EXPECT_NE(p.err().message.find("nests deeper than 256"), std::string::npos) << p.err().message;
}

TEST(prompt, nesting_up_to_the_limit_parses) {
  // The document, the node, its inputs: three levels before the value.
  const std::string at_limit = R"({"1": {"class_type": "A", "inputs": {"value": )" +
                               nested_arrays(max_prompt_depth - 3) + "}}}";
  EXPECT_TRUE(parse_prompt(at_limit).ok());
  const std::string over = R"({"1": {"class_type": "A", "inputs": {"value": )" +
                           nested_arrays(max_prompt_depth - 2) + "}}}";
  EXPECT_FALSE(parse_prompt(over).ok());
}

// Issue 55: each array or object takes some 70 bytes parsed, so an 8 MiB body of nested arrays
// had taken 530 MiB. A document holds at most max_json_containers of them; the count is
// refused while parsing, and a document at the count parses.
TEST(prompt, more_arrays_and_objects_than_the_limit_are_refused_while_parsing) {
  std::string many = "[";
  for (std::size_t i = 0; i < max_json_containers; ++i) many += "[],";
  many.back() = ']';  // the outer array and max_json_containers - 1 more: at the limit
  many.erase(many.size() - 4, 3);
  EXPECT_TRUE(parse_bounded_json(many).ok());
  auto over = parse_bounded_json("[[]," + many.substr(1));
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.err().message.find("more than 1048576 arrays and objects"), std::string::npos)
      << over.err().message;
}

TEST(prompt, text_that_is_not_json_is_an_invalid_prompt) {
  auto p = parse_prompt("this is not json");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.err().code, "invalid_prompt");
  EXPECT_NE(p.err().message.find("not valid JSON at byte"), std::string::npos);
}

// nlohmann's parse error quotes the last token read, raw: an invalid byte there would make the
// refusal itself throw type_error.316 when --json prints it.
TEST(prompt, a_parse_error_quoting_invalid_bytes_is_valid_utf8) {
  auto p = parse_prompt("{\"1\": \xff\xfe}");
  ASSERT_FALSE(p.ok());
  EXPECT_NO_THROW((void)nlohmann::json(p.err().message).dump()) << p.err().message;
}

// `--prompt /dev/zero` read 2 GB before failing and /dev/urandom ran for seconds: a file that is
// not a regular file is refused before a byte is read.
TEST(prompt_file, a_device_is_refused_before_it_is_read) {
  for (const char* device : {"/dev/zero", "/dev/urandom"}) {
    auto p = parse_prompt_file(device);
    ASSERT_FALSE(p.ok()) << device;
    EXPECT_EQ(p.err().code, "invalid_prompt");
    EXPECT_NE(p.err().message.find("not a regular file"), std::string::npos) << p.err().message;
  }
}

class prompt_file_dir : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/orch-prompt-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

TEST_F(prompt_file_dir, a_fifo_and_a_directory_are_refused_without_blocking) {
  const fs::path fifo = dir_ / "prompt.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);  // no writer: an open() without O_NONBLOCK waits
  auto p = parse_prompt_file(fifo);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.err().message.find("not a regular file"), std::string::npos) << p.err().message;
  auto d = parse_prompt_file(dir_);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.err().message.find("not a regular file"), std::string::npos) << d.err().message;
}

TEST_F(prompt_file_dir, a_file_larger_than_the_cap_is_refused_before_it_is_read) {
  const fs::path big = dir_ / "big.json";
  { std::ofstream(big) << "{}"; }
  fs::resize_file(big, max_prompt_file_bytes + 1);  // sparse: takes no disk
  auto p = parse_prompt_file(big);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.err().code, "invalid_prompt");
  EXPECT_NE(p.err().message.find("larger than the limit"), std::string::npos) << p.err().message;
}

TEST_F(prompt_file_dir, a_missing_file_is_an_invalid_prompt_naming_it) {
  auto p = parse_prompt_file(dir_ / "absent.json");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.err().code, "invalid_prompt");
  EXPECT_NE(p.err().message.find("absent.json: file not found"), std::string::npos);
}

TEST(prompt_corpus, every_real_prompt_parses_and_is_refused_for_each_unknown_class) {
  if (!fs::exists(prompts_dir())) GTEST_SKIP() << "prompt corpus not found at " << prompts_dir();
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(prompts_dir())) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    auto p = parse_prompt_file(entry.path());
    ASSERT_TRUE(p.ok()) << entry.path() << ": " << p.err().message;
    // No pack provides any of these classes: ComfyUI names the first node in document order,
    // and comfy-orch lists every one, by id and class, in that order.
    const auto report = validate_prompt(*p, node_catalogue{});
    ASSERT_FALSE(report.ok());
    EXPECT_EQ(report.error->type, "missing_node_type");
    EXPECT_TRUE(report.node_errors.empty());
    EXPECT_EQ(report.error->extra_info["node_id"], p->order.at(0));
    const auto& listed = report.error->extra_info["orch_missing_nodes"];
    ASSERT_EQ(listed.size(), p->nodes.size()) << entry.path();
    for (std::size_t i = 0; i < listed.size(); ++i) {
      const auto& node = p->nodes.at(p->order[i]);
      EXPECT_EQ(listed[i]["node_id"], node.id);
      EXPECT_EQ(listed[i]["class_type"], node.class_type);
      EXPECT_EQ(report.missing_classes.count(node.class_type), 1u);
    }
  }
  EXPECT_EQ(files, 9u);
}

}  // namespace
}  // namespace orch::executor
