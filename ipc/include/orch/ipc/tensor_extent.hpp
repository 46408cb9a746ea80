// tensor_extent: how far a tensor's view reaches into the buffer it names, from its dtype, shape
// and strides alone, and whether that fits the buffer. A tensor crosses processes as a
// descriptor plus a claimed layout; the claim comes from a node we do not trust. A consumer that
// built its view from a lying shape would read past the block (other blocks' data, or off the
// mapping: SIGSEGV in an innocent worker). The host checks every tensor it hands over with this
// function, and the worker checks again before it builds a view, so both sides apply one rule.
//
// Pure arithmetic, overflow safe: huge dims, huge strides and their products are refused as
// too_large, never wrapped into a small number.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "orch/ipc/errc.hpp"
#include "orch/support/result.hpp"

namespace orch::ipc {

// The wire's dtype codes. The node ABI's ORCH_DTYPE_* (worker/include/orch/worker/nodes.h) are
// these values; the worker asserts it at compile time (ipc may not include worker headers).
namespace tensor_dtype {
inline constexpr std::uint32_t f32 = 1;
inline constexpr std::uint32_t u8 = 2;
inline constexpr std::uint32_t i64 = 3;
}  // namespace tensor_dtype

// The rank limit (ORCH_TENSOR_MAX_DIMS).
inline constexpr std::uint32_t max_tensor_dims = 8;

// Bytes per element; 0 for a code that is not a dtype.
std::uint64_t dtype_bytes(std::uint32_t dtype) noexcept;
// "float32", "uint8", "int64", or "dtype <n>".
std::string dtype_name(std::uint32_t dtype);

// Contiguous row-major strides (in elements) for `shape`, written to `strides` (same size).
// A dim of 0 counts as 1 in the strides of the dims before it (torch's rule), so an empty
// tensor's strides stay small. Returns false (strides unspecified) for a negative dim, a size
// mismatch, or a stride that does not fit int64.
bool contiguous_strides(std::span<const std::int64_t> shape,
                        std::span<std::int64_t> strides) noexcept;

// The bytes a view of (dtype, shape, strides) reaches from its first byte: (the largest element
// offset + 1) × the element size, and 0 when a dim is 0. Rank 0 is a scalar (one element).
// `strides` are in elements; empty means contiguous, and then the contiguous strides must fit
// int64 (also for an empty tensor: receivers build them). The view starts at the buffer's first byte
// (there is no storage offset), so a negative stride is refused: it would reach below it.
// Errors: tensor_errc::unknown_dtype, bad_rank, bad_shape, bad_strides, too_large.
result<std::uint64_t> tensor_extent(std::uint32_t dtype, std::span<const std::int64_t> shape,
                                    std::span<const std::int64_t> strides = {});

// tensor_extent(), then that it fits `buffer_bytes`. The message names the layout, the bytes it
// claims and the buffer's size. Errors: tensor_extent's, tensor_errc::out_of_bounds.
status check_tensor_extent(std::uint32_t dtype, std::span<const std::int64_t> shape,
                           std::span<const std::int64_t> strides, std::uint64_t buffer_bytes);

// "float32 [1, 8, 16, 3]" (strides appended when given), for messages.
std::string describe_tensor(std::uint32_t dtype, std::span<const std::int64_t> shape,
                            std::span<const std::int64_t> strides = {});

}  // namespace orch::ipc
