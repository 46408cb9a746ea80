#include "orch/envs/env_backend.hpp"

#include <unistd.h>

#include <fstream>
#include <regex>

#include "orch/envs/errc.hpp"
#include "orch/process/python_environment.hpp"
#include "orch/process/tool_process.hpp"

namespace orch::envs {
namespace {

namespace fs = std::filesystem;

// A Python tool runs with the operator's PYTHONPATH and user site-packages out of the way, the
// way the worker will run (python_worker_command.hpp).
process::tool_command python_tool(std::vector<std::string> argv, int log_fd) {
  process::tool_command command;
  command.argv = std::move(argv);
  command.env = {{"PIP_DISABLE_PIP_VERSION_CHECK", "1"}, {"PIP_NO_INPUT", "1"}};
  process::scrub_python_environment(command.env);
  command.output_fd = log_fd;
  return command;
}

void log_line(int fd, const std::string& line) {
  const std::string text = "\n### comfy-orch: " + line + "\n";
  [[maybe_unused]] const auto n = ::write(fd, text.data(), text.size());
}

// The last lines of the log that say what failed: pip's and uv's "ERROR:"/"error:" lines.
std::string failure_line(const fs::path& log) {
  std::ifstream in(log);
  std::string line;
  std::string last;
  while (std::getline(in, line)) {
    if (line.rfind("ERROR:", 0) == 0 || line.rfind("error:", 0) == 0 ||
        line.rfind("Error:", 0) == 0 || line.find("× ") != std::string::npos) {
      last = line;
    }
  }
  return last;
}

// The package a pip or uv failure names, when it names one.
std::string failed_package(const std::string& line) {
  static const std::regex patterns[] = {
      std::regex(R"(No matching distribution found for ([A-Za-z0-9_.\-\[\]]+))"),
      std::regex(R"(satisfies the requirement ([A-Za-z0-9_.\-\[\]]+))"),
      std::regex(R"(Because ([A-Za-z0-9_.\-]+) was not found)")};
  // std::regex recurses per character: a tool's line is cut before it is matched.
  const std::string head = line.substr(0, 400);
  std::smatch m;
  for (const auto& p : patterns) {
    if (std::regex_search(head, m, p)) return m[1];
  }
  return {};
}

status run_step(const process::tool_command& command, const backend_build& build,
                const fs::path& log, const std::string& what) {
  std::string shown;
  for (const auto& a : command.argv) shown += (shown.empty() ? "" : " ") + a;
  log_line(build.log_fd, shown);
  auto ran = process::run_tool(command);
  if (!ran) return error{envs_errc::install_failed, what + ": " + ran.err().message};
  if (ran->succeeded()) return ok_status();
  const std::string line = failure_line(log);
  const std::string package = failed_package(line);
  return error{envs_errc::install_failed,
               (package.empty() ? what : "package " + package + " could not be installed") + " (" +
                   what + " " + ran->describe() + ")" +
                   (line.empty() ? std::string() : ": " + line)};
}

void write_file(const fs::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << text;
}

std::vector<std::string> index_flags(const backend_build& build) {
  std::vector<std::string> flags;
  if (build.no_index) flags.push_back("--no-index");
  for (const auto& dir : build.find_links) {
    flags.push_back("--find-links");
    flags.push_back(fs::absolute(dir).string());
  }
  return flags;
}

fs::path log_path_of(int fd) {
  std::error_code ec;
  return fs::read_symlink("/proc/self/fd/" + std::to_string(fd), ec);
}

}  // namespace

const char* to_string(env_backend_kind kind) noexcept {
  switch (kind) {
    case env_backend_kind::pixi:
      return "pixi";
    case env_backend_kind::uv:
      return "uv";
    case env_backend_kind::venv:
      return "venv";
  }
  return "venv";
}

fs::path interpreter_in(env_backend_kind kind) {
  return kind == env_backend_kind::pixi ? fs::path(".pixi/envs/default/bin/python")
                                        : fs::path("bin/python");
}

result<env_backend_kind> choose_backend(const std::string& requested, const fs::path& host_python) {
  const bool has_pixi = !process::find_executable("pixi").empty();
  const bool has_uv = !process::find_executable("uv").empty();
  const bool has_python = !process::find_executable(host_python.string()).empty();
  if (requested == "pixi") {
    if (has_pixi) return env_backend_kind::pixi;
    return error{envs_errc::not_found,
                 "--backend pixi: pixi is not on PATH; install it (https://pixi.sh) or choose "
                 "--backend uv or venv"};
  }
  if (requested == "uv") {
    if (has_uv) return env_backend_kind::uv;
    return error{envs_errc::not_found,
                 "--backend uv: uv is not on PATH; install it or choose --backend venv"};
  }
  if (requested == "venv" || requested.empty()) {
    if (requested.empty() && has_pixi) return env_backend_kind::pixi;
    if (requested.empty() && has_uv) return env_backend_kind::uv;
    if (has_python) return env_backend_kind::venv;
    return error{envs_errc::not_found,
                 "no backend: neither pixi nor uv is on PATH, and the host interpreter " +
                     host_python.string() +
                     " (for python -m venv) does not run; install pixi or uv, or name the "
                     "host's interpreter with [env] python"};
  }
  return error{envs_errc::invalid_request,
               "--backend " + requested + ": not a backend (pixi, uv or venv)"};
}

status build_env(const backend_build& build, const manifests::env_derivation& derivation,
                 const phase_reporter& phase) {
  const fs::path log = log_path_of(build.log_fd);
  if (build.kind == env_backend_kind::pixi) {
    write_file(build.dir / "pixi.toml", manifests::pixi_toml_text(derivation, build.source));
    phase("solving and installing (pixi install)");
    auto command = python_tool(
        {"pixi", "install", "--manifest-path", (build.dir / "pixi.toml").string()}, build.log_fd);
    return run_step(command, build, log, "pixi install");
  }
  const std::string python = (build.dir / "bin/python").string();
  const bool uv = build.kind == env_backend_kind::uv;
  // The env first, into the empty build directory: uv refuses a directory with files in it.
  phase(uv ? "creating the env (uv venv)" : "creating the env (python -m venv)");
  auto create =
      uv ? python_tool({"uv", "venv", "--quiet", "--system-site-packages", "--python",
                        build.host_python.string(), build.dir.string()},
                       build.log_fd)
         : python_tool({build.host_python.string(), "-m", "venv", "--system-site-packages",
                        "--without-pip", build.dir.string()},
                       build.log_fd);
  if (auto st = run_step(create, build, log, uv ? "uv venv" : "python -m venv"); !st) return st;
  if (derivation.requirements.empty()) return ok_status();
  const fs::path requirements = build.dir / "requirements.txt";
  const fs::path constraints = build.dir / "constraints.txt";
  write_file(requirements, manifests::requirements_text(derivation));
  write_file(constraints,
             build.host_torch.empty() ? std::string() : "torch==" + build.host_torch + "\n");
  const std::string count = std::to_string(derivation.requirements.size());
  std::vector<std::string> argv;
  if (uv) {
    phase("installing " + count + " requirement(s) (uv pip)");
    argv = {"uv", "pip", "install", "--python", python};
  } else {
    // The host's pip serves the env through --system-site-packages; only an env without one
    // gets its own from ensurepip.
    auto probe = python_tool({python, "-m", "pip", "--version"}, build.log_fd);
    if (auto ran = process::run_tool(probe); !ran || !ran->succeeded()) {
      phase("bootstrapping pip (ensurepip)");
      if (auto st = run_step(python_tool({python, "-m", "ensurepip"}, build.log_fd), build, log,
                             "python -m ensurepip");
          !st) {
        return st;
      }
    }
    phase("installing " + count + " requirement(s) (pip)");
    argv = {python, "-m", "pip", "install"};
  }
  for (auto& f : index_flags(build)) argv.push_back(std::move(f));
  argv.insert(argv.end(), {"-c", constraints.string(), "-r", requirements.string()});
  return run_step(python_tool(std::move(argv), build.log_fd), build, log,
                  uv ? "uv pip install" : "pip install");
}

}  // namespace orch::envs
