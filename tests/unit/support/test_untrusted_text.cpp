// Text from a worker, a pack or a prompt file made safe for JSON and for a terminal or log.
#include "orch/support/untrusted_text.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "orch/support/logging.hpp"

namespace orch {
namespace {

const std::string fffd = "\xEF\xBF\xBD";

TEST(untrusted_text, invalid_bytes_become_one_replacement_each) {
  EXPECT_EQ(valid_utf8("bad\xff\xfe"), "bad" + fffd + fffd);
  EXPECT_FALSE(is_valid_utf8("bad\xff\xfe"));
}

TEST(untrusted_text, a_truncated_sequence_is_one_replacement) {
  EXPECT_EQ(valid_utf8("a\xE2\x82"), "a" + fffd);  // the first two bytes of U+20AC
  EXPECT_EQ(valid_utf8("\xF0\x9F\x98x"), fffd + "x");
}

TEST(untrusted_text, overlong_forms_surrogates_and_out_of_range_are_replaced) {
  EXPECT_EQ(valid_utf8("\xC0\xAF"), fffd + fffd);                        // overlong '/'
  EXPECT_EQ(valid_utf8("\xE0\x80\xAF"), fffd + fffd + fffd);             // overlong, 3 bytes
  EXPECT_EQ(valid_utf8("\xED\xA0\x80"), fffd + fffd + fffd);             // U+D800
  EXPECT_EQ(valid_utf8("\xF4\x90\x80\x80"), fffd + fffd + fffd + fffd);  // U+110000
  EXPECT_EQ(valid_utf8("\xF5"), fffd);
}

TEST(untrusted_text, well_formed_text_is_unchanged) {
  const std::string text = "plain, \xC3\xA9t\xC3\xA9, \xE2\x82\xAC, \xF0\x9F\x98\x80, \t";
  EXPECT_TRUE(is_valid_utf8(text));
  EXPECT_EQ(valid_utf8(text), text);
  EXPECT_TRUE(is_printable(text));
  EXPECT_EQ(printable(text), text);
}

TEST(untrusted_text, what_valid_utf8_returns_always_dumps_as_json) {
  std::string every_byte_pair;
  for (int a = 0; a < 256; ++a) {
    for (int b = 0; b < 256; ++b) {
      every_byte_pair += static_cast<char>(a);
      every_byte_pair += static_cast<char>(b);
    }
  }
  EXPECT_THROW((void)nlohmann::json(every_byte_pair).dump(), nlohmann::json::type_error);
  EXPECT_NO_THROW((void)nlohmann::json(valid_utf8(every_byte_pair)).dump());
  EXPECT_NO_THROW((void)nlohmann::json(printable(every_byte_pair)).dump());
}

TEST(untrusted_text, ansi_escapes_and_newlines_are_escaped_for_a_terminal) {
  EXPECT_EQ(printable("\x1b[31mred\x1b[0m"), "\\e[31mred\\e[0m");
  EXPECT_EQ(printable("one\nforged line\r"), "one\\nforged line\\r");
  EXPECT_EQ(printable(std::string("nul\0bel\a del\x7f", 13)), "nul\\x00bel\\x07 del\\x7f");
  EXPECT_FALSE(is_printable("\x1b[2J"));
}

TEST(untrusted_text, c1_controls_and_bidi_overrides_are_escaped) {
  EXPECT_EQ(printable("\xC2\x9B"
                      "31m"),
            "\\u{009b}31m");  // CSI as one C1 code point
  EXPECT_EQ(printable("abc\xE2\x80\xAE"
                      "fed"),
            "abc\\u{202e}fed");  // RIGHT-TO-LEFT OVERRIDE
  EXPECT_EQ(printable("\xE2\x81\xA6x"), "\\u{2066}x");
}

TEST(untrusted_text, printable_also_replaces_invalid_bytes) {
  EXPECT_EQ(printable("bad\xff\x1b"), "bad" + fffd + "\\e");
}

// The log formatter escapes every message: a pack's log() or fail() text cannot colour or
// rewrite the terminal, nor start a line of its own.
TEST(logging, a_log_line_escapes_control_characters_and_invalid_bytes) {
  char path[] = "/tmp/orch-log-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  std::fflush(stderr);
  const int saved = ::dup(2);
  ASSERT_GE(saved, 0);
  ASSERT_GE(::dup2(fd, 2), 0);
  orch::init_logging("test");
  spdlog::info("node says {}", "\x1b[2Jgone\nfake line \xff");
  spdlog::default_logger()->flush();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  ::close(fd);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  ::unlink(path);
  const std::string line = text.str();
  EXPECT_NE(line.find("node says \\e[2Jgone\\nfake line " + fffd), std::string::npos) << line;
  EXPECT_EQ(line.find('\x1b'), std::string::npos);
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << line;
}

}  // namespace
}  // namespace orch
