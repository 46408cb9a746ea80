#include "orch/envs/env_doctor.hpp"

#include <sys/statvfs.h>

#include <cctype>

#include "orch/ipc/cgroup_probe.hpp"
#include "orch/ipc/pinned_budget.hpp"
#include "orch/manifests/units.hpp"
#include "orch/process/python_environment.hpp"
#include "orch/process/tool_process.hpp"
#include "orch/runtime/host_memory.hpp"
#include "orch/runtime/plugin_probe.hpp"
#include "orch/runtime/preflight.hpp"
#include "orch/support/untrusted_text.hpp"

namespace orch::envs {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

doctor_check ok(std::string scope, std::string check, std::string message) {
  return {std::move(scope), std::move(check), "ok", std::move(message), {}};
}
doctor_check problem(std::string status, std::string scope, std::string check, std::string message,
                     std::string fix) {
  return {std::move(scope), std::move(check), std::move(status), std::move(message),
          std::move(fix)};
}

// Runs Python code in an env's interpreter as its worker would run (no PYTHONPATH, no user
// site-packages); the output is the env's and is made printable before it is shown.
result<process::tool_exit> run_python(const fs::path& interpreter, std::vector<std::string> args,
                                      std::chrono::milliseconds timeout,
                                      std::map<std::string, std::optional<std::string>> env = {}) {
  process::tool_command command;
  command.argv = {interpreter.string(), "-s"};
  command.argv.insert(command.argv.end(), args.begin(), args.end());
  command.env = std::move(env);
  process::scrub_python_environment(command.env);
  command.timeout = timeout;
  return process::run_tool(command);
}

std::string last_line(const std::string& output) {
  std::string text = output;
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  const auto nl = text.rfind('\n');
  return printable(nl == std::string::npos ? text : text.substr(nl + 1));
}

std::string what_failed(const result<process::tool_exit>& ran) {
  if (!ran) return ran.err().message;
  std::string line = last_line(ran->output);
  return ran->describe() + (line.empty() ? std::string() : ": " + line);
}

// "pillow>=9" -> "pillow": the distribution a requirement line names.
std::string distribution_of(const std::string& requirement) {
  std::size_t end = 0;
  while (end < requirement.size() &&
         (std::isalnum(static_cast<unsigned char>(requirement[end])) != 0 ||
          requirement[end] == '-' || requirement[end] == '_' || requirement[end] == '.')) {
    ++end;
  }
  return requirement.substr(0, end);
}

// Maps distributions to the module each provides (its top_level.txt, else its files' top
// directories, else its normalised name), or null when it is not installed in the env.
constexpr const char* import_names_script = R"PY(
import importlib.metadata as md, json, re, sys
out = {}
for name in json.loads(sys.argv[1]):
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        out[name] = None
        continue
    tops = (dist.read_text("top_level.txt") or "").split()
    if not tops:
        seen = set()
        for f in dist.files or []:
            head = str(f).split("/")[0]
            if head.endswith((".dist-info", ".data", ".pth")) or head.startswith(("..", "__")):
                continue
            head = head[:-3] if head.endswith(".py") else head
            if head.isidentifier():
                seen.add(head)
        tops = sorted(seen)
    tops = [t.replace("/", ".") for t in tops]
    tops = [t for t in tops if all(part.isidentifier() for part in t.split("."))]
    public = [t for t in tops if not t.startswith("_")]
    out[name] = (public or tops or [re.sub(r"[-.]+", "_", name).lower()])[0]
sys.stdout.write(json.dumps(out) + "\n")
)PY";

