// errno_error: the error for a failed system call, read from errno at the call, with the
// strerror text after what was being done ("shm_open(/x): Permission denied").
#pragma once

#include <cerrno>
#include <cstring>
#include <string>

#include "orch/support/result.hpp"

namespace orch {

inline error errno_error(const char* code, const std::string& what) {
  return error{code, what + ": " + std::strerror(errno)};
}

}  // namespace orch
