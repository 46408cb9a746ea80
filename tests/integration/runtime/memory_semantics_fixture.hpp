// The fixture of the memory-semantics tests (docs/memory-semantics.md): a host on real workers
// and the sim device, with every line it logs captured, operator variables set per test, and
// helpers to read a worker's stats block, call a node and lay out plugin directories.
//
// It lives outside an anonymous namespace so that it is one type in every file that uses it:
// GoogleTest then files their tests under the one suite, memory_semantics.
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include "runtime_fixture.hpp"

namespace orch::runtime_testing {

inline constexpr std::uint64_t mib = 1ull << 20;

// Every line the host logs while it lives (the host's logger is the default one).
class log_capture : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::size_t count(const std::string& needle) {
    std::lock_guard lock(this->mutex_);
    std::size_t n = 0;
    for (const auto& l : lines_) n += l.find(needle) != std::string::npos ? 1 : 0;
    return n;
  }
  std::string all() {
    std::lock_guard lock(this->mutex_);
    std::string out;
    for (const auto& l : lines_) out += l + "\n";
    return out;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    lines_.emplace_back(msg.payload.data(), msg.payload.size());
  }
  void flush_() override {}

 private:
  std::vector<std::string> lines_;
};

class memory_semantics : public runtime_test {
 protected:
  using json = nlohmann::json;

  void SetUp() override {
    runtime_test::SetUp();
    logs_ = std::make_shared<log_capture>();
    spdlog::default_logger()->sinks().push_back(logs_);
  }
  void TearDown() override {
    runtime_test::TearDown();
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), logs_), sinks.end());
    for (const auto& name : set_vars_) ::unsetenv(name.c_str());
  }
  // An operator variable for this test only (the host reads its environment at start).
  void set_operator_var(const std::string& name, const std::string& value) {
    ::setenv(name.c_str(), value.c_str(), 1);
    set_vars_.push_back(name);
  }

  std::string test_env() { return env_of(*host_, "TestCast"); }

  // Starts a host on the sim device over `count` packs of the native test library, one env
  // each; `extra` is appended to the deployment.
  void start_test_library_packs(int count, const std::string& extra = "") {
    std::string paths;
    for (int i = 0; i < count; ++i) {
      const std::string pack = "packs/Pack" + std::to_string(i);
      write(dir_ / pack / "nodes/comfy-env.toml",
            "[worker]\nlibrary = \"liborch_pack_test_nodes.so\"\n");
      paths += (i ? ", \"" : "\"") + pack + "\"";
    }
    write(dir_ / "d.toml", "[host]\ndevice = \"sim\"\n\n[plugins]\nsearch_paths = [\"" +
                               std::string(ORCH_TEST_PLUGIN_DIR) + "\"]\n\n[packs]\npaths = [" +
                               paths + "]\nlibrary_paths = [\"" + ORCH_TEST_PACKS_DIR + "\"]\n" +
                               extra);
    start_file(dir_ / "d.toml");
  }

  ipc::stats_snapshot stats(const std::string& env) {
    return host_->on_io_thread([&] {
      const auto* w = host_->workers().find(env);
      ipc::stats_snapshot out{};
      if (w == nullptr || w->state != runtime::worker_state::ready) {
        ADD_FAILURE() << "env " << env << " has no ready worker";
        return out;
      }
      auto s = host_->memory().control().block(w->slot).read();
      EXPECT_TRUE(s.ok());
      return s ? *s : out;
    });
  }
  std::string manager_of(const std::string& env) {
    const auto s = stats(env);
    return s.memory_manager == ipc::memory_manager_kind::pager ? "pager" : "ledger";
  }
  std::string reason_of(const std::string& env) {
    return std::string(ipc::get_text(stats(env).memory_manager_reason));
  }

  // One node call on `env`, straight through the router (no prompt): `epoch` absent when null.
  json call(const std::string& env, const std::string& class_type, json inputs,
            std::optional<std::uint64_t> epoch) {
    json body{{"node", "n" + std::to_string(++calls_)}, {"class_type", class_type},
              {"inputs", std::move(inputs)}};
    if (epoch) body["epoch"] = *epoch;
    std::promise<result<json>> done;
    auto f = done.get_future();
    host_->on_io_thread([&] {
      host_->workers().call(env, body, [&done](result<json> r) { done.set_value(std::move(r)); });
    });
    auto r = f.get();
    EXPECT_TRUE(r.ok()) << (r ? "" : r.err().message);
    return r ? *r : json();
  }

  // A plugin directory holding links to the built plugins named, plus `extra` files.
  fs::path plugin_dir(const std::string& name, const std::vector<std::string>& built,
                      const std::vector<fs::path>& extra = {}) {
    const fs::path d = dir_ / name;
    fs::create_directories(d);
    for (const auto& file : built) {
      fs::create_symlink(fs::path(ORCH_TEST_PLUGIN_DIR) / file, d / file);
    }
    for (const auto& file : extra) fs::create_symlink(file, d / file.filename());
    return d;
  }
  static std::vector<std::string> sim_support() {
    return {"orch-backend-sim.so", "orch-allocator-sim.so", "orch-ledger-sim.so"};
  }
  // Starts a host whose test pack has its own plugin directory: the sim backend, allocator and
  // ledger, plus the built plugin `pager` (a file name) or the file `pager_file`.
  void start_with_test_pack_plugins(const std::string& name, const std::string& pager,
                                    const fs::path& pager_file = {}) {
    auto built = sim_support();
    if (!pager.empty()) built.push_back(pager);
    std::vector<fs::path> extra;
    if (!pager_file.empty()) extra.push_back(pager_file);
    deployment_options o;
    o.test_pack_env = "ORCH_PLUGIN_PATH = \"" + plugin_dir(name, built, extra).string() + "\"\n";
    start(o);
  }

  std::shared_ptr<log_capture> logs_;
  std::vector<std::string> set_vars_;
  int calls_ = 0;
};

}  // namespace orch::runtime_testing
