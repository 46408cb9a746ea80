// Descriptor validation: every receiver rejects bad descriptors with a typed error.
#include <gtest/gtest.h>

#include <array>

#include "orch/ipc/descriptor.hpp"

namespace orch::ipc {
namespace {

class descriptor_validation : public ::testing::Test {
 protected:
  // A 64 KiB data area of 16 granules of 4 KiB; one live block of 2 granules at offset 8 KiB.
  segment_geometry geometry{7, 64 * 1024, 4096};
  std::array<std::atomic<std::uint64_t>, 16> entries{};
  void SetUp() override { entries[2].store(pack_block_entry(42, 2)); }
  std::string code(const buffer_descriptor& d) {
    auto st = validate_descriptor(d, geometry, entries);
    return st.ok() ? "ok" : st.err().code;
  }
};

TEST_F(descriptor_validation, current_descriptor_inside_its_block_is_accepted) {
  EXPECT_EQ(code({7, 42, 8192, 8192}), "ok");
  EXPECT_EQ(code({7, 42, 8192, 1}), "ok");
}

TEST_F(descriptor_validation, other_segment_is_unknown) {
  EXPECT_EQ(code({8, 42, 8192, 10}), "unknown_segment");
}

TEST_F(descriptor_validation, range_past_the_data_area_is_out_of_bounds) {
  EXPECT_EQ(code({7, 42, 64 * 1024, 1}), "out_of_bounds");
  EXPECT_EQ(code({7, 42, 60 * 1024, 8 * 1024}), "out_of_bounds");
}

TEST_F(descriptor_validation, offset_plus_size_overflow_is_out_of_bounds_not_wrapped) {
  EXPECT_EQ(code({7, 42, 8192, ~std::uint64_t{0}}), "out_of_bounds");
}

TEST_F(descriptor_validation, size_past_its_block_is_out_of_bounds) {
  EXPECT_EQ(code({7, 42, 8192, 8193}), "out_of_bounds");
}

TEST_F(descriptor_validation, stale_generation_is_rejected) {
  EXPECT_EQ(code({7, 41, 8192, 10}), "stale_generation");
  entries[2].store(0);  // the block was freed
  EXPECT_EQ(code({7, 42, 8192, 10}), "stale_generation");
}

TEST_F(descriptor_validation, offset_inside_a_block_is_misaligned) {
  EXPECT_EQ(code({7, 42, 8200, 10}), "misaligned");
}

TEST_F(descriptor_validation, zero_size_or_generation_is_empty) {
  EXPECT_EQ(code({7, 42, 8192, 0}), "empty_descriptor");
  EXPECT_EQ(code({7, 0, 8192, 10}), "empty_descriptor");
}

}  // namespace
}  // namespace orch::ipc
