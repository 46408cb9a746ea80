#include "orch/runtime/host_stack_probe.hpp"

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "orch/process/python_environment.hpp"
#include "orch/process/tool_process.hpp"
#include "orch/runtime/errc.hpp"
#include "orch/support/untrusted_text.hpp"

namespace orch::runtime {
namespace {

namespace fs = std::filesystem;

// Prints {"python": "3.11", "torch": "2.10.1+cu128" | null, "accelerator": "cu128" | ...,
// "version": sys.version}.
constexpr const char* probe_script = R"PY(
import importlib.util, json, os, re, sys
out = {"python": "%d.%d" % sys.version_info[:2], "torch": None, "accelerator": None,
       "version": sys.version}
spec = importlib.util.find_spec("torch")
if spec is not None and spec.origin:
    try:
        with open(os.path.join(os.path.dirname(spec.origin), "version.py")) as f:
            text = f.read()
    except OSError:
        text = ""
    def field(name):
        m = re.search(r"^%s\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]" % name, text, re.M)
        return m.group(1) if m else None
    out["torch"] = field("__version__")
    cuda, hip = field("cuda"), field("hip")
    if cuda:
        out["accelerator"] = "cu" + "".join(cuda.split(".")[:2])
    elif hip:
        out["accelerator"] = "rocm" + ".".join(hip.split(".")[:2])
    else:
        out["accelerator"] = "cpu"
sys.stdout.write(json.dumps(out) + "\n")
)PY";

}  // namespace

fs::path host_python(const manifests::deployment& d) {
  if (d.env.host_python) return *d.env.host_python;
  if (const char* chosen = std::getenv("ORCH_HOST_PYTHON"); chosen != nullptr && *chosen != 0)
    return chosen;
  std::error_code ec;
  if (fs::exists("/usr/bin/python3", ec)) return "/usr/bin/python3";
  return "python3";
}

result<manifests::host_stack> probe_host_stack(const fs::path& python) {
  process::tool_command command;
  command.argv = {python.string(), "-s", "-c", probe_script};
  process::scrub_python_environment(command.env);
  command.timeout = std::chrono::seconds(20);
  const std::string fix =
      "; name the host's interpreter with [env] python in the deployment "
      "(or ORCH_HOST_PYTHON)";
  auto ran = process::run_tool(command);
  if (!ran) {
    return error{runtime_errc::probe_failed,
                 "cannot read the host's Python stack: " + ran.err().message + fix};
  }
  if (!ran->succeeded()) {
    return error{runtime_errc::probe_failed,
                 "cannot read the host's Python stack: " + python.string() + " " + ran->describe() +
                     ": " + printable(ran->output.substr(0, 400)) + fix};
  }
  // The answer is the last line; anything the interpreter warned about comes before it.
  std::string answer = ran->output;
  while (!answer.empty() && answer.back() == '\n') answer.pop_back();
  answer = answer.substr(answer.rfind('\n') == std::string::npos ? 0 : answer.rfind('\n') + 1);
  const auto doc = nlohmann::json::parse(answer, nullptr, false);
  manifests::host_stack stack;
  if (doc.is_object() && doc.contains("python") && doc["python"].is_string()) {
    stack.python = doc["python"].get<std::string>();
    if (doc.contains("torch") && doc["torch"].is_string()) {
      stack.torch = doc["torch"].get<std::string>();
    }
    if (doc.contains("accelerator") && doc["accelerator"].is_string()) {
      stack.accelerator = doc["accelerator"].get<std::string>();
    }
    if (doc.contains("version") && doc["version"].is_string())
      stack.version = printable(doc["version"].get<std::string>().substr(0, 200));
    return stack;
  }
  return error{runtime_errc::probe_failed, python.string() + " answered the stack probe with '" +
                                               printable(ran->output.substr(0, 200)) + "'" + fix};
}

}  // namespace orch::runtime
