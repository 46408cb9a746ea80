// tensor_extent and tensor_wire: the one rule both the host and a worker apply before a tensor's
// view is built over a pool buffer. Every claimed layout either fits its buffer or is
// refused with a typed error; nothing wraps, nothing throws.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "orch/ipc/lease_table.hpp"
#include "orch/ipc/message.hpp"
#include "orch/ipc/pin_registrar.hpp"
#include "orch/ipc/tensor_extent.hpp"
#include "orch/ipc/tensor_wire.hpp"

namespace orch::ipc {
namespace {

using dims = std::vector<std::int64_t>;
constexpr std::int64_t i64_max = std::numeric_limits<std::int64_t>::max();
constexpr std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();

std::string code_of(std::uint32_t dtype, const dims& shape, const dims& strides = {}) {
  auto r = tensor_extent(dtype, shape, strides);
  return r.ok() ? "ok" : r.err().code;
}
std::uint64_t extent(std::uint32_t dtype, const dims& shape, const dims& strides = {}) {
  auto r = tensor_extent(dtype, shape, strides);
  EXPECT_TRUE(r.ok()) << r.err().message;
  return r.ok() ? *r : 0;
}

// The reference: enumerate every element and take the largest byte it ends at.
std::uint64_t brute_extent(std::uint64_t elem, const dims& shape, const dims& strides) {
  for (auto d : shape)
    if (d == 0) return 0;
  std::uint64_t last = 0;
  std::vector<std::int64_t> index(shape.size(), 0);
  while (true) {
    std::uint64_t offset = 0;
    for (std::size_t k = 0; k < shape.size(); ++k) offset += index[k] * strides[k];
    last = std::max(last, offset);
    std::size_t k = shape.size();
    while (k > 0 && ++index[k - 1] == shape[k - 1]) index[--k] = 0;
    if (k == 0) break;
  }
  return (last + 1) * elem;
}

TEST(tensor_extent, each_dtype_has_its_element_size_and_other_codes_are_refused) {
  EXPECT_EQ(extent(tensor_dtype::f32, {2, 3}), 24u);
  EXPECT_EQ(extent(tensor_dtype::u8, {2, 3}), 6u);
  EXPECT_EQ(extent(tensor_dtype::i64, {2, 3}), 48u);
  for (std::uint32_t bad : {0u, 4u, 99u, std::numeric_limits<std::uint32_t>::max()}) {
    EXPECT_EQ(code_of(bad, {1}), tensor_errc::unknown_dtype) << bad;
    EXPECT_EQ(dtype_bytes(bad), 0u);
  }
}

TEST(tensor_extent, ranks_zero_to_eight_are_accepted_and_nine_is_refused) {
  EXPECT_EQ(extent(tensor_dtype::f32, {}), 4u);  // a scalar: one element
  dims shape;
  for (std::uint32_t rank = 1; rank <= max_tensor_dims; ++rank) {
    shape.push_back(2);
    EXPECT_EQ(extent(tensor_dtype::u8, shape), std::uint64_t{1} << rank) << rank;
  }
  shape.push_back(2);
  EXPECT_EQ(code_of(tensor_dtype::u8, shape), tensor_errc::bad_rank);
  EXPECT_EQ(code_of(tensor_dtype::u8, dims(1000, 1)), tensor_errc::bad_rank);
}

TEST(tensor_extent, a_zero_dim_is_an_empty_tensor_that_reaches_nothing) {
  EXPECT_EQ(extent(tensor_dtype::f32, {0}), 0u);
  EXPECT_EQ(extent(tensor_dtype::f32, {4194304, 0, 16, 3}), 0u);
  // Even beside a dim whose extent alone would overflow.
  EXPECT_EQ(extent(tensor_dtype::i64, {i64_max, 0}), 0u);
  EXPECT_EQ(extent(tensor_dtype::i64, {0, i64_max}, {i64_max, i64_max}), 0u);
  // But its contiguous strides must still exist: 2^32 × 2^32 does not fit int64.
  EXPECT_EQ(code_of(tensor_dtype::u8, {0, std::int64_t{1} << 32, std::int64_t{1} << 32}),
            tensor_errc::too_large);
  EXPECT_TRUE(check_tensor_extent(tensor_dtype::f32, dims{3, 0}, {}, 0).ok());
}

TEST(tensor_extent, a_negative_dim_is_refused) {
  EXPECT_EQ(code_of(tensor_dtype::f32, {-1}), tensor_errc::bad_shape);
  EXPECT_EQ(code_of(tensor_dtype::f32, {2, -3, 4}), tensor_errc::bad_shape);
  EXPECT_EQ(code_of(tensor_dtype::f32, {std::numeric_limits<std::int64_t>::min()}),
            tensor_errc::bad_shape);
  // Also when another dim is 0: a negative dim is never a valid claim.
  EXPECT_EQ(code_of(tensor_dtype::f32, {0, -1}), tensor_errc::bad_shape);
}

TEST(tensor_extent, element_counts_and_byte_sizes_that_overflow_64_bits_are_too_large) {
  EXPECT_EQ(extent(tensor_dtype::u8, {i64_max}), static_cast<std::uint64_t>(i64_max));
  EXPECT_EQ(code_of(tensor_dtype::f32, {i64_max}), tensor_errc::too_large);  // × 4 wraps
  EXPECT_EQ(code_of(tensor_dtype::u8, {std::int64_t{1} << 32, std::int64_t{1} << 32}),
            tensor_errc::too_large);  // 2^64 elements
  EXPECT_EQ(code_of(tensor_dtype::u8, {i64_max, i64_max, i64_max}), tensor_errc::too_large);
  EXPECT_EQ(code_of(tensor_dtype::i64, {std::int64_t{1} << 61}), tensor_errc::too_large);
  EXPECT_EQ(extent(tensor_dtype::i64, {(std::int64_t{1} << 61) - 1}), u64_max - 7);
  // Products whose low 64 bits look small: 2^32 × 2^32 × 4 would wrap to 0.
  EXPECT_EQ(code_of(tensor_dtype::f32, {1, std::int64_t{1} << 32, std::int64_t{1} << 32}),
            tensor_errc::too_large);
}

TEST(tensor_extent, explicit_strides_are_checked_one_per_dim_and_never_negative) {
  EXPECT_EQ(code_of(tensor_dtype::f32, {2, 3}, {3}), tensor_errc::bad_strides);
  EXPECT_EQ(code_of(tensor_dtype::f32, {2, 3}, {3, 1, 1}), tensor_errc::bad_strides);
  EXPECT_EQ(code_of(tensor_dtype::f32, {2, 3}, {-3, 1}), tensor_errc::bad_strides);
  EXPECT_EQ(code_of(tensor_dtype::f32, {2, 3}, {3, std::numeric_limits<std::int64_t>::min()}),
            tensor_errc::bad_strides);
  // A transposed view reaches as far as the contiguous one; a broadcast (stride 0) reaches less.
  EXPECT_EQ(extent(tensor_dtype::f32, {3, 2}, {1, 3}), 24u);
  EXPECT_EQ(extent(tensor_dtype::f32, {1000, 3}, {0, 1}), 12u);
  // A padded row pitch reaches past the element count.
  EXPECT_EQ(extent(tensor_dtype::u8, {2, 3}, {10, 1}), 13u);
  // Huge strides overflow as too_large, not as a small wrapped extent.
  EXPECT_EQ(extent(tensor_dtype::u8, {3}, {i64_max}), u64_max);  // 2 × (2^63 − 1) + 1
  EXPECT_EQ(code_of(tensor_dtype::u8, {4}, {i64_max}), tensor_errc::too_large);
  // Two of them sum to 2^64 − 2: the last byte of a uint8 view is exactly addressable, a
  // float32's is not.
  EXPECT_EQ(extent(tensor_dtype::u8, {2, 2}, {i64_max, i64_max}), u64_max);
  EXPECT_EQ(code_of(tensor_dtype::f32, {2, 2}, {i64_max, i64_max}), tensor_errc::too_large);
  EXPECT_EQ(code_of(tensor_dtype::u8, {3, 2}, {i64_max, i64_max}), tensor_errc::too_large);
}

TEST(tensor_extent, matches_enumerating_every_element_for_all_small_layouts) {
  // Every shape of rank 1..3 with dims 0..3 and every stride 0..4, against the enumeration.
  std::size_t checked = 0;
  for (std::size_t rank = 1; rank <= 3; ++rank) {
    const std::size_t shapes = 1u << (2 * rank);  // 4 values per dim
    std::size_t strides_count = 1;
    for (std::size_t k = 0; k < rank; ++k) strides_count *= 5;
    for (std::size_t s = 0; s < shapes; ++s) {
      dims shape(rank);
      for (std::size_t k = 0; k < rank; ++k) shape[k] = static_cast<std::int64_t>((s >> (2 * k)) & 3);
      dims contiguous(rank);
      ASSERT_TRUE(contiguous_strides(shape, contiguous));
      EXPECT_EQ(extent(tensor_dtype::f32, shape), brute_extent(4, shape, contiguous));
      for (std::size_t t = 0; t < strides_count; ++t) {
        dims strides(rank);
        for (std::size_t k = 0, v = t; k < rank; ++k, v /= 5) strides[k] = static_cast<std::int64_t>(v % 5);
        for (std::uint32_t dtype : {tensor_dtype::u8, tensor_dtype::f32, tensor_dtype::i64}) {
          const std::uint64_t expected = brute_extent(dtype_bytes(dtype), shape, strides);
          ASSERT_EQ(extent(dtype, shape, strides), expected);
          // The check is exact: the extent fits, one byte less does not (unless empty).
          EXPECT_TRUE(check_tensor_extent(dtype, shape, strides, expected).ok());
          if (expected > 0) {
            EXPECT_EQ(check_tensor_extent(dtype, shape, strides, expected - 1).err().code,
                      tensor_errc::out_of_bounds);
          }
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 10000u);
}

TEST(tensor_extent, contiguous_strides_are_row_major_and_a_zero_dim_counts_as_one) {
  dims strides(4);
  ASSERT_TRUE(contiguous_strides(dims{2, 3, 4, 5}, strides));
  EXPECT_EQ(strides, (dims{60, 20, 5, 1}));
  ASSERT_TRUE(contiguous_strides(dims{2, 0, 3, 4}, strides));  // torch.empty(2, 0, 3, 4).stride()
  EXPECT_EQ(strides, (dims{12, 12, 4, 1}));
  EXPECT_FALSE(contiguous_strides(dims{2, -1, 3, 4}, strides));
  EXPECT_FALSE(contiguous_strides(dims{2, 3}, strides));  // size mismatch
  // The outer stride would not fit int64.
  EXPECT_FALSE(contiguous_strides(dims{2, std::int64_t{1} << 32, std::int64_t{1} << 32, 1}, strides));
  dims none;
  EXPECT_TRUE(contiguous_strides(dims{}, none));
}

TEST(tensor_extent, the_issues_lies_are_refused_with_the_claim_and_the_buffer_size) {
  // A 1.5 KB block: float32 [1, 8, 16, 3].
  EXPECT_TRUE(check_tensor_extent(tensor_dtype::f32, dims{1, 8, 16, 3}, {}, 1536).ok());
  auto crash = check_tensor_extent(tensor_dtype::f32, dims{1, 4194304, 16, 3}, {}, 1536);
  ASSERT_FALSE(crash.ok());
  EXPECT_EQ(crash.err().code, tensor_errc::out_of_bounds);
  EXPECT_EQ(crash.err().message,
            "float32 [1, 4194304, 16, 3] claims 805306368 bytes, but its buffer holds 1536 bytes");
  auto leak = check_tensor_extent(tensor_dtype::f32, dims{1, 1048576, 16, 3}, {}, 1536);
  ASSERT_FALSE(leak.ok());
  EXPECT_NE(leak.err().message.find("201326592 bytes"), std::string::npos);
}

// --- the wire form -------------------------------------------------------------------------

json wire(json dtype, json shape, std::uint64_t size = 1536) {
  return {{"dtype", std::move(dtype)},
          {"shape", std::move(shape)},
          {"descriptor", descriptor_to_json({1, 7, 4096, size})}};
}
std::string wire_code(const json& t) {
  auto r = tensor_from_json(t);
  return r.ok() ? "ok" : r.err().code;
}

TEST(tensor_wire, a_tensor_that_fits_its_descriptor_decodes) {
  auto r = tensor_from_json(wire(1, {1, 8, 16, 3}));
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ(r->dtype, tensor_dtype::f32);
  EXPECT_EQ(r->ndim, 4u);
  EXPECT_EQ(dims(r->dims().begin(), r->dims().end()), (dims{1, 8, 16, 3}));
  EXPECT_EQ(r->descriptor, (buffer_descriptor{1, 7, 4096, 1536}));
  // Through CBOR, as the channel carries it.
  auto back = json::from_cbor(encode_body(wire(1, {1, 8, 16, 3})));
  EXPECT_EQ(wire_code(back), "ok");
}

TEST(tensor_wire, a_shape_past_the_descriptors_size_is_refused) {
  EXPECT_EQ(wire_code(wire(1, {1, 4194304, 16, 3})), tensor_errc::out_of_bounds);
  EXPECT_EQ(wire_code(wire(1, {1, 8, 16, 3}, 1535)), tensor_errc::out_of_bounds);
  EXPECT_EQ(wire_code(wire(1, json::array({1, 9, 16, 3}))), tensor_errc::out_of_bounds);
}

TEST(tensor_wire, fields_of_the_wrong_kind_are_refused_without_throwing) {
  EXPECT_EQ(wire_code(json::array()), body_errc::bad_field);
  EXPECT_EQ(wire_code(json("tensor")), body_errc::bad_field);
  EXPECT_EQ(wire_code(wire("f32", {1})), body_errc::bad_field);
  EXPECT_EQ(wire_code(wire(-1, {1})), body_errc::bad_field);
  EXPECT_EQ(wire_code(wire(1.0, {1})), body_errc::bad_field);
  EXPECT_EQ(wire_code(wire(std::uint64_t{1} << 32 | 1, {1})), body_errc::bad_field);
  EXPECT_EQ(wire_code(wire(1, 5)), body_errc::bad_field);
  EXPECT_EQ(wire_code(wire(1, {1, "8"})), body_errc::bad_field);
  EXPECT_EQ(wire_code(wire(1, {1, 8.5})), body_errc::bad_field);
  EXPECT_EQ(wire_code(wire(1, {1, nullptr})), body_errc::bad_field);
  // [[1]], built so: a one-element braced list of an array reads as [1] under clang.
  json nested = json::array();
  nested.push_back(json::array({1}));
  EXPECT_EQ(wire_code(wire(1, nested)), body_errc::bad_field);
  json no_descriptor = wire(1, {1});
  no_descriptor.erase("descriptor");
  EXPECT_EQ(wire_code(no_descriptor), body_errc::missing_field);
  json bad_descriptor = wire(1, {1});
  bad_descriptor["descriptor"]["size"] = -4;
  EXPECT_EQ(wire_code(bad_descriptor), body_errc::bad_field);
  for (const char* field : {"dtype", "shape"}) {
    json t = wire(1, {1});
    t.erase(field);
    EXPECT_EQ(wire_code(t), body_errc::missing_field) << field;
  }
}

TEST(tensor_wire, dims_past_int64_negative_dims_unknown_dtypes_and_ranks_are_refused) {
  EXPECT_EQ(wire_code(wire(1, {u64_max})), tensor_errc::too_large);
  EXPECT_EQ(wire_code(wire(1, {std::uint64_t{1} << 63})), tensor_errc::too_large);
  EXPECT_EQ(wire_code(wire(1, {1, -8, 16, 3})), tensor_errc::bad_shape);
  EXPECT_EQ(wire_code(wire(2, {i64_max, i64_max})), tensor_errc::too_large);
  EXPECT_EQ(wire_code(wire(77, {1})), tensor_errc::unknown_dtype);
  EXPECT_EQ(wire_code(wire(2, json(std::vector<int>(9, 1)))), tensor_errc::bad_rank);
  EXPECT_EQ(wire_code(wire(2, json(std::vector<int>(100000, 1)))), tensor_errc::bad_rank);
  EXPECT_EQ(wire_code(wire(2, json::array())), "ok");  // a scalar byte in a 1536-byte block
}

TEST(tensor_wire, the_description_names_layout_and_descriptor) {
  auto r = tensor_from_json(wire(1, {1, 8, 16, 3}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(describe(*r),
            "float32 [1, 8, 16, 3] in descriptor {segment 1, offset 4096, size 1536, generation 7}");
}

// --- the leased size the host checks against ------------------------------------------------

TEST(tensor_extent, leased_size_is_the_allocated_size_for_a_holder_and_zero_otherwise) {
  noop_pin_registrar registrar;
  pinned_pool pool(pool_options{1 << 20, 4096, 1}, registrar);
  lease_table leases(pool);
  auto d = leases.allocate(1, 1536);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(leases.leased_size(*d, 1), 1536u);
  EXPECT_EQ(leases.leased_size(*d, 2), 0u);  // holds no lease
  // A descriptor that claims more of the same block still reads as the allocated size.
  buffer_descriptor bigger = *d;
  bigger.size = 4096;
  EXPECT_EQ(leases.leased_size(bigger, 1), 1536u);
  buffer_descriptor stale = *d;
  stale.generation += 1;
  EXPECT_EQ(leases.leased_size(stale, 1), 0u);
  ASSERT_TRUE(leases.acquire(*d, 2).ok());
  EXPECT_EQ(leases.leased_size(*d, 2), 1536u);
  ASSERT_TRUE(leases.release(*d, 2).ok());
  ASSERT_TRUE(leases.free(*d, 1).ok());
  EXPECT_EQ(leases.leased_size(*d, 1), 0u);  // gone
}

}  // namespace
}  // namespace orch::ipc