void check_imports(const manifests::env_entry& env, const fs::path& interpreter,
                   const env_context& context, const doctor_options& options,
                   std::vector<doctor_check>& out) {
  const std::string scope = env.dir.env_name;
  const auto derivation =
      manifests::derive_env(env.dir.env_name, env.manifest, *context.stack,
                            manifests::this_platform(), env.dir.config.parent_path());
  json names = json::array();
  for (const auto& r : derivation.requirements) names.push_back(distribution_of(r));
  if (names.empty()) {
    out.push_back(ok(scope, "import", "the manifest declares no PyPI package"));
    return;
  }
  const std::string reinstall =
      "comfy-orch install --force " + options.deployment + " " + env.dir.env_name;
  auto mapped =
      run_python(interpreter, {"-c", import_names_script, names.dump()}, options.import_timeout);
  const json modules =
      mapped && mapped->succeeded() ? json::parse(mapped->output, nullptr, false) : json();
  if (!modules.is_object()) {
    out.push_back(problem("error", scope, "import",
                          "cannot read the env's installed packages: " + what_failed(mapped),
                          reinstall));
    return;
  }
  for (const auto& name : names) {
    const std::string dist = name.get<std::string>();
    const auto it = modules.find(dist);
    if (it == modules.end() || !it->is_string()) {
      out.push_back(problem("error", scope, "import",
                            "package " + dist + " is not installed in " + env.status.path.string(),
                            reinstall));
      continue;
    }
    const std::string module = it->get<std::string>();
    // The name comes from the env's metadata: passed as data, never as code.
    auto ran = run_python(
        interpreter, {"-c", "import importlib, sys; importlib.import_module(sys.argv[1])", module},
        options.import_timeout);
    if (ran && ran->succeeded()) {
      out.push_back(ok(scope, "import", "import " + module + " (package " + dist + ")"));
    } else {
      out.push_back(problem(
          "error", scope, "import",
          "import " + module + " (package " + dist + ") fails: " + what_failed(ran), reinstall));
    }
  }
}

}  // namespace

json doctor_check_json(const doctor_check& c) {
  return {{"scope", c.scope},
          {"check", c.check},
          {"status", c.status},
          {"message", c.message},
          {"fix", c.fix.empty() ? json(nullptr) : json(c.fix)}};
}

std::vector<doctor_check> check_python_env(const env_context& context,
                                           const manifests::env_entry& env,
                                           const doctor_options& options) {
  std::vector<doctor_check> out;
  const std::string scope = env.dir.env_name;
  const auto& s = env.status;
  const std::string install = "comfy-orch install " + options.deployment + " " + scope;
  if (s.interpreter.empty()) {
    out.push_back(problem("error", scope, "interpreter",
                          std::string(manifests::to_string(s.state)) + ": " + s.detail, install));
    return out;
  }
  auto version =
      run_python(s.interpreter, {"-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"},
                 std::chrono::seconds(30));
  if (!version || !version->succeeded()) {
    out.push_back(problem(
        "error", scope, "interpreter",
        "the interpreter " + s.interpreter.string() + " does not run: " + what_failed(version),
        "comfy-orch install --force " + options.deployment + " " + scope));
    return out;
  }
  out.push_back(ok(scope, "interpreter",
                   s.interpreter.string() + " runs Python " + last_line(version->output)));

  if (s.state == manifests::env_state::stale || !s.runnable) {
    out.push_back(problem("error", scope, "stamp", s.detail, install));
  } else if (!s.stamp) {
    out.push_back(problem("warning", scope, "stamp", s.stamp_note + " at " + s.path.string(),
                          "comfy-orch install --force " + options.deployment + " " + scope +
                              " rebuilds and stamps it"));
  } else if (s.state == manifests::env_state::ambiguous) {
    out.push_back(problem("warning", scope, "stamp", s.detail,
                          "comfy-orch gc " + options.deployment + " --delete"));
  } else {
    out.push_back(ok(scope, "stamp", s.stamp_note));
  }

  if (context.stack) check_imports(env, s.interpreter, context, options, out);

  auto imported = run_python(
      s.interpreter,
      {"-c", "import sys; sys.path.insert(0, sys.argv[1]); import comfy_orch.worker",
       options.python_package_root.string()},
      options.import_timeout, {{"ORCH_WORKER_LIBRARY", options.worker_library.string()}});
  if (imported && imported->succeeded()) {
    out.push_back(
        ok(scope, "comfy_orch",
           "comfy_orch.worker imports (from " + options.python_package_root.string() + ")"));
  } else {
    out.push_back(problem("error", scope, "comfy_orch",
                          "comfy_orch.worker does not import in this env: " + what_failed(imported),
                          "the worker needs numpy in the env: rebuild it on a host interpreter "
                          "with numpy ([env] python), or add numpy to its [pypi-dependencies]"));
  }
  return out;
}

