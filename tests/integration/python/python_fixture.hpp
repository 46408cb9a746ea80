// python_fixture: a host on the sim device with Python packs (tests/integration/python/packs)
// beside the native example packs, each Python env a real venv created with
// --system-site-packages at the comfy-env workspace path, as docs/python.md describes. The
// interpreter is ORCH_TEST_PYTHON, else Debian's /usr/bin/python3 (another python3 may be first
// on PATH without numpy and torch); without numpy and torch the tests skip and say why.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <set>

#include "orch/manifests/inventory.hpp"
#include "orch/runtime/memory_table.hpp"
#include "runtime_fixture.hpp"
#include "../test_python.hpp"

namespace orch::python_testing {

namespace fs = std::filesystem;
using nlohmann::json;

using integration_testing::test_python;

// Runs `command` through the shell; its exit status.
inline int shell(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class python_worker_test : public runtime_testing::runtime_test {
 protected:
  static void SetUpTestSuite() {
    skip_reason_ = integration_testing::python_skip_reason();
    if (!skip_reason_.empty()) return;
    char tmpl[] = "/tmp/orch-pyenvs-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    workspace_ = tmpl;
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    if (!workspace_.empty()) fs::remove_all(workspace_, ec);
    workspace_.clear();
    made_.clear();
  }
  void SetUp() override {
    runtime_test::SetUp();
    if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
  }

  // Writes a deployment with the native ImageOps pack and the named Python test packs, makes
  // their venvs, and starts the host.
  // `comfyui`: name the fixture ComfyUI tree (tests/integration/python/comfyui) as [comfyui] root.
  // `device`: the host's device, "sim" (2 GiB) or "cpu".
  void start_python(const std::vector<std::string>& packs = {"PyContract", "PyOther"},
                    bool comfyui = false, const std::string& device = "sim") {
    write(dir_ / "packs/ComfyUI-ImageOps/nodes/comfy-env.toml",
          "[worker]\nlibrary = \"liborch_pack_image_ops.so\"\n");
    std::string paths = "\"packs/ComfyUI-ImageOps\"";
    for (const auto& p : packs) {
      fs::copy(fs::path(ORCH_TEST_PYTHON_PACKS) / p, dir_ / "packs" / p,
               fs::copy_options::recursive);
      // Every test pack reports where a tensor's bytes live with the same helper.
      fs::copy_file(fs::path(ORCH_TEST_PYTHON_PACKS) / "where.py",
                    dir_ / "packs" / p / "nodes" / "where.py");
      paths += ", \"packs/" + p + "\"";
    }
    const fs::path file = dir_ / "deployment.toml";
    write(file,
          (device == "sim" ? "[host]\ndevice = \"sim\"\n\n[host.sim]\ncapacity = \"2GiB\"\n\n"
                           : "[host]\ndevice = \"" + device + "\"\n\n") +
          "[memory]\nasync_offload_streams = 2\n\n[plugins]\nsearch_paths = [\"" +
              std::string(ORCH_TEST_PLUGIN_DIR) + "\"]\n\n[env]\nroot = \"" + workspace_.string() +
              "\"\n\n[packs]\npaths = [" + paths + "]\nlibrary_paths = [\"" +
              std::string(ORCH_TEST_EXAMPLES_LIB_DIR) +
              "\"]\n\n[workers]\nhandshake_timeout = \"20s\"\nheartbeat_interval = "
              "\"100ms\"\nrestart_backoff = \"50ms\"\ncall_timeout = \"30s\"\n\n[shm]\n"
              "pinned_pool_size = \"64MiB\"\n" +
              (comfyui ? "\n[comfyui]\nroot = \"" + std::string(ORCH_TEST_COMFYUI) + "\"\n"
                       : std::string()));
    ASSERT_NO_FATAL_FAILURE(make_venvs(file));
    ASSERT_NO_FATAL_FAILURE(start_file(file));
  }

  // A venv for every Python env of the deployment not made yet in this suite's workspace.
  void make_venvs(const fs::path& deployment) {
    manifests::diagnostics diags;
    auto d = manifests::load_deployment(deployment, diags);
    ASSERT_TRUE(d.has_value());
    for (const auto& pack : manifests::build_inventory(*d, diags).packs) {
      for (const auto& e : pack.envs) {
        if (e.status.native || !made_.insert(e.dir.env_name).second) continue;
        const fs::path venv = workspace_ / "envs" / e.dir.env_name;
        ASSERT_EQ(shell(test_python() + " -m venv --system-site-packages --without-pip '" +
                        venv.string() + "'"),
                  0)
            << "cannot create the venv " << venv;
      }
    }
  }

  // A venv for env `name` without the system's site-packages (so without numpy and torch),
  // before start_python makes the others.
  void make_bare_venv(const std::string& name) {
    ASSERT_TRUE(made_.insert(name).second) << name << " was made already";
    const fs::path venv = workspace_ / "envs" / name;
    ASSERT_EQ(shell(test_python() + " -m venv --without-pip '" + venv.string() + "'"), 0)
        << "cannot create the venv " << venv;
  }

  // A prompt's outcome, validated first (validation must pass).
  executor::prompt_outcome run_json(const json& prompt) { return run(prompt.dump()); }

  static json output(const executor::prompt_outcome& o, const std::string& node, std::size_t slot) {
    auto it = o.nodes.find(node);
    return it == o.nodes.end() ? json() : it->second.outputs.at(slot);
  }

  static inline std::string skip_reason_;
  static inline fs::path workspace_;
  static inline std::set<std::string> made_;
};

}  // namespace orch::python_testing
