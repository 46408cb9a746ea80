#include "orch/envs/env_install.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>

#include "orch/envs/errc.hpp"
#include "orch/manifests/env_stamp.hpp"
#include "orch/support/sha256.hpp"

namespace orch::envs {
namespace {

namespace fs = std::filesystem;

// A file descriptor that closes itself; closing the lock file releases the flock.
class owned_fd {
 public:
  explicit owned_fd(int fd) : fd_(fd) {}
  owned_fd(const owned_fd&) = delete;
  owned_fd& operator=(const owned_fd&) = delete;
  ~owned_fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

install_outcome failed(fs::path dir, fs::path log, std::string message) {
  install_outcome out;
  out.result = install_outcome::kind::failed;
  out.dir = std::move(dir);
  out.log = std::move(log);
  out.message = std::move(message);
  return out;
}

std::string now_text() {
  const std::time_t t = std::time(nullptr);
  char buffer[64];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buffer;
}

// Writes the stamp beside its final name and renames it into place, so a stamp is never half
// written.
bool write_stamp(const fs::path& dir, const manifests::env_stamp& stamp) {
  const fs::path part = dir / (std::string(manifests::stamp_file_name) + ".part");
  {
    std::ofstream out(part, std::ios::binary | std::ios::trunc);
    out << manifests::env_stamp_text(stamp);
    if (!out.flush()) return false;
  }
  std::error_code ec;
  fs::rename(part, dir / manifests::stamp_file_name, ec);
  return !ec;
}

std::optional<std::string> file_sha256(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  support::sha256 hash;
  char buffer[65536];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    hash.update(std::string_view(buffer, static_cast<std::size_t>(in.gcount())));
  }
  return hash.hex_digest();
}

// Puts the built env at `final_dir`: an atomic exchange with the previous env when there is one
// (the previous env then sits at `built` and is removed), a plain rename when there is none.
bool swap_into_place(const fs::path& built, const fs::path& final_dir, std::string& why) {
  std::error_code ec;
  if (fs::exists(final_dir, ec)) {
    if (::renameat2(AT_FDCWD, built.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) != 0) {
      why = std::string("renameat2(RENAME_EXCHANGE): ") + std::strerror(errno);
      return false;
    }
    fs::remove_all(built, ec);
    return true;
  }
  if (::rename(built.c_str(), final_dir.c_str()) != 0) {
    why = std::string("rename: ") + std::strerror(errno);
    return false;
  }
  return true;
}

// A venv names its own directory in its activate scripts, its console scripts' #! lines and
// pyvenv.cfg; they are made to name the final directory before the env is swapped there.
void relocate_text(const fs::path& built, const fs::path& final_dir) {
  std::vector<fs::path> files = {built / "pyvenv.cfg"};
  std::error_code ec;
  for (fs::directory_iterator it(built / "bin", ec), end; !ec && it != end; it.increment(ec)) {
    const auto& entry = *it;
    if (entry.is_regular_file(ec) && !entry.is_symlink(ec)) files.push_back(entry.path());
  }
  const std::string from = built.string();
  const std::string to = final_dir.string();
  for (const auto& file : files) {
    if (fs::file_size(file, ec) > (1u << 20) || ec) continue;  // scripts only, never binaries
    std::ifstream in(file, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.find('\0') != std::string::npos || text.find(from) == std::string::npos) continue;
    for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
      text.replace(at, from.size(), to);
    std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
  }
}

// Build directories that killed installs of this env left behind. The caller holds the env's
// lock, so no install is using one.
void remove_leftovers(const fs::path& envs, const std::string& prefix) {
  std::error_code ec;
  std::vector<fs::path> leftovers;
  for (fs::directory_iterator it(envs, ec), end; !ec && it != end; it.increment(ec)) {
    const auto& entry = *it;
    if (entry.path().filename().string().rfind(prefix, 0) == 0) leftovers.push_back(entry.path());
  }
  for (const auto& p : leftovers) fs::remove_all(p, ec);
}

}  // namespace

fs::path install_dir_for(const manifests::env_entry& env, const fs::path& workspace_root,
                         const manifests::host_stack& stack) {
  const auto& s = env.status;
  const bool foreign =
      !s.abi_tag.empty() && !manifests::same_abi_tag(s.abi_tag, manifests::abi_tag(stack));
  if (s.state != manifests::env_state::missing && !foreign && !s.path.empty()) return s.path;
  return workspace_root / "envs" / (env.dir.env_name + "_" + manifests::abi_tag(stack));
}

bool env_up_to_date(const manifests::env_status& status) {
  return status.runnable && (status.state == manifests::env_state::ok ||
                             status.state == manifests::env_state::ambiguous);
}

std::optional<std::string> backend_refusal(const manifests::env_entry& env,
                                           const manifests::env_derivation& derivation,
                                           const manifests::host_stack& stack,
                                           env_backend_kind backend) {
  if (backend == env_backend_kind::pixi) return std::nullopt;
  const std::string tag = "[" + std::string(envs_errc::needs_pixi) + "] ";
  if (derivation.python != stack.python) {
    return tag + env.dir.config.string() + " asks for Python " + derivation.python + ", and a " +
           to_string(backend) + " env runs the host's Python " + stack.python +
           "; install pixi and use --backend pixi, or name a Python " + derivation.python +
           " host with [env] python";
  }
  std::string only_pixi;
  for (const auto& p : derivation.conda_packages) only_pixi += (only_pixi.empty() ? "" : ", ") + p;
  for (const auto& p : derivation.untranslatable) only_pixi += (only_pixi.empty() ? "" : ", ") + p;
  if (only_pixi.empty()) return std::nullopt;
  return tag + env.dir.config.string() + " declares " + only_pixi +
         ", which only pixi installs (conda packages, or PyPI entries pip cannot take); install "
         "pixi and use --backend pixi";
}

install_outcome install_env(const install_request& request, const install_progress& progress) {
  const auto& env = *request.env;
  const fs::path envs = request.workspace_root / "envs";
  std::error_code ec;
  fs::create_directories(envs / ".locks", ec);
  fs::create_directories(envs / ".logs", ec);
  if (ec) {
    return failed({}, {},
                  "cannot create " + (envs / ".locks").string() + ": " + ec.message() +
                      "; check the workspace root ([env] root)");
  }
  const fs::path final_dir = install_dir_for(env, request.workspace_root, request.stack);
  const std::string name = final_dir.filename().string();
  const fs::path lock_path = envs / ".locks" / (name + ".lock");
  owned_fd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (lock.get() < 0) {
    return failed(final_dir, {},
                  "cannot open the lock " + lock_path.string() + ": " + std::strerror(errno));
  }
  if (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
    progress("waiting for another install of this env (lock " + lock_path.string() + ")");
    if (::flock(lock.get(), LOCK_EX) != 0) {
      return failed(final_dir, {},
                    "cannot lock " + lock_path.string() + ": " + std::strerror(errno));
    }
  }

  // What another install may have built while this one waited.
  const manifests::env_lookup lookup{
      request.workspace_root, {}, nullptr, &request.stack, request.platform};
  const auto now = manifests::locate_env(env.dir, env.manifest, lookup);
  if (!request.force && env_up_to_date(now)) {
    install_outcome out;
    out.result = install_outcome::kind::up_to_date;
    out.dir = now.path;
    return out;
  }
  const auto derivation = manifests::derive_env(env.dir.env_name, env.manifest, request.stack,
                                                request.platform, env.dir.config.parent_path());
  for (const auto& note : derivation.notes) progress(note);
  if (auto refused = backend_refusal(env, derivation, request.stack, request.backend))
    return failed(final_dir, {}, *refused);

  remove_leftovers(envs, "." + name + ".build-");
  const fs::path build_dir = envs / ("." + name + ".build-" + std::to_string(::getpid()));
  const fs::path log_path = envs / ".logs" / (name + ".log");
  owned_fd log(::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (log.get() < 0 || !fs::create_directory(build_dir, ec)) {
    return failed(final_dir, log_path,
                  "cannot create " + build_dir.string() + " or " + log_path.string() + ": " +
                      (ec ? ec.message() : std::strerror(errno)));
  }
  const std::string header = "comfy-orch " + request.orch_version + " install of env '" +
                             env.dir.env_name + "' at " + now_text() + " into " +
                             final_dir.string() + " (" + to_string(request.backend) +
                             ", abi=" + manifests::abi_tag(request.stack) + ")\n";
  [[maybe_unused]] const auto n = ::write(log.get(), header.data(), header.size());

  backend_build build;
  build.kind = request.backend;
  build.host_python = request.host_python;
  build.dir = build_dir;
  build.find_links = request.find_links;
  build.no_index = request.no_index;
  build.log_fd = log.get();
  build.env_name = env.dir.env_name;
  build.source = env.dir.config;
  build.host_torch = request.stack.torch;
  if (auto st = build_env(build, derivation, progress); !st) {
    fs::remove_all(build_dir, ec);
    return failed(final_dir, log_path, st.err().message);
  }

  relocate_text(build_dir, final_dir);
  progress("stamping");
  manifests::env_stamp stamp;
  stamp.abi_tag = manifests::abi_tag(request.stack);
  stamp.torch_pin = manifests::torch_pin(request.stack);
  stamp.provenance = std::string("comfy-orch install --backend ") + to_string(request.backend);
  stamp.pixi_lock_sha256 = file_sha256(build_dir / "pixi.lock");
  stamp.comfy_orch_version = request.orch_version;
  stamp.backend = to_string(request.backend);
  stamp.identity = derivation.identity;
  std::string why;
  if (!write_stamp(build_dir, stamp) || !swap_into_place(build_dir, final_dir, why)) {
    fs::remove_all(build_dir, ec);
    return failed(final_dir, log_path,
                  "cannot put the built env in place at " + final_dir.string() +
                      (why.empty() ? std::string(": the stamp could not be written") : ": " + why));
  }
  install_outcome out;
  out.result = install_outcome::kind::built;
  out.dir = final_dir;
  out.log = log_path;
  return out;
}

}  // namespace orch::envs
