// Bodies: CBOR maps checked against the message catalogue.
#include <gtest/gtest.h>

#include "leak_check.hpp"

#include "orch/ipc/frame.hpp"
#include "orch/ipc/message.hpp"

namespace orch::ipc {
namespace {

using message_body_test = testing::leak_checked_test;

std::string code(message_type t, const std::vector<std::uint8_t>& bytes, std::uint16_t flags = 0) {
  auto body = decode_body(static_cast<std::uint16_t>(t), flags, bytes);
  return body.ok() ? "ok" : body.err().code;
}

TEST_F(message_body_test, catalogue_body_round_trips_through_cbor) {
  const json body{{"descriptor", descriptor_to_json({3, 9, 4096, 100})}};
  auto decoded =
      decode_body(static_cast<std::uint16_t>(message_type::lease_grant), 0, encode_body(body));
  ASSERT_TRUE(decoded.ok());
  auto d = descriptor_from_json((*decoded)["descriptor"]);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, (buffer_descriptor{3, 9, 4096, 100}));
}

TEST_F(message_body_test, empty_body_is_an_empty_map) {
  EXPECT_EQ(code(message_type::ping, {}), "ok");
}

TEST_F(message_body_test, missing_required_field_is_rejected) {
  EXPECT_EQ(code(message_type::evict, encode_body(json::object())), "missing_field");
}

TEST_F(message_body_test, field_of_the_wrong_kind_is_rejected) {
  EXPECT_EQ(code(message_type::evict, encode_body(json{{"bytes", -5}})), "bad_field");
  EXPECT_EQ(code(message_type::lease_grant, encode_body(json{{"descriptor", {{"segment", 1}}}})),
            "bad_field");
  // generation is 32-bit on the wire
  EXPECT_EQ(code(message_type::lease_grant,
                 encode_body(json{
                     {"descriptor",
                      {{"segment", 1}, {"offset", 0}, {"size", 1}, {"generation", 1ull << 40}}}})),
            "bad_field");
}

TEST_F(message_body_test, non_map_and_garbage_are_rejected) {
  EXPECT_EQ(code(message_type::ping, encode_body(json::array({1, 2}))), "not_a_map");
  EXPECT_EQ(code(message_type::ping, {0xff, 0x00, 0x13}), "bad_cbor");
  auto two_items = encode_body(json::object());
  two_items.push_back(0xa0);
  EXPECT_EQ(code(message_type::ping, two_items), "bad_cbor");
}

TEST_F(message_body_test, deep_nesting_stops_at_the_limit) {
  std::vector<std::uint8_t> deep(100000, 0x81);  // array of array of ... 100000 deep
  deep.push_back(0x00);
  EXPECT_EQ(code(message_type::ping, deep), "too_deep");
}

TEST_F(message_body_test, huge_declared_lengths_are_rejected_not_thrown) {
  // Found by fuzz_body: an array or map header claiming 2^63 elements made the stock DOM
  // builder throw out_of_range even with exceptions disabled.
  const std::vector<std::uint8_t> array{0x9b, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  const std::vector<std::uint8_t> map{0xbb, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  const std::vector<std::uint8_t> fuzzed{0x92, 0x08, 0xf6, 0xbb, 0x92, 0x08,
                                         0xf6, 0xbb, 0x50, 0x48, 0x50, 0x48};
  EXPECT_EQ(code(message_type::ping, array), "bad_cbor");
  EXPECT_EQ(code(message_type::ping, map), "bad_cbor");
  EXPECT_EQ(code(message_type::node_end, fuzzed), "bad_cbor");
}

TEST_F(message_body_test, unknown_type_is_reported_as_such) {
  auto body = decode_body(999, 0, encode_body(json::object()));
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.err().code, "unknown_type");
}

TEST_F(message_body_test, error_response_needs_code_and_message) {
  const auto flags = static_cast<std::uint16_t>(frame_flags::response | frame_flags::error);
  EXPECT_EQ(code(message_type::ping, encode_body(error_body({"x", "y"})), flags), "ok");
  EXPECT_EQ(code(message_type::ping, encode_body(json{{"code", "x"}}), flags), "bad_field");
}

// CBOR text strings are not checked for UTF-8 by nlohmann: a worker's "bad\xff\xfe" once passed
// here and ended the host when an event sink dumped it (type_error.316).
TEST_F(message_body_test, text_strings_and_keys_of_invalid_utf8_are_repaired_when_decoded) {
  const std::string bad = "bad\xff\xfe";
  const auto flags = static_cast<std::uint16_t>(frame_flags::response);
  auto body = decode_body(static_cast<std::uint16_t>(message_type::call), flags,
                          encode_body(json{{"outputs", json::array({bad})}, {bad, 1}}));
  ASSERT_TRUE(body.ok()) << body.err().message;
  EXPECT_EQ((*body)["outputs"][0], "bad\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_TRUE(body->contains("bad\xEF\xBF\xBD\xEF\xBF\xBD"));
  EXPECT_NO_THROW((void)body->dump());
}

}  // namespace
}  // namespace orch::ipc
