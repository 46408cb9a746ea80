#include "orch/runtime/python_worker_command.hpp"

#include "orch/process/python_environment.hpp"

namespace orch::runtime {

namespace {

// `python -c` with the package root as argv[1]: what `python -m comfy_orch.worker` does once
// the package is importable, without relying on PYTHONPATH (scrubbed) or an install. -s keeps
// the user's site-packages out, as PYTHONNOUSERSITE does for any interpreter it starts. An env
// that cannot import the package (a Python older than it) exits with the worker's set-up status
// (66), which the host does not restart. numpy is not needed to start (docs/python.md).
constexpr const char* bootstrap =
    "import sys\n"
    "sys.path.insert(0, sys.argv.pop(1))\n"
    "try:\n"
    "    from comfy_orch.worker import main\n"
    "except Exception as e:\n"
    "    sys.stderr.write('comfy_orch.worker: cannot start in %s: %s: %s\\n' % "
    "(sys.executable, type(e).__name__, e))\n"
    "    sys.exit(66)\n"
    "sys.exit(main())\n";

}  // namespace

void python_worker_command(const python_worker_spec& spec, const supervisor_options& options,
                           process::spawn_request& request, process::environment& env) {
  request.executable = spec.interpreter.string();
  request.working_directory = spec.pack_dir.string();
  std::vector<std::string> args;
  if (!spec.pixi_manifest.empty() && !spec.pixi.empty()) {
    // comfy-env's launch (docs/references.md, comfy-env §1.5): --as-is runs the env as built,
    // without re-solving or installing.
    request.executable = spec.pixi.string();
    args = {"run", "--as-is", "--manifest-path", spec.pixi_manifest.string(),
            "-e",  "default", "python"};
  }
  args.insert(args.end(),
              {"-s", "-c", bootstrap, options.python_package_root.string(), "--node-dir",
               spec.node_dir.string(), "--pack-dir", spec.pack_dir.string()});
  if (!spec.comfyui_root.empty()) {
    args.insert(args.end(), {"--comfyui-root", spec.comfyui_root.string()});
  }
  args.insert(args.end(), request.args.begin(), request.args.end());
  request.args = std::move(args);
  process::scrub_python_environment(env);
  env["ORCH_WORKER_LIBRARY"] = options.worker_library.string();
}

}  // namespace orch::runtime
