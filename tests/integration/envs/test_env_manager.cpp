// The env manager on real tools (docs/envs.md): `comfy-orch install --backend venv` builds a
// pack's env from wheels this test builds out of local projects (pip --no-index
// --find-links), and a Python worker runs a node that imports the package. Then: a changed
// dependency makes the env stale and install rebuilds it, a changed comment does not; an
// install SIGKILLed midway leaves the previous env running and a rerun completes; two installs of
// one env at once run one after the other; doctor names a missing import and a broken
// interpreter with their fixes; gc lists and deletes an orphan but never an env a live serve
// uses.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "command_runner.hpp"
#include "serve_client.hpp"
#include "test_python.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;
using orch::testing::run_command;
using orch::testing::serve_process;

const std::string orch_binary = ORCH_TEST_COMFY_ORCH;
// The host's interpreter the envs are made from: under the asan preset, the sanitized one
// (docs/sanitizers.md), so the workers in them load the sanitized library.
const std::string python = orch::integration_testing::test_python();

int shell(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
}

std::string read(const fs::path& file) {
  return orch::testing::slurp(file);
}

// A comfy-orch started in the background, its output in a file.
class background {
 public:
  background(const std::vector<std::string>& args, const fs::path& output) {
    std::vector<std::string> full = {orch_binary};
    full.insert(full.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : full) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, output.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    if (posix_spawn(&pid_, orch_binary.c_str(), &actions, nullptr, argv.data(), environ) != 0)
      pid_ = 0;
    posix_spawn_file_actions_destroy(&actions);
  }
  ~background() {
    if (pid_ != 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      wait();
    }
  }
  pid_t pid() const { return pid_; }
  int wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
    return status;
  }

 private:
  pid_t pid_ = 0;
  bool reaped_ = false;
};

