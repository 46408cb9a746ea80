// comfy-orch launch <ComfyUI root> [--python PATH] [--dry-run] [-- <ComfyUI args>]: ComfyUI's
// main.py, run by ComfyUI's own interpreter with comfy-orch in front of comfy-env
// (docs/comfyui.md, "The launcher").
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "orch/process/install_layout.hpp"

extern char** environ;

namespace orch::cli {
namespace {

namespace fs = std::filesystem;

bool executable(const fs::path& p) {
  return ::access(p.c_str(), X_OK) == 0 && !fs::is_directory(p);
}

// ComfyUI's interpreter: the one given, else its venv's, else python3 on PATH.
fs::path comfyui_python(const fs::path& root, const std::string& given) {
  if (!given.empty()) return given;
  for (const char* venv : {"venv/bin/python", ".venv/bin/python"})
    if (executable(root / venv)) return root / venv;
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  for (std::size_t start = 0; start <= dirs.size();) {
    const std::size_t end = std::min(dirs.find(':', start), dirs.size());
    const fs::path candidate = fs::path(dirs.substr(start, end - start)) / "python3";
    if (end > start && executable(candidate)) return candidate;
    start = end + 1;
  }
  return {};
}

// What the launched ComfyUI gets on top of this environment: comfy_orch (and its comfy_env,
// ahead of an installed comfy-env) importable, and where the host library, the worker and this
// program are (the comfy_env drop-in's install() and setup_env() run `comfy-orch install|envs`).
std::map<std::string, std::string> launch_environment() {
  const auto& layout = process::this_install_layout();
  std::map<std::string, std::string> env;
  const char* old = std::getenv("PYTHONPATH");
  env["PYTHONPATH"] = layout.python_package_root.string() +
                      (old != nullptr && *old != '\0' ? ":" + std::string(old) : "");
  env["ORCH_HOST_LIBRARY"] = (layout.worker_library.parent_path() / "liborch_host.so").string();
  if (const char* w = std::getenv("ORCH_WORKER_EXECUTABLE"); w == nullptr || *w == '\0')
    env["ORCH_WORKER_EXECUTABLE"] = layout.worker_executable.string();
  std::error_code ec;
  if (const auto self = std::filesystem::read_symlink("/proc/self/exe", ec); !ec)
    env["ORCH_CLI"] = self.string();
  return env;
}

int launch(const std::string& root_arg, const std::string& python_arg,
           const std::vector<std::string>& args, bool dry_run) {
  std::error_code ec;
  const fs::path root = fs::weakly_canonical(root_arg, ec);
  if (!fs::is_regular_file(root / "main.py", ec)) {
    std::cerr << "comfy-orch launch: " << root_arg
              << " is not a ComfyUI tree (it has no main.py); give the directory you run "
                 "`python main.py` in\n";
    return exit_invalid_input;
  }
  const fs::path python = comfyui_python(root, python_arg);
  if (python.empty() || !executable(python)) {
    std::cerr << "comfy-orch launch: no Python interpreter for ComfyUI"
              << (python_arg.empty()
                      ? " (no venv/ or .venv/ in " + root.string() + ", and no python3 on PATH)"
                      : ": " + python_arg + " is not an executable")
              << "; give ComfyUI's with --python\n";
    return exit_invalid_input;
  }
  const auto env = launch_environment();
  std::vector<std::string> argv{python.string(), (root / "main.py").string()};
  argv.insert(argv.end(), args.begin(), args.end());
  if (dry_run) {
    std::cout << nlohmann::json{{"cwd", root.string()}, {"argv", argv}, {"environment", env}}.dump(
                     2)
              << '\n';
    return exit_ok;
  }
  std::cerr << "comfy-orch launch: " << python.string() << " main.py in " << root.string()
            << ", with comfy_orch from "
            << env.at("PYTHONPATH").substr(0, env.at("PYTHONPATH").find(':')) << '\n';
  for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
  if (::chdir(root.c_str()) != 0) {
    std::cerr << "comfy-orch launch: cannot enter " << root.string() << '\n';
    return exit_failure;
  }
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  ::execve(python.c_str(), cargv.data(), environ);
  std::cerr << "comfy-orch launch: cannot run " << python.string() << ": " << std::strerror(errno)
            << '\n';
  return exit_failure;
}

}  // namespace

void add_launch_command(CLI::App& app) {
  struct options {
    std::string root;
    std::string python;
    std::vector<std::string> args;
    bool dry_run = false;
  };
  auto opts = std::make_shared<options>();
  CLI::App* cmd = add_command(
      app, "launch", "Start ComfyUI with comfy-orch in front of comfy-env",
      "Start ComfyUI (its main.py, by its own interpreter: --python, else its venv/ or .venv/, "
      "else python3) with comfy-orch in front of comfy-env: comfy_orch importable, and a "
      "comfy_env module whose register_nodes is comfy-orch's, so packs written for comfy-env "
      "run their isolated envs in comfy-orch workers. Arguments after -- go to ComfyUI.");
  cmd->add_option("root", opts->root, "The ComfyUI directory (it has main.py)")->required();
  cmd->add_option("comfyui_args", opts->args, "ComfyUI's own arguments, after --");
  cmd->add_option("--python", opts->python, "ComfyUI's interpreter");
  cmd->add_flag("--dry-run", opts->dry_run,
                "Print what would run (argv, directory, added environment) as JSON, and exit");
  cmd->callback([opts] {
    const int code = launch(opts->root, opts->python, opts->args, opts->dry_run);
    if (code != exit_ok) throw CLI::RuntimeError(code);
  });
}

}  // namespace orch::cli
