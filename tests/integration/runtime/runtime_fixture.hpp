// runtime_fixture: a throwaway deployment on the sim device with the example packs and the test
// pack, started as a real host (workers are real comfy-orch-worker processes). The fixture also
// checks, after every test, that no fd, /dev/shm entry or child process is left behind.
#pragma once

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "leak_check.hpp"
#include "orch/executor/executor.hpp"
#include "orch/executor/prompt_validation.hpp"
#include "orch/manifests/deployment.hpp"
#include "orch/manifests/inventory.hpp"
#include "orch/runtime/host_runtime.hpp"

namespace orch::runtime_testing {

namespace fs = std::filesystem;

// The env names comfy-env gives the three packs' nodes/ directories.
inline std::string env_of(const runtime::host_runtime& host, const std::string& class_type) {
  const auto* c = host.catalogue().find(class_type);
  return c == nullptr ? std::string() : c->env;
}

// Children of this process (anything the supervisor spawned and did not reap).
inline std::vector<pid_t> child_processes() {
  std::vector<pid_t> out;
  const pid_t self = ::getpid();
  for (const auto& name : ipc::testing::list_dir("/proc")) {
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat("/proc/" + name + "/stat");
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    long ppid = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %ld", &state, &ppid) == 2 && ppid == self) {
      out.push_back(static_cast<pid_t>(std::stol(name)));
    }
  }
  return out;
}