class env_manager : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // The test wheels orchtestpkg 1.0 and 2.0, built once per build directory: ctest runs each
    // test of this suite in a process of its own, and building them was most of a test's time.
    // Two processes: torch imports distutils, which setuptools refuses to follow.
    skip_reason_ = orch::integration_testing::python_skip_reason();
    if (skip_reason_.empty())
      skip_reason_ = orch::integration_testing::python_skip_reason("setuptools, wheel, venv, pip");
    if (!skip_reason_.empty()) return;
    wheels_ = ORCH_TEST_WHEELS;
    if (read(wheels_ / "recipe") == wheel_recipe()) return;
    // Built beside the cache and renamed into place, so a concurrent run sees all or nothing.
    std::string tmpl = wheels_.string() + ".build-XXXXXX";
    fs::create_directories(wheels_.parent_path());
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr) << tmpl << ": " << std::strerror(errno);
    const fs::path building = tmpl;
    std::error_code ec;
    for (const char* version : {"1.0", "2.0"}) {
      const fs::path project = building / ("src-" + std::string(version));
      write(project / "setup.py", setup_py(version));
      write(project / "orchtestpkg/__init__.py", init_py(version));
      if (shell("cd '" + project.string() + "' && " + python +
                " -m pip wheel --quiet --no-deps --no-build-isolation --no-index -w '" +
                building.string() + "' . >/dev/null 2>&1") != 0) {
        fs::remove_all(building, ec);
        FAIL() << "cannot build the test wheel orchtestpkg " << version;
      }
    }
    write(building / "recipe", wheel_recipe());
    // Another run may have put the same wheels in place meanwhile; only other ones are replaced.
    if (read(wheels_ / "recipe") != wheel_recipe()) {
      fs::remove_all(wheels_, ec);
      fs::rename(building, wheels_, ec);
    }
    fs::remove_all(building, ec);  // nothing left when it was renamed
    ASSERT_EQ(read(wheels_ / "recipe"), wheel_recipe()) << wheels_;
  }
  static std::string setup_py(const std::string& version) {
    return "from setuptools import setup\nsetup(name='orchtestpkg', version='" + version +
           "', packages=['orchtestpkg'])\n";
  }
  static std::string init_py(const std::string& version) {
    return "VERSION = '" + version + "'\n";
  }
  // What the cached wheels were built from: a changed recipe rebuilds them.
  static std::string wheel_recipe() {
    return setup_py("1.0") + init_py("1.0") + setup_py("2.0") + init_py("2.0");
  }

  void SetUp() override {
    if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
    char tmpl[] = "/tmp/orch-envs-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    write(dir_ / "deployment.toml",
          "[host]\ndevice = \"cpu\"\n\n[plugins]\nsearch_paths = [\"" +
              std::string(ORCH_TEST_PLUGIN_DIR) + "\"]\n\n[env]\nroot = \"ws\"\npython = \"" +
              python +
              "\"\n\n[packs]\npaths = [\"packs/ComfyUI-PkgUser\"]\n\n[workers]\n"
              "handshake_timeout = \"30s\"\n\n[shm]\npinned_pool_size = \"32MiB\"\n");
    write(dir_ / "packs/ComfyUI-PkgUser/nodes/__init__.py",
          "import orchtestpkg\n\n\nclass PkgVersion:\n    @classmethod\n"
          "    def INPUT_TYPES(cls):\n        return {\"required\": {}}\n\n"
          "    RETURN_TYPES = (\"STRING\",)\n    FUNCTION = \"run\"\n    CATEGORY = \"test\"\n"
          "    OUTPUT_NODE = True\n\n    def run(self):\n"
          "        return (\"orchtestpkg-\" + orchtestpkg.VERSION + \"-imported\",)\n\n\n"
          "NODE_CLASS_MAPPINGS = {\"PkgVersion\": PkgVersion}\n");
    set_manifest("==1.0");
    write(dir_ / "prompt.json", R"({"1": {"class_type": "PkgVersion", "inputs": {}}})");
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  void set_manifest(const std::string& spec, const std::string& comment = "") {
    write(dir_ / "packs/ComfyUI-PkgUser/nodes/comfy-env.toml",
          comment + "python = \"3.11\"\n\n[pypi-dependencies]\norchtestpkg = \"" + spec + "\"\n");
  }
  std::string deployment() const {
    return (dir_ / "deployment.toml").string();
  }
  fs::path envs() const {
    return dir_ / "ws/envs";
  }
  std::vector<std::string> install_args() const {
    return {"install",    deployment(),   "--backend",     "venv",
            "--no-index", "--find-links", wheels_.string()};
  }
  orch::testing::command_result cli(const std::string& args) const {
    return run_command("'" + orch_binary + "' " + args);
  }
  orch::testing::command_result install() const {
    std::string args;
    for (const auto& a : install_args()) args += "'" + a + "' ";
    return cli(args);
  }
  json env_row() const {
    const auto r = cli("envs '" + deployment() + "' --json");
    const auto doc = json::parse(r.out, nullptr, false);
    if (!doc.is_object()) return json();
    for (const auto& e : doc["envs"]) {
      if (e["env"] == "pkguser-nodes") return e;
    }
    return json();
  }
  // The version the node reports, read from `run`'s output; empty when the prompt failed.
  std::string node_says() const {
    const auto r =
        cli("run '" + deployment() + "' --prompt '" + (dir_ / "prompt.json").string() + "' --json");
    for (const char* v : {"1.0", "2.0"}) {
      if (r.out.find("orchtestpkg-" + std::string(v) + "-imported") != std::string::npos) return v;
    }
    ADD_FAILURE() << "the node did not run (exit " << r.exit_code << "):\n" << r.out << r.err;
    return {};
  }
  std::vector<fs::path> build_leftovers() const {
    std::vector<fs::path> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(envs(), ec)) {
      if (e.path().filename().string().find(".build-") != std::string::npos)
        out.push_back(e.path());
    }
    return out;
  }

  static inline std::string skip_reason_;
  static inline fs::path wheels_;
  fs::path dir_;
};

TEST_F(env_manager, venv_backend_builds_the_env_and_a_python_worker_imports_its_package) {
  EXPECT_EQ(env_row()["state"], "missing");
  const auto r = install();
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* phase : {"creating the env (python -m venv)", "installing 1 requirement(s)",
                            "stamping", "built at"}) {
    EXPECT_NE(r.out.find(phase), std::string::npos) << phase << "\n" << r.out;
  }
  const auto log_at = r.out.find("(log: ");
  ASSERT_NE(log_at, std::string::npos) << r.out;
  const fs::path log = r.out.substr(log_at + 6, r.out.find(')', log_at) - log_at - 6);
  EXPECT_NE(read(log).find("orchtestpkg"), std::string::npos) << "pip's own output is logged";

  const auto row = env_row();
  EXPECT_EQ(row["state"], "ok") << row;
  EXPECT_EQ(row["runnable"], true);
  const std::string tag = row["abi_tag"];
  EXPECT_EQ(row["stamp"], "abi=" + tag + " verified");
  EXPECT_EQ(fs::path(row["path"].get<std::string>()).filename(), "pkguser-nodes_" + tag);
  const auto stamp = json::parse(read(fs::path(row["path"].get<std::string>()) / "env.stamp.json"));
  for (const char* key : {"comfy_env_version", "abi_tag", "torch_pin", "provenance",
                          "pixi_lock_sha256", "comfy_orch_version", "backend", "identity"}) {
    EXPECT_TRUE(stamp.contains(key)) << key;
  }
  EXPECT_EQ(stamp["identity"], row["identity"]);

  EXPECT_EQ(node_says(), "1.0");
  const auto again = install();
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_NE(again.out.find("up to date"), std::string::npos) << again.out;
}

