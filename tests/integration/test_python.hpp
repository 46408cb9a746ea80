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

// Why the Python tests cannot run on this machine ("" when they can): the interpreter under
// the tested one lacks `modules`. Under the asan preset that is Debian's python3, not the
// sanitized interpreter over it: the sanitized one failing where Debian's does not is a report
// of the sanitizers, which must fail the test, never skip it.
inline std::string python_skip_reason(const std::string& modules = "numpy, torch") {
  const char* chosen = std::getenv("ORCH_TEST_PYTHON");
  const std::string base =
      chosen != nullptr && *chosen != '\0' ? std::string(chosen) : "/usr/bin/python3";
  if (std::system((base + " -c 'import " + modules + "' >/dev/null 2>&1").c_str()) == 0) return {};
  return base + " cannot import " + modules +
         "; ./scripts/install-deps installs them (python3-numpy, python3-torch, pip, venv)";
}

}  // namespace orch::integration_testing
