#include "orch/ipc/tensor_extent.hpp"

#include <limits>

namespace orch::ipc {
namespace {

constexpr std::uint64_t int64_max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());

bool mul(std::uint64_t a, std::uint64_t b, std::uint64_t& out) noexcept {
  return !__builtin_mul_overflow(a, b, &out);
}
bool add(std::uint64_t a, std::uint64_t b, std::uint64_t& out) noexcept {
  return !__builtin_add_overflow(a, b, &out);
}

}  // namespace

std::uint64_t dtype_bytes(std::uint32_t dtype) noexcept {
  switch (dtype) {
    case tensor_dtype::f32:
      return 4;
    case tensor_dtype::u8:
      return 1;
    case tensor_dtype::i64:
      return 8;
    default:
      return 0;
  }
}

std::string dtype_name(std::uint32_t dtype) {
  switch (dtype) {
    case tensor_dtype::f32:
      return "float32";
    case tensor_dtype::u8:
      return "uint8";
    case tensor_dtype::i64:
      return "int64";
    default:
      return "dtype " + std::to_string(dtype);
  }
}

std::string describe_tensor(std::uint32_t dtype, std::span<const std::int64_t> shape,
                            std::span<const std::int64_t> strides) {
  auto list = [](std::span<const std::int64_t> v) {
    std::string s = "[";
    for (std::size_t k = 0; k < v.size(); ++k) s += (k ? ", " : "") + std::to_string(v[k]);
    return s + "]";
  };
  std::string s = dtype_name(dtype) + " " + list(shape);
  if (!strides.empty()) s += " strides " + list(strides);
  return s;
}

bool contiguous_strides(std::span<const std::int64_t> shape,
                        std::span<std::int64_t> strides) noexcept {
  if (shape.size() != strides.size()) return false;
  std::uint64_t step = 1;
  for (std::size_t k = shape.size(); k-- > 0;) {
    if (shape[k] < 0 || step > int64_max) return false;
    strides[k] = static_cast<std::int64_t>(step);
    // The stride of the next dim out; a dim of 0 counts as 1. Overflow here only matters if a
    // dim further out exists to use it, which the step > int64_max test above catches.
    const std::uint64_t dim = shape[k] == 0 ? 1 : static_cast<std::uint64_t>(shape[k]);
    if (!mul(step, dim, step)) step = std::numeric_limits<std::uint64_t>::max();
  }
  return true;
}

result<std::uint64_t> tensor_extent(std::uint32_t dtype, std::span<const std::int64_t> shape,
                                    std::span<const std::int64_t> strides) {
  const std::uint64_t elem = dtype_bytes(dtype);
  if (elem == 0) {
    return error{tensor_errc::unknown_dtype, dtype_name(dtype) + " is not a tensor dtype"};
  }
  if (shape.size() > max_tensor_dims) {
    return error{tensor_errc::bad_rank, "a tensor of rank " + std::to_string(shape.size()) +
                                            " (at most " + std::to_string(max_tensor_dims) + ")"};
  }
  if (!strides.empty() && strides.size() != shape.size()) {
    return error{tensor_errc::bad_strides, std::to_string(strides.size()) + " strides for " +
                                               std::to_string(shape.size()) + " dims"};
  }
  bool empty = false;
  for (std::size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] < 0) {
      return error{tensor_errc::bad_shape, describe_tensor(dtype, shape, strides) +
                                               " has a negative dim"};
    }
    if (!strides.empty() && strides[k] < 0) {
      return error{tensor_errc::bad_strides, describe_tensor(dtype, shape, strides) +
                                                 " has a negative stride"};
    }
    empty = empty || shape[k] == 0;
  }
  // Contiguous strides must exist even for an empty tensor: every receiver builds them.
  std::int64_t contiguous[max_tensor_dims] = {};
  std::span<const std::int64_t> used = strides;
  if (strides.empty()) {
    if (!contiguous_strides(shape, std::span<std::int64_t>(contiguous, shape.size()))) {
      return error{tensor_errc::too_large,
                   describe_tensor(dtype, shape) + " has strides past 64 bits"};
    }
    used = std::span<const std::int64_t>(contiguous, shape.size());
  }
  if (empty) return std::uint64_t{0};
  // The last element's offset, Σ (dim − 1) × stride, plus one, in elements; then in bytes.
  std::uint64_t last = 0;
  for (std::size_t k = 0; k < shape.size(); ++k) {
    std::uint64_t reach = 0;
    if (!mul(static_cast<std::uint64_t>(shape[k]) - 1, static_cast<std::uint64_t>(used[k]),
             reach) ||
        !add(last, reach, last)) {
      return error{tensor_errc::too_large,
                   describe_tensor(dtype, shape, strides) + " reaches past 64 bits of bytes"};
    }
  }
  std::uint64_t bytes = 0;
  if (!add(last, 1, last) || !mul(last, elem, bytes)) {
    return error{tensor_errc::too_large,
                 describe_tensor(dtype, shape, strides) + " reaches past 64 bits of bytes"};
  }
  return bytes;
}

status check_tensor_extent(std::uint32_t dtype, std::span<const std::int64_t> shape,
                           std::span<const std::int64_t> strides, std::uint64_t buffer_bytes) {
  auto extent = tensor_extent(dtype, shape, strides);
  if (!extent) return extent.err();
  if (*extent > buffer_bytes) {
    return error{tensor_errc::out_of_bounds,
                 describe_tensor(dtype, shape, strides) + " claims " + std::to_string(*extent) +
                     " bytes, but its buffer holds " + std::to_string(buffer_bytes) + " bytes"};
  }
  return ok_status();
}

}  // namespace orch::ipc