TEST_F(env_manager, a_package_that_cannot_install_is_named_and_the_previous_env_stays) {
  ASSERT_EQ(install().exit_code, 0);
  set_manifest("==9.9");
  const auto r = install();
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("pkguser-nodes: FAILED: package orchtestpkg could not be installed (pip "
                       "install exited with 1): ERROR: "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("No matching distribution found for orchtestpkg==9.9"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("; log: " + (envs() / ".logs").string()), std::string::npos) << r.out;
  EXPECT_TRUE(build_leftovers().empty());
  set_manifest("==1.0");
  EXPECT_EQ(env_row()["state"], "ok");
  EXPECT_EQ(node_says(), "1.0");
}

// uv is not a Debian package: the pinned wheel's binary, which scripts/install-deps unpacks into
// .deps/uv/bin, first on the install's PATH.
TEST_F(env_manager, uv_backend_builds_the_env_with_the_pinned_uv) {
  const fs::path uv_dir = ORCH_TEST_UV_DIR;
  ASSERT_TRUE(fs::exists(uv_dir / "uv")) << uv_dir << " has no uv: run ./scripts/install-deps";
  auto args = install_args();
  args[3] = "uv";
  std::string line = "PATH='" + uv_dir.string() + "':\"$PATH\" '" + orch_binary + "' ";
  for (const auto& a : args) line += "'" + a + "' ";
  const auto r = run_command(line);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("uv pip"), std::string::npos) << r.out;
  EXPECT_EQ(node_says(), "1.0");
}

// pixi is in no registry this project installs from (Debian, PyPI, npm), and it resolves python
// from conda-forge. Where it is missing (as on this project's machines), `install --backend pixi`
// refuses with the fix and makes nothing; where it is installed, it builds the env. The
// pixi.toml it writes is checked against the corpus in test_manifests either way.
TEST_F(env_manager, pixi_backend_builds_the_env_or_refuses_with_the_fix_where_pixi_is_missing) {
  set_manifest("*");
  const auto r = cli("install '" + deployment() + "' --backend pixi");
  if (shell("command -v pixi >/dev/null 2>&1") != 0) {
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find("--backend pixi: pixi is not on PATH; install it (https://pixi.sh) or "
                         "choose --backend uv or venv"),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "ws")) << "a refused install made the workspace";
    EXPECT_EQ(env_row()["state"], "missing");
    return;
  }
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(fs::exists(fs::path(env_row()["path"].get<std::string>()) / "pixi.toml"));
}

TEST_F(env_manager, a_changed_dependency_is_stale_and_rebuilt_a_changed_comment_is_not) {
  ASSERT_EQ(install().exit_code, 0);
  set_manifest("==1.0", "# only a comment changed\n");
  EXPECT_EQ(env_row()["state"], "ok");
  EXPECT_NE(install().out.find("up to date"), std::string::npos);

  set_manifest("==2.0");
  const auto row = env_row();
  EXPECT_EQ(row["state"], "stale") << row;
  EXPECT_NE(row["detail"].get<std::string>().find("dependencies changed"), std::string::npos);
  const auto r = install();
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("built at"), std::string::npos) << r.out;
  EXPECT_EQ(env_row()["state"], "ok");
  EXPECT_EQ(node_says(), "2.0");
}

