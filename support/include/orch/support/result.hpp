// Result<T>: a value or an error, for failures a caller is expected to handle (docs/errors.md).
// Exceptions are kept for programmer errors; nothing here throws on the error path.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace orch {

// The error half of a Result: a stable machine-readable code plus a message that names the
// cause and the fix.
struct error {
  std::string code;     // e.g. "not_found", "abi_mismatch", "peer_lost"
  std::string message;  // human text, complete on its own
};

template <typename T>
class [[nodiscard]] result {
 public:
  result(T value) : state_(std::move(value)) {}  // NOLINT: implicit by design
  result(error err) : state_(std::move(err)) {}  // NOLINT: implicit by design

  bool ok() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(state_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(state_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(state_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const error& err() const {
    assert(!ok());
    return std::get<1>(state_);
  }

 private:
  std::variant<T, error> state_;
};

// A Result without a value.
struct ok_t {};
using status = result<ok_t>;
inline status ok_status() {
  return ok_t{};
}

}  // namespace orch