inline bool process_gone(pid_t pid) {
  if (::kill(pid, 0) != 0) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

struct deployment_options {
  std::string handshake_timeout = "5s";
  std::string heartbeat_interval = "100ms";
  std::string restart_backoff = "50ms";
  int crash_loop_limit = 3;
  std::string failed_retry;  // empty: the default
  std::string pool = "64MiB";
  std::string call_timeout = "30s";
  std::string worker_executable;  // empty: comfy-orch-worker
  bool pinned_memory = true;      // false: [memory] disable_pinned_memory
  std::string device = "sim";
  std::string capacity = "2GiB";
  std::string memory_extra;    // more [memory] lines ("highvram = true\n")
  std::string test_pack_env;   // more [env_vars] lines for the test pack
  std::string test_pack_worker;  // more [worker] lines for the test pack ("device = \"cpu\"\n")
  std::string sampler_pack_env;  // [env_vars] lines for the sim sampler pack
  std::string sampler_pack_worker;  // more [worker] lines for the sim sampler pack
  std::string server = "";  // [server] lines ("cache = \"none\"\n")
};

class runtime_test : public ipc::testing::leak_checked_test {
 protected:
  void SetUp() override {
    leak_checked_test::SetUp();
    children_before_ = child_processes().size();
    char tmpl[] = "/tmp/orch-runtime-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    executor_.reset();
    host_.reset();
    EXPECT_EQ(child_processes().size(), children_before_) << "a worker process was left behind";
    std::error_code ec;
    fs::remove_all(dir_, ec);
    leak_checked_test::TearDown();
  }

  void write(const fs::path& file, const std::string& text) {
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text;
  }

  fs::path write_deployment(const deployment_options& o = {}) {
    write(dir_ / "packs/ComfyUI-ImageOps/nodes/comfy-env.toml",
          "[worker]\nlibrary = \"liborch_pack_image_ops.so\"\n");
    write(dir_ / "packs/ComfyUI-SimSampler/nodes/comfy-env.toml",
          "[worker]\nlibrary = \"liborch_pack_sim_sampler.so\"\n" + o.sampler_pack_worker +
              (o.sampler_pack_env.empty() ? "" : "\n[env_vars]\n" + o.sampler_pack_env));
    write(dir_ / "packs/ComfyUI-TestNodes/nodes/comfy-env.toml",
          "[worker]\nlibrary = \"liborch_pack_test_nodes.so\"\n" + o.test_pack_worker +
              "\n[env_vars]\nTEST_PACK_VAR = \"from-pack\"\n" + o.test_pack_env);
    const fs::path file = dir_ / "deployment.toml";
    write(file, "[host]\ndevice = \"" + o.device + "\"\n\n[host.sim]\ncapacity = \"" +
                    o.capacity + "\"\npage_size = \"2MiB\"\n\n[memory]\nasync_offload_streams = 2\n" +
                    std::string(o.pinned_memory ? "" : "disable_pinned_memory = true\n") +
                    o.memory_extra +
                    "\n[plugins]\nsearch_paths = [\"" +
                    std::string(ORCH_TEST_PLUGIN_DIR) +
                    "\"]\n\n[packs]\npaths = [\"packs/ComfyUI-ImageOps\", "
                    "\"packs/ComfyUI-SimSampler\", \"packs/ComfyUI-TestNodes\"]\nlibrary_paths = "
                    "[\"" + std::string(ORCH_TEST_EXAMPLES_LIB_DIR) + "\", \"" +
                    std::string(ORCH_TEST_PACKS_DIR) + "\"]\n\n[workers]\nhandshake_timeout = \"" +
                    o.handshake_timeout + "\"\nheartbeat_interval = \"" + o.heartbeat_interval +
                    "\"\nrestart_backoff = \"" + o.restart_backoff +
                    "\"\ncrash_loop_limit = " + std::to_string(o.crash_loop_limit) +
                    (o.failed_retry.empty() ? std::string()
                                            : "\nfailed_retry = \"" + o.failed_retry + "\"") +
                    "\ncall_timeout = \"" + o.call_timeout + "\"\n\n[shm]\npinned_pool_size = \"" + o.pool + "\"\n" +
                    (o.server.empty() ? std::string() : "\n[server]\n" + o.server));
    return file;
  }

  // The host's sim device counters. They are shared atomics: any thread may read them, also after
  // the workers are gone.
  orch_sim_counters sim_counters() {
    auto* dev = host_->memory().backend();
    orch_sim_counters c{};
    c.struct_size = sizeof(c);
    EXPECT_EQ(dev->sim()->counters(dev->device(), &c), ORCH_OK);
    return c;
  }

  // Starts a host on a fresh deployment and waits until every worker is ready (or failed).
  void start(const deployment_options& o = {}) {
    start_file(write_deployment(o), o.worker_executable);
  }

  void start_file(const fs::path& file, const std::string& worker_executable = {}) {
    manifests::diagnostics diags;
    auto d = manifests::load_deployment(file, diags);
    std::string problems;
    for (const auto& diag : diags.items()) problems += diag.format() + "\n";
    ASSERT_TRUE(d.has_value()) << "deployment did not load:\n" << problems;
    const auto inv = manifests::build_inventory(*d, diags);
    auto host = runtime::host_runtime::start(
        *d, inv,
        {worker_executable.empty() ? ORCH_TEST_WORKER : worker_executable, 16,
         ORCH_TEST_WORKER_LIBRARY, ORCH_TEST_PYTHON_PACKAGE});
    ASSERT_TRUE(host.ok()) << host.err().message;
    host_ = std::move(*host);
    host_->wait_settled(std::chrono::seconds(20));
    executor_ = std::make_unique<executor::executor>(*host_, events_);
  }

  // Validation as `comfy-orch run` does it: VALIDATE_INPUTS runs in the workers.
  executor::validation_report validate(const executor::prompt& p) {
    return executor::validate_prompt(p, host_->catalogue(), executor_->worker_validation());
  }

  executor::prompt_outcome run(const std::string& prompt_json) {
    auto p = executor::parse_prompt(prompt_json);
    EXPECT_TRUE(p.ok());
    const auto report = validate(*p);
    EXPECT_TRUE(report.ok()) << report.to_json().dump();
    return executor_->run(*p, report.outputs, "test-" + std::to_string(++prompts_));
  }

  // Runs a prompt on another thread and returns once `node` is executing.
  std::future<executor::prompt_outcome> run_async(const std::string& prompt,
                                                  const std::string& node) {
    auto f = std::async(std::launch::async, [this, prompt] { return run(prompt); });
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < end) {
      for (const auto& e : events_.events()) {
        if (e["type"] == "executing" && e["data"]["node"] == node) return f;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ADD_FAILURE() << "node " << node << " never started";
    return f;
  }

  runtime::worker_info info(const std::string& env) {
    return host_->on_io_thread([&] { return *host_->workers().find(env); });
  }

  // Polls `pred` (run on the io thread) until it holds or `limit` passes.
  template <typename Pred>
  bool eventually(Pred pred, std::chrono::milliseconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      if (host_->on_io_thread(pred)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return host_->on_io_thread(pred);
  }

  // SIGKILLs env's worker and waits for its replacement (a new generation) to be ready.
  bool kill_and_wait_for_replacement(const std::string& env) {
    const auto before = info(env);
    if (::kill(before.pid, SIGKILL) != 0) return false;
    return eventually(
        [&] {
          const auto* w = host_->workers().find(env);
          return w->generation > before.generation && w->state == runtime::worker_state::ready;
        },
        std::chrono::seconds(10));
  }

  fs::path dir_;
  std::size_t children_before_ = 0;
  int prompts_ = 0;
  executor::recording_event_sink events_;
  std::unique_ptr<runtime::host_runtime> host_;
  std::unique_ptr<executor::executor> executor_;
};

}  // namespace orch::runtime_testing