TEST_F(env_manager, an_install_killed_midway_leaves_the_previous_env_and_a_rerun_completes) {
  ASSERT_EQ(install().exit_code, 0);
  const std::string built_identity = env_row()["identity"];
  set_manifest("==2.0");
  {
    background killed(install_args(), dir_ / "killed.out");
    // Midway: once the install's pip has started in the build directory.
    const fs::path log =
        envs() / ".logs" /
        (fs::path(env_row()["path"].get<std::string>()).filename().string() + ".log");
    bool midway = false;
    for (int i = 0; i < 6000 && !midway; ++i) {
      midway = read(log).find("-m pip install") != std::string::npos;
      if (!midway) std::this_thread::sleep_for(5ms);
    }
    ASSERT_TRUE(midway) << read(dir_ / "killed.out");
    ::kill(killed.pid(), SIGKILL);
    const int status = killed.wait();
    ASSERT_TRUE(WIFSIGNALED(status)) << "the install finished before it could be killed";
  }
  // The previous env is in place and still runs.
  auto row = env_row();
  EXPECT_EQ(row["state"], "stale") << row;  // built from the ==1.0 manifest
  const auto stamp = json::parse(read(fs::path(row["path"].get<std::string>()) / "env.stamp.json"));
  EXPECT_NE(stamp["identity"], row["identity"]);
  set_manifest("==1.0");
  EXPECT_EQ(env_row()["identity"], built_identity);
  EXPECT_EQ(node_says(), "1.0");
  set_manifest("==2.0");

  const auto r = install();
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(build_leftovers().empty()) << build_leftovers().front();
  EXPECT_EQ(env_row()["state"], "ok");
  EXPECT_EQ(node_says(), "2.0");
}

TEST_F(env_manager, two_installs_of_one_env_at_once_run_one_after_the_other) {
  background first(install_args(), dir_ / "first.out");
  background second(install_args(), dir_ / "second.out");
  const int a = first.wait();
  const int b = second.wait();
  const std::string out_a = read(dir_ / "first.out");
  const std::string out_b = read(dir_ / "second.out");
  ASSERT_TRUE(WIFEXITED(a) && WEXITSTATUS(a) == 0) << out_a;
  ASSERT_TRUE(WIFEXITED(b) && WEXITSTATUS(b) == 0) << out_b;
  const bool a_built = out_a.find("built at") != std::string::npos;
  const bool b_built = out_b.find("built at") != std::string::npos;
  EXPECT_NE(a_built, b_built) << "exactly one builds:\n" << out_a << "\n---\n" << out_b;
  const std::string& waited = a_built ? out_b : out_a;
  EXPECT_NE(waited.find("waiting for another install of this env"), std::string::npos) << waited;
  EXPECT_NE(waited.find("up to date"), std::string::npos) << waited;
  EXPECT_EQ(env_row()["state"], "ok");
  EXPECT_EQ(node_says(), "1.0");
}

// A manifest asking for a Python the venv backend cannot give (it runs the host's): the dry run
// says install would refuse it, and why, as install then does; neither builds anything.
TEST_F(env_manager, dry_run_says_which_envs_install_would_refuse_and_why) {
  write(dir_ / "packs/ComfyUI-PkgUser/nodes/comfy-env.toml",
        "python = \"3.12\"\n\n[pypi-dependencies]\norchtestpkg = \"==1.0\"\n");
  std::string args;
  for (const auto& a : install_args()) args += "'" + a + "' ";
  const auto dry = cli(args + "--dry-run");
  EXPECT_EQ(dry.exit_code, 2) << dry.out << dry.err;  // as install itself exits
  EXPECT_NE(dry.out.find("pkguser-nodes: missing, would be refused: [needs_pixi] "),
            std::string::npos)
      << dry.out;
  EXPECT_NE(dry.out.find("asks for Python 3.12"), std::string::npos) << dry.out;
  EXPECT_EQ(dry.out.find("would build"), std::string::npos) << dry.out;
  const auto as_json = json::parse(cli(args + "--dry-run --json").out);
  EXPECT_EQ(as_json["envs"][0]["action"], "refuse") << as_json;
  const auto real = install();
  EXPECT_EQ(real.exit_code, 2);
  EXPECT_NE(real.out.find("asks for Python 3.12"), std::string::npos) << real.out;
  EXPECT_EQ(env_row()["state"], "missing");
}

