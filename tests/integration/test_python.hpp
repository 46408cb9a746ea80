// The interpreter the integration tests run Python in (docs/python.md, docs/sanitizers.md).
#pragma once

#include <cstdlib>
#include <string>

namespace orch::integration_testing {

// ORCH_TEST_PYTHON, else Debian's (with numpy and torch); under the asan preset, Debian's CPython
// behind a sanitized main() (tests/sanitizers/sanitized_python.c).
inline std::string test_python() {
  const char* chosen = std::getenv("ORCH_TEST_PYTHON");
  if (chosen != nullptr && *chosen != '\0') return chosen;
#ifdef ORCH_TEST_SANITIZED_PYTHON
  return ORCH_TEST_SANITIZED_PYTHON;
#else
  return "/usr/bin/python3";
#endif
}

}  // namespace orch::integration_testing