std::vector<doctor_check> check_machine(const env_context& context, const doctor_options& options) {
  std::vector<doctor_check> out;
  const auto& d = context.deployment;
  if (context.stack) {
    out.push_back(ok("machine", "host_stack",
                     "abi=" + manifests::abi_tag(*context.stack) + " read from " +
                         context.host_python.string()));
  } else {
    out.push_back(problem("error", "machine", "host_stack", context.stack_problem,
                          "set [env] python to the host's interpreter"));
  }

  manifests::deployment with_plugins = d;
  with_plugins.plugin_paths = runtime::deployment_plugin_directories(d);
  if (auto device = runtime::open_host_device(with_plugins); !device) {
    out.push_back(problem(
        "error", "machine", "device",
        "cannot open the host device " + d.host.device.to_string() + ": " + device.err().message,
        "check the device's driver, or choose another [host] device"));
  } else if (!device->device) {
    out.push_back(ok("machine", "device", "cpu: no device plugin is needed"));
  } else {
    auto& dev = *device->device;
    std::string message = d.host.device.to_string() + " through " + dev.library().path().string() +
                          " (backend " + dev.backend() + ")";
    if (auto v = dev.runtime_version()) {
      message += ", runtime " + std::to_string(v->first) + "." + std::to_string(v->second);
    }
    std::uint64_t free_bytes = 0;
    std::uint64_t total_bytes = 0;
    if (dev.api().mem_get_info(dev.device(), &free_bytes, &total_bytes) == ORCH_OK) {
      message += ", " + manifests::format_size(free_bytes) + " free of " +
                 manifests::format_size(total_bytes);
    }
    out.push_back(ok("machine", "device", message));
  }

  struct statvfs shm {};
  const std::uint64_t pool = d.shm.pinned_pool_size;
  if (::statvfs("/dev/shm", &shm) != 0) {
    out.push_back(
        problem("error", "machine", "shm", "/dev/shm cannot be read", "mount a tmpfs at /dev/shm"));
  } else {
    const std::uint64_t total = std::uint64_t{shm.f_blocks} * shm.f_frsize;
    const std::uint64_t free = std::uint64_t{shm.f_bavail} * shm.f_frsize;
    const std::string figures = "/dev/shm has " + manifests::format_size(free) + " free of " +
                                manifests::format_size(total) + "; the pinned pool is " +
                                manifests::format_size(pool);
    if (free < pool) {
      out.push_back(problem("error", "machine", "shm", figures,
                            "enlarge /dev/shm (docker: --shm-size; else mount -o remount,size=N "
                            "/dev/shm) or lower [shm] pinned_pool_size"));
    } else {
      out.push_back(ok("machine", "shm", figures));
    }
  }

  if (auto readings = ipc::probe_memory_readings(); !readings) {
    out.push_back(problem("error", "machine", "cgroup", readings.err().message,
                          "check /proc/meminfo and the cgroup files"));
  } else {
    const auto budget = ipc::compute_pinned_budget(*readings);
    std::string message = "RAM " + manifests::format_size(readings->physical_ram) +
                          (readings->cgroup_limit
                               ? ", cgroup limit " + manifests::format_size(*readings->cgroup_limit)
                               : std::string(", no cgroup limit")) +
                          ", pinned budget " + manifests::format_size(budget.bytes);
    if (readings->cgroup_limit && *readings->cgroup_limit < pool) {
      out.push_back(problem("error", "machine", "cgroup",
                            message + ": the pinned pool (" + manifests::format_size(pool) +
                                ") does not fit the cgroup limit",
                            "lower [shm] pinned_pool_size or raise the cgroup's memory.max"));
    } else {
      out.push_back(ok("machine", "cgroup", message));
    }
  }

  auto found = runtime::probe_plugins(options.worker_executable, with_plugins.plugin_paths,
                                      std::chrono::seconds(20));
  if (!found) {
    out.push_back(problem("error", "machine", "plugins", found.err().message,
                          "comfy-orch plugins " + options.deployment + " shows what is wrong"));
  } else {
    std::string names;
    for (const auto& p : *found) {
      names += (names.empty() ? "" : ", ") + p.name + " (" + p.kind + ", " + p.backend + ")";
    }
    out.push_back(ok("machine", "plugins",
                     std::to_string(found->size()) + " plugin(s)" +
                         (names.empty() ? std::string() : ": " + names)));
  }

  bool python_envs = false;
  for (const auto& pack : context.inventory.packs) {
    for (const auto& e : pack.envs) python_envs = python_envs || !e.status.native;
  }
  if (d.comfyui_root) {
    out.push_back(ok("machine", "comfyui", "ComfyUI root " + d.comfyui_root->string()));
  } else if (python_envs) {
    out.push_back(problem("warning", "machine", "comfyui",
                          "no [comfyui] root: Python packs that import comfy.* or comfy_api "
                          "cannot run",
                          "set [comfyui] root = \"/path/to/ComfyUI\" in " + options.deployment));
  } else {
    out.push_back(ok("machine", "comfyui", "no [comfyui] root (no Python pack needs one)"));
  }
  return out;
}

}  // namespace orch::envs