// An env whose interpreter is another Python than its manifest asks for (made by hand, or by a
// tool that ignored the line) is stale for envs and an error for doctor, with the fix.
TEST_F(env_manager, an_env_on_another_python_than_its_manifest_asks_is_stale_and_doctor_says_so) {
  ASSERT_EQ(install().exit_code, 0);
  EXPECT_EQ(env_row()["state"], "ok");
  write(dir_ / "packs/ComfyUI-PkgUser/nodes/comfy-env.toml",
        "python = \"3.12\"\n\n[pypi-dependencies]\norchtestpkg = \"==1.0\"\n");
  const auto row = env_row();
  EXPECT_EQ(row["state"], "stale") << row;
  EXPECT_NE(row["detail"].get<std::string>().find(
                "built with Python 3.11, and comfy-env.toml asks for Python 3.12"),
            std::string::npos)
      << row;
  const auto doctor = cli("doctor '" + deployment() + "'");
  EXPECT_EQ(doctor.exit_code, 1) << doctor.out;
  EXPECT_NE(doctor.out.find("built with Python 3.11, and comfy-env.toml asks for Python 3.12"),
            std::string::npos)
      << doctor.out;
}

TEST_F(env_manager, doctor_names_a_missing_import_and_a_broken_interpreter_with_their_fixes) {
  ASSERT_EQ(install().exit_code, 0);
  const auto healthy = cli("doctor '" + deployment() + "' --json");
  const auto doc = json::parse(healthy.out);
  EXPECT_EQ(doc["errors"], 0) << healthy.out;
  EXPECT_EQ(healthy.exit_code, 0) << healthy.out;
  bool imported = false;
  for (const auto& c : doc["checks"]) {
    imported = imported || (c["check"] == "import" && c["status"] == "ok" &&
                            c["message"].get<std::string>().find("import orchtestpkg") == 0);
  }
  EXPECT_TRUE(imported) << healthy.out;

  const fs::path env = env_row()["path"].get<std::string>();
  fs::remove_all(env / "lib/python3.11/site-packages/orchtestpkg");
  const auto missing = cli("doctor '" + deployment() + "'");
  EXPECT_EQ(missing.exit_code, 1) << missing.out;
  EXPECT_NE(missing.out.find("[error] import: import orchtestpkg (package orchtestpkg) fails"),
            std::string::npos)
      << missing.out;
  EXPECT_NE(missing.out.find("ModuleNotFoundError"), std::string::npos) << missing.out;
  EXPECT_NE(missing.out.find("fix: comfy-orch install --force"), std::string::npos);

  fs::remove(env / "bin/python");
  write(env / "bin/python", "#!/bin/sh\necho 'cannot start: broken' >&2\nexit 3\n");
  fs::permissions(env / "bin/python", fs::perms::owner_all);
  const auto broken = cli("doctor '" + deployment() + "'");
  EXPECT_EQ(broken.exit_code, 1);
  EXPECT_NE(
      broken.out.find("[error] interpreter: the interpreter " + (env / "bin/python").string() +
                      " does not run: exited with 3: cannot start: broken"),
      std::string::npos)
      << broken.out;
  EXPECT_NE(broken.out.find("fix: comfy-orch install --force " + deployment() + " pkguser-nodes"),
            std::string::npos);
}

