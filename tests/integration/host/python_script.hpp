// Running one of this folder's Python scripts (host_from_python.py, comfyui_from_python.py) in
// the interpreter the tests use, over the library under test, and reading its verdict.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "../test_python.hpp"

namespace orch::host_testing {

using integration_testing::python_skip_reason;
using integration_testing::test_python;

struct script_result {
  int rc = -1;
  std::string output;  // stdout and stderr together
};

// Runs `script arg` in `cwd` with `environment` ("NAME='value' ..." prepended) and the library,
// worker and comfy_orch package under test.
inline script_result run_script(const std::filesystem::path& cwd, const std::string& environment,
                                const std::string& script, const std::string& arg) {
  const std::string command = "cd '" + cwd.string() + "' && " + environment +
                              " ORCH_HOST_LIBRARY='" + ORCH_TEST_HOST_LIBRARY +
                              "' ORCH_WORKER_EXECUTABLE='" + ORCH_TEST_WORKER +
                              "' ORCH_LOG_LEVEL=warn PYTHONDONTWRITEBYTECODE=1 " + test_python() +
                              " '" + script + "' '" + arg + "' > python.log 2>&1";
  script_result r;
  r.rc = std::system(command.c_str());
  std::ifstream log(cwd / "python.log");
  r.output.assign(std::istreambuf_iterator<char>(log), {});
  return r;
}

}  // namespace orch::host_testing
