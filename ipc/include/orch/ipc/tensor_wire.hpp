// tensor_wire: a tensor as a call carries it (docs/protocol.md, "Values in call"):
// {"dtype": uint, "shape": [int…], "descriptor": descriptor}, the value under a "tensor" key. The
// decoder reads a body we do not trust: every field must be present with the right kind, no
// field may throw, and the layout must fit the descriptor's size (check_tensor_extent), so that
// nobody can hold a decoded tensor whose view leaves its buffer. Whether the descriptor itself is
// live and within its block is the receiver's check: the host's lease table, a worker's segment
// table.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/ipc/descriptor.hpp"
#include "orch/ipc/tensor_extent.hpp"
#include "orch/support/result.hpp"

namespace orch::ipc {

struct wire_tensor {
  std::uint32_t dtype = 0;
  std::uint32_t ndim = 0;
  std::array<std::int64_t, max_tensor_dims> shape{};
  buffer_descriptor descriptor;

  std::span<const std::int64_t> dims() const noexcept { return {shape.data(), ndim}; }
};

// True when `value` is a tensor value ({"tensor": …}), well formed or not.
bool is_tensor_value(const nlohmann::json& value) noexcept;

// A dict value ({"dict": {key: value…}}, docs/protocol.md): its map of items, or null when
// `value` is no dict value. A list value is a JSON array of values. Tensors inside either are
// checked and leased like any other.
const nlohmann::json* dict_items(const nlohmann::json& value) noexcept;
// The keys of dict value `value` in its producer's order: its "order" when that lists each key
// of its items exactly once (a JSON object here is a sorted map, which loses the order a Python
// dict has), else the items' own order. Empty for a value that is no dict.
std::vector<std::string> dict_keys(const nlohmann::json& value);

// Decodes the object under "tensor" and checks its extent against descriptor.size.
// Errors: body_errc::missing_field, body_errc::bad_field (a field of the wrong kind, a dim that
// is not an integer of int64), tensor_errc::*.
result<wire_tensor> tensor_from_json(const nlohmann::json& tensor);

// "float32 [1, 8, 16, 3] in descriptor {segment …}" for messages.
std::string describe(const wire_tensor& t);

}  // namespace orch::ipc
