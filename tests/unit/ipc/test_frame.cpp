// The frame header: fixed little-endian layout, validated before any body byte.
#include <gtest/gtest.h>

#include "leak_check.hpp"

#include "orch/ipc/frame.hpp"

namespace orch::ipc {
namespace {

using frame_header_test = testing::leak_checked_test;

frame_header sample() {
  frame_header h;
  h.type = 3;
  h.flags = frame_flags::response;
  h.body_length = 17;
  h.request_id = 0x0102030405060708ull;
  h.generation = 9;
  return h;
}

std::string code(const header_bytes& b, std::uint32_t cap = default_max_body) {
  auto h = decode_header(b, cap);
  return h.ok() ? "ok" : h.err().code;
}

TEST_F(frame_header_test, round_trips) {
  auto decoded = decode_header(encode_header(sample()));
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, sample());
}

TEST_F(frame_header_test, layout_is_little_endian_at_fixed_offsets) {
  const header_bytes b = encode_header(sample());
  EXPECT_EQ(b[0], std::byte{'O'});
  EXPECT_EQ(b[3], std::byte{'M'});
  EXPECT_EQ(b[4], std::byte{1});    // version low byte
  EXPECT_EQ(b[6], std::byte{3});    // type
  EXPECT_EQ(b[12], std::byte{17});  // body length
  EXPECT_EQ(b[16], std::byte{8});   // request id, least significant byte first
  EXPECT_EQ(b[23], std::byte{1});
  EXPECT_EQ(b[24], std::byte{9});  // generation
}

TEST_F(frame_header_test, bad_magic_is_rejected) {
  auto b = encode_header(sample());
  b[0] = std::byte{'X'};
  EXPECT_EQ(code(b), "bad_magic");
}

TEST_F(frame_header_test, other_version_is_rejected) {
  auto b = encode_header(sample());
  b[4] = std::byte{2};
  EXPECT_EQ(code(b), "bad_version");
}

TEST_F(frame_header_test, body_over_the_cap_is_rejected) {
  auto h = sample();
  h.body_length = 1025;
  EXPECT_EQ(code(encode_header(h), 1024), "oversize");
  h.body_length = 1024;
  EXPECT_EQ(code(encode_header(h), 1024), "ok");
}

TEST_F(frame_header_test, unknown_flags_and_nonzero_reserved_are_rejected) {
  auto h = sample();
  h.flags = 0x80;
  EXPECT_EQ(code(encode_header(h)), "bad_flags");
  h.flags = frame_flags::error;  // error without response
  EXPECT_EQ(code(encode_header(h)), "bad_flags");
  auto b = encode_header(sample());
  b[30] = std::byte{1};
  EXPECT_EQ(code(b), "bad_reserved");
}

}  // namespace
}  // namespace orch::ipc