TEST_F(env_manager, gc_lists_and_deletes_an_orphan_and_never_an_env_a_live_serve_uses) {
  ASSERT_EQ(install().exit_code, 0);
  const std::string tag = env_row()["abi_tag"];
  write(envs() / ("gone-pack_" + tag) / "bin/python", std::string(4096, 'x'));
  EXPECT_EQ(env_row()["state"], "ok");
  const auto listed = json::parse(cli("gc '" + deployment() + "' --json").out);
  ASSERT_EQ(listed["envs"].size(), 1u) << listed;
  EXPECT_EQ(fs::path(listed["envs"][0]["path"].get<std::string>()).filename(), "gone-pack_" + tag);
  EXPECT_GE(listed["envs"][0]["bytes"].get<std::uint64_t>(), 4096u);
  EXPECT_TRUE(fs::exists(envs() / ("gone-pack_" + tag))) << "gc without --delete deletes nothing";

  // Stale only because its manifest changed: it still runs, and install rebuilds it in place.
  set_manifest(">=1.0");
  ASSERT_EQ(env_row()["state"], "stale");
  EXPECT_EQ(json::parse(cli("gc '" + deployment() + "' --json").out)["envs"].size(), 1u);

  // A second deployment on the same workspace, whose env another tool made (so no install
  // recorded it): to the first deployment it is an orphan, and a serve of the second uses it.
  write(dir_ / "other/packs/ComfyUI-Other/nodes/comfy-env.toml", "python = \"3.11\"\n");
  write(dir_ / "other/packs/ComfyUI-Other/nodes/__init__.py",
        "class Hello:\n    @classmethod\n    def INPUT_TYPES(cls):\n        return "
        "{\"required\": {}}\n\n    RETURN_TYPES = (\"STRING\",)\n    FUNCTION = \"run\"\n"
        "    CATEGORY = \"test\"\n\n    def run(self):\n        return (\"hello\",)\n\n\n"
        "NODE_CLASS_MAPPINGS = {\"Hello\": Hello}\n");
  std::string other = read(dir_ / "deployment.toml");
  other.replace(other.find("root = \"ws\""), 11, "root = \"../ws\"");
  other.replace(other.find("packs/ComfyUI-PkgUser"), 21, "packs/ComfyUI-Other");
  write(dir_ / "other/deployment.toml", other);
  ASSERT_EQ(shell(python + " -m venv --system-site-packages --without-pip '" +
                  (envs() / "other-nodes").string() + "'"),
            0);
  char runtime[] = "/tmp/orch-run-XXXXXX";
  const fs::path runtime_dir = ::mkdtemp(runtime);
  ::setenv("XDG_RUNTIME_DIR", runtime_dir.c_str(), 1);
  {
    serve_process serve(orch_binary, (dir_ / "other/deployment.toml").string());
    ASSERT_NE(serve.port(), 0);
    for (int i = 0; i < 300 && !fs::exists(runtime_dir / "comfy-orch" /
                                           (std::to_string(serve.pid()) + ".json"));
         ++i) {
      std::this_thread::sleep_for(10ms);
    }
    const auto r = cli("gc '" + deployment() + "' --delete --json");
    const auto doc = json::parse(r.out);
    ASSERT_EQ(doc["envs"].size(), 2u) << r.out << r.err;
    for (const auto& e : doc["envs"]) {
      if (fs::path(e["path"].get<std::string>()).filename() == "gone-pack_" + tag) {
        EXPECT_EQ(e["outcome"], "deleted") << e;
      } else {
        EXPECT_EQ(fs::path(e["path"].get<std::string>()).filename(), "other-nodes");
        EXPECT_EQ(e["outcome"], "in use") << e;
        ASSERT_FALSE(e["in_use_by"].empty());
        EXPECT_NE(
            e["in_use_by"][0].get<std::string>().find("serve pid " + std::to_string(serve.pid())),
            std::string::npos)
            << e;
      }
    }
  }
  ::unsetenv("XDG_RUNTIME_DIR");
  fs::remove_all(runtime_dir);
  EXPECT_FALSE(fs::exists(envs() / ("gone-pack_" + tag)));
  EXPECT_TRUE(fs::exists(envs() / "other-nodes")) << "the env in use was kept";
  EXPECT_TRUE(fs::exists(env_row()["path"].get<std::string>()));
}

}  // namespace

// The comfy_env drop-in's install() runs `comfy-orch install <ComfyUI root>`: a tree is taken
// where a deployment file is, with the deployment `launch` uses for it, and the fix lines name
// the root.
TEST_F(env_manager, install_and_envs_take_a_comfyui_root_for_a_deployment_file) {
  const fs::path root = dir_ / "ComfyUI";
  fs::create_directories(root / "comfy");
  fs::create_directories(root / "custom_nodes");
  fs::copy(dir_ / "packs/ComfyUI-PkgUser", root / "custom_nodes/ComfyUI-PkgUser",
           fs::copy_options::recursive);
  const std::string env = "ORCH_ENV_ROOT='" + (dir_ / "ws").string() + "' ORCH_HOST_PYTHON='" +
                          python + "' ";
  const auto before = run_command(env + "'" + orch_binary + "' envs '" + root.string() + "'");
  EXPECT_EQ(before.exit_code, 0) << before.out << before.err;
  EXPECT_NE(before.out.find("run `comfy-orch install " + root.string() + " pkguser-nodes`"),
            std::string::npos)
      << before.out;
  const auto r = run_command(env + "'" + orch_binary + "' install '" + root.string() +
                             "' --backend venv --no-index --find-links '" + wheels_.string() +
                             "'");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto after =
      run_command(env + "'" + orch_binary + "' envs '" + root.string() + "' --json");
  const auto doc = json::parse(after.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << after.out << after.err;
  ASSERT_EQ(doc["envs"].size(), 1u) << after.out;
  EXPECT_EQ(doc["envs"][0]["state"], "ok") << after.out;
  // A directory that is no ComfyUI tree is refused, naming what to give.
  const auto refused = run_command("'" + orch_binary + "' envs '" + dir_.string() + "'");
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("is not a ComfyUI tree"), std::string::npos) << refused.err;
}
