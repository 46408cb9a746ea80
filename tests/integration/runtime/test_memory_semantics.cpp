// Memory semantics across processes (issue 6), on real workers and the sim device: manager
// resolution and its aliases, plugin injection at the host's level, release mirroring, eviction
// through stand-ins, divergence reports, and the one pinned budget with eight workers.
#include <signal.h>
#include <stdlib.h>

#include <mutex>
#include <set>
#include <sstream>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include "runtime_fixture.hpp"

namespace orch::runtime_testing {
namespace {

using nlohmann::json;
constexpr std::uint64_t mib = 1ull << 20;

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

  ipc::stats_snapshot stats(const std::string& env) {
    return host_->sync([&] {
      const auto* w = host_->workers().find(env);
      ipc::stats_snapshot out{};
      if (w == nullptr || w->state != orchestrator::worker_state::ready) {
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
    host_->sync([&] {
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

// --- Manager resolution ---------------------------------------------------------------------

TEST_F(memory_semantics, the_host_resolves_the_pager_and_every_worker_follows_it) {
  ASSERT_NO_FATAL_FAILURE(start());
  EXPECT_EQ(logs_->count("memory manager: pager (default)"), 1u) << logs_->all();
  for (const auto& w : host_->sync([&] { return host_->workers().workers(); })) {
    EXPECT_EQ(manager_of(w.env), "pager") << w.env;
    EXPECT_EQ(reason_of(w.env), "enabled by ORCH_WORKER_PAGER") << w.env;
  }
  EXPECT_EQ(logs_->count("WARNING"), 0u);
}

TEST_F(memory_semantics, a_packs_env_vars_win_over_the_host_derived_value) {
  deployment_options o;
  o.test_pack_env = "ORCH_WORKER_PAGER = \"off\"\n";
  ASSERT_NO_FATAL_FAILURE(start(o));
  EXPECT_EQ(manager_of(test_env()), "ledger");
  EXPECT_EQ(reason_of(test_env()), "disabled by ORCH_WORKER_PAGER");
  EXPECT_EQ(manager_of(env_of(*host_, "SimSampler")), "pager");
}

TEST_F(memory_semantics, the_comfy_env_alias_is_read_when_the_pack_sets_it) {
  deployment_options o;
  o.test_pack_env = "COMFY_ENV_WORKER_AIMDO = \"0\"\n";
  ASSERT_NO_FATAL_FAILURE(start(o));
  EXPECT_EQ(manager_of(test_env()), "ledger");
  EXPECT_EQ(reason_of(test_env()), "disabled by COMFY_ENV_WORKER_AIMDO");
}

TEST_F(memory_semantics, the_comfy_env_alias_can_enable_the_pager_too) {
  deployment_options o;
  o.test_pack_env = "COMFY_ENV_WORKER_AIMDO = \"1\"\n";
  o.memory_extra = "highvram = true\n";  // the host runs the ledger and would export 0
  ASSERT_NO_FATAL_FAILURE(start(o));
  EXPECT_EQ(logs_->count("memory manager: ledger (disabled by --highvram)"), 1u) << logs_->all();
  EXPECT_EQ(manager_of(test_env()), "pager");
  EXPECT_EQ(reason_of(test_env()), "enabled by COMFY_ENV_WORKER_AIMDO");
  EXPECT_EQ(manager_of(env_of(*host_, "SimSampler")), "ledger");
  EXPECT_EQ(reason_of(env_of(*host_, "SimSampler")), "disabled by ORCH_WORKER_PAGER");
}

TEST_F(memory_semantics, the_operators_shell_wins_over_the_host_value) {
  set_operator_var("ORCH_WORKER_PAGER", "no");
  ASSERT_NO_FATAL_FAILURE(start());
  for (const auto& w : host_->sync([&] { return host_->workers().workers(); })) {
    EXPECT_EQ(reason_of(w.env), "disabled by ORCH_WORKER_PAGER") << w.env;
  }
}

TEST_F(memory_semantics, a_cpu_worker_runs_the_ledger_even_when_told_to_page) {
  deployment_options o;
  o.device = "cpu";
  o.test_pack_env = "ORCH_WORKER_PAGER = \"1\"\n";
  ASSERT_NO_FATAL_FAILURE(start(o));
  EXPECT_EQ(logs_->count("memory manager: ledger (device cpu has no pager)"), 1u) << logs_->all();
  EXPECT_EQ(manager_of(test_env()), "ledger");
  EXPECT_EQ(reason_of(test_env()), "no GPU device in this process");
}

TEST_F(memory_semantics, a_device_runtime_below_the_configured_floor_runs_the_ledger) {
  deployment_options o;
  // The sim device reports runtime 1.0 unless [host.sim] runtime_version says otherwise.
  o.memory_extra = "\n[memory.runtime_floor]\nsim = \"1.1\"\n";
  ASSERT_NO_FATAL_FAILURE(start(o));
  EXPECT_EQ(logs_->count("memory manager: ledger (sim runtime 1.0 is below the floor "
                         "[memory.runtime_floor] sim = \"1.1\")"),
            1u)
      << logs_->all();
  for (const auto& w : host_->sync([&] { return host_->workers().workers(); })) {
    EXPECT_EQ(manager_of(w.env), "ledger") << w.env;
    EXPECT_EQ(reason_of(w.env), "disabled by ORCH_WORKER_PAGER") << w.env;
  }
}

TEST_F(memory_semantics, a_runtime_at_the_floor_keeps_the_pager) {
  deployment_options o;
  o.memory_extra = "\n[memory.runtime_floor]\nsim = \"1.0\"\ncuda = \"99.0\"\n";
  ASSERT_NO_FATAL_FAILURE(start(o));
  EXPECT_EQ(logs_->count("memory manager: pager (default)"), 1u)
      << "only the host backend's own entry applies\n" << logs_->all();
  EXPECT_EQ(manager_of(test_env()), "pager");
}

TEST_F(memory_semantics, enable_dynamic_vram_forces_the_pager_past_the_runtime_floor) {
  deployment_options o;
  o.memory_extra = "enable_dynamic_vram = true\n\n[memory.runtime_floor]\nsim = \"3.2\"\n";
  ASSERT_NO_FATAL_FAILURE(start(o));
  EXPECT_EQ(logs_->count("memory manager: pager (forced by --enable-dynamic-vram)"), 1u)
      << logs_->all();
  EXPECT_EQ(manager_of(test_env()), "pager");
}

TEST_F(memory_semantics, a_pack_on_the_cpu_runs_the_ledger_next_to_pager_workers) {
  deployment_options o;
  o.test_pack_worker = "device = \"cpu\"\n";
  ASSERT_NO_FATAL_FAILURE(start(o));
  EXPECT_EQ(manager_of(test_env()), "ledger");
  EXPECT_EQ(reason_of(test_env()), "no GPU device in this process");
  EXPECT_EQ(manager_of(env_of(*host_, "SimSampler")), "pager");
  EXPECT_TRUE(info(test_env()).settings_match);
  // Its cast buffer is a per-call host buffer: nothing lands on the sim device.
  const auto before = sim_counters();
  EXPECT_EQ(call(test_env(), "TestCast", {{"mib", 16}, {"stream", 0}}, 1)["outputs"][0], 0);
  EXPECT_EQ(sim_counters().used_bytes, before.used_bytes);
  EXPECT_EQ(logs_->count("WARNING " + test_env()), 1u) << "a diverging env, by its device";
}

TEST_F(memory_semantics, a_pager_that_fails_to_start_leaves_the_ledger_with_the_error) {
  ASSERT_NO_FATAL_FAILURE(
      start_with_test_pack_plugins("broken-plugins", "", ORCH_TEST_FAILING_PAGER));
  const auto before = sim_counters();
  EXPECT_EQ(manager_of(test_env()), "ledger");
  EXPECT_NE(reason_of(test_env()).find("pager init failed"), std::string::npos)
      << reason_of(test_env());
  // The ledger worker still serves a cast buffer from its own device, and the failed pager
  // left nothing on the device.
  EXPECT_EQ(call(test_env(), "TestCast", {{"mib", 16}, {"stream", 0}}, 1)["outputs"][0], 0);
  EXPECT_EQ(sim_counters().used_bytes - before.used_bytes, 16 * mib);
}

// --- Plugin injection -------------------------------------------------------------------------

TEST_F(memory_semantics, a_host_at_l4_with_only_an_l2_plugin_gets_the_adapter) {
  ASSERT_NO_FATAL_FAILURE(start_with_test_pack_plugins("l2-plugins", "orch-pager-sim-l2.so"));
  const auto s = stats(test_env());
  EXPECT_EQ(s.memory_manager, ipc::memory_manager_kind::pager);
  EXPECT_EQ(s.plugins[0].level, 2u);
  EXPECT_EQ(std::string(ipc::get_text(s.plugins[0].name)), "sim-pager-l2");
  for (const char* setting : {"simple_headroom", "extra_headroom", "pressure_source",
                              "log_callback"}) {
    EXPECT_EQ(logs_->count(std::string("speaks L2, host speaks L4: dropped ") + setting), 1u)
        << setting << "\n" << logs_->all();
  }
  EXPECT_TRUE(info(test_env()).settings_match);
}

TEST_F(memory_semantics, no_pager_plugin_for_the_backend_gives_the_ledger_with_that_reason) {
  plugin_dir("no-pager", sim_support());
  deployment_options o;
  // Relative to the env's manifest folder, <dir>/packs/ComfyUI-TestNodes/nodes.
  o.test_pack_env = "ORCH_PLUGIN_PATH = \"../../../no-pager\"\n";
  ASSERT_NO_FATAL_FAILURE(start(o));
  EXPECT_EQ(manager_of(test_env()), "ledger");
  EXPECT_EQ(reason_of(test_env()), "no pager plugin for backend sim");
}

TEST_F(memory_semantics, a_pack_plugin_that_crashes_when_loaded_is_read_outside_the_host) {
  // The pack's directory holds a library whose constructor aborts: loading it in the host would
  // end the host. The probe process dies instead, and the pack's worker runs the ledger.
  ASSERT_NO_FATAL_FAILURE(start_with_test_pack_plugins("crashing", "", ORCH_TEST_CRASHING_PLUGIN));
  EXPECT_EQ(manager_of(test_env()), "ledger");
  EXPECT_EQ(reason_of(test_env()), "the plugins of its ORCH_PLUGIN_PATH could not be read");
  EXPECT_EQ(logs_->count("killed by SIGABRT (a plugin's constructor crashed?); its worker runs "
                         "the ledger without the pack's plugins"),
            1u)
      << logs_->all();
  EXPECT_EQ(manager_of(env_of(*host_, "SimSampler")), "pager") << "other packs are unaffected";
}

TEST_F(memory_semantics, a_pack_plugin_that_hangs_when_loaded_is_given_up_on_in_time) {
  auto built = sim_support();
  deployment_options o;
  o.handshake_timeout = "1s";
  o.heartbeat_interval = "100ms";
  o.test_pack_env = "ORCH_PLUGIN_PATH = \"" +
                    plugin_dir("hanging", built, {ORCH_TEST_HANGING_PLUGIN}).string() + "\"\n";
  const auto begun = std::chrono::steady_clock::now();
  ASSERT_NO_FATAL_FAILURE(start(o));
  EXPECT_LT(std::chrono::steady_clock::now() - begun, std::chrono::seconds(5));
  EXPECT_EQ(manager_of(test_env()), "ledger");
  EXPECT_EQ(logs_->count("no answer within 1000 ms"), 1u) << logs_->all();
  EXPECT_EQ(logs_->count("did not complete its handshake"), 0u)
      << "no worker's handshake deadline runs during the probe\n" << logs_->all();
  EXPECT_EQ(manager_of(env_of(*host_, "SimSampler")), "pager");
}

TEST_F(memory_semantics, a_version_difference_is_a_note_and_no_fallback) {
  ASSERT_NO_FATAL_FAILURE(start_with_test_pack_plugins("other-build", "orch-pager-sim-l3l4.so"));
  const auto s = stats(test_env());
  EXPECT_EQ(s.memory_manager, ipc::memory_manager_kind::pager);
  EXPECT_EQ(s.plugins[0].level, 4u);
  EXPECT_EQ(logs_->count("NOTE " + test_env() + ": pager sim-pager-l3l4"), 1u) << logs_->all();
  EXPECT_EQ(logs_->count("versions differ, protocol level L4 matches; proceeding"), 1u);
  EXPECT_EQ(logs_->count("WARNING"), 0u);
}

TEST_F(memory_semantics, every_worker_applies_the_settings_the_host_sent) {
  deployment_options o;
  o.test_pack_env = "ORCH_WORKER_PAGER = \"0\"\n";
  ASSERT_NO_FATAL_FAILURE(start(o));
  for (const auto& w : host_->sync([&] { return host_->workers().workers(); })) {
    EXPECT_TRUE(w.settings_match) << w.env;
    EXPECT_NE(stats(w.env).settings_hash, 0u);
  }
  EXPECT_NE(stats(test_env()).settings_hash, stats(env_of(*host_, "SimSampler")).settings_hash)
      << "a ledger worker applies no pager settings";
}

TEST_F(memory_semantics, a_worker_that_runs_other_settings_shows_as_a_mismatch) {
  // The pack's own plugin build has no allocator: its worker runs without the offload streams
  // the host sent, and its published hash says so.
  const fs::path dir =
      plugin_dir("no-allocator", {"orch-backend-sim.so", "orch-pager-sim.so", "orch-ledger-sim.so"});
  deployment_options o;
  o.test_pack_env = "ORCH_PLUGIN_PATH = \"" + dir.string() + "\"\n";
  ASSERT_NO_FATAL_FAILURE(start(o));
  EXPECT_FALSE(info(test_env()).settings_match);
  EXPECT_TRUE(info(env_of(*host_, "SimSampler")).settings_match);
  EXPECT_EQ(logs_->count("worker " + test_env() + ": applied memory settings hash"), 1u)
      << logs_->all();
}

// --- Release mirroring -----------------------------------------------------------------------

TEST_F(memory_semantics, a_pager_workers_cast_buffers_and_pins_are_zero_after_every_node) {
  ASSERT_NO_FATAL_FAILURE(start());
  const std::string env = test_env();
  std::uint64_t releases = stats(env).boundary_releases;
  for (int fail : {0, 1, 0, 1}) {
    const json r = call(env, "TestPinAndCast", {{"mib", 8}, {"fail", fail}}, 1);
    EXPECT_EQ(r["status"], fail ? "error" : "ok");
    const auto s = stats(env);
    EXPECT_EQ(s.cast_buffer_bytes, 0u) << "fail=" << fail;
    EXPECT_EQ(s.device_pinned_bytes, 0u) << "fail=" << fail;
    EXPECT_GE(s.cast_buffer_high_water, 8 * mib);
    EXPECT_EQ(s.boundary_releases, ++releases);
    EXPECT_GT(s.last_boundary_release_ns, 0u);
  }
  EXPECT_EQ(stats(env).pager_resident_bytes, 8 * mib) << "the model stays; only pins go";
}

TEST_F(memory_semantics, a_ledger_workers_cast_buffers_stay_within_one_prompt_and_reset_at_the_next) {
  deployment_options o;
  o.test_pack_env = "ORCH_WORKER_PAGER = \"0\"\n";
  ASSERT_NO_FATAL_FAILURE(start(o));
  const std::string env = test_env();
  const std::uint64_t streams = 2;
  // Three prompts; within each the largest cast is 32 MiB on either stream.
  const std::vector<std::vector<std::pair<int, int>>> prompts = {
      {{32, 0}, {16, 1}, {32, 1}}, {{16, 0}, {16, 1}}, {{32, 0}, {32, 1}, {16, 0}}};
  std::uint64_t epoch = 100;
  for (const auto& casts : prompts) {
    ++epoch;
    std::uint64_t largest = 0;
    bool first = true;
    for (const auto& [size, stream] : casts) {
      EXPECT_EQ(call(env, "TestCast", {{"mib", size}, {"stream", stream}}, epoch)["outputs"][0], 0);
      largest = std::max<std::uint64_t>(largest, static_cast<std::uint64_t>(size) * mib);
      const auto s = stats(env);
      EXPECT_LE(s.cast_buffer_bytes, streams * largest) << "epoch " << epoch;
      if (first) {
        // The first call of a prompt released the previous prompt's buffers before it ran.
        EXPECT_EQ(s.cast_buffer_bytes, static_cast<std::uint64_t>(size) * mib) << epoch;
      }
      first = false;
    }
  }
  EXPECT_EQ(stats(env).boundary_releases, 3u) << "one release per prompt";
}

TEST_F(memory_semantics, a_missing_epoch_resets_on_every_call) {
  deployment_options o;
  o.test_pack_env = "ORCH_WORKER_PAGER = \"0\"\n";
  ASSERT_NO_FATAL_FAILURE(start(o));
  const std::string env = test_env();
  for (const auto& [size, stream] : std::vector<std::pair<int, int>>{{32, 0}, {16, 1}, {16, 0}}) {
    call(env, "TestCast", {{"mib", size}, {"stream", stream}}, std::nullopt);
    EXPECT_EQ(stats(env).cast_buffer_bytes, static_cast<std::uint64_t>(size) * mib);
  }
  EXPECT_EQ(stats(env).boundary_releases, 3u);
}

// --- Eviction through stand-ins --------------------------------------------------------------

constexpr const char* load_and_sample = R"({
  "1": {"class_type": "SolidImage", "inputs": {"width": 16, "height": 8, "value": 0.5}},
  "2": {"class_type": "SimLoadModel", "inputs": {"size_mib": 256, "layers": 8}},
  "3": {"class_type": "SimSampler", "inputs": {"model": ["2", 0], "latent": ["1", 0], "steps": 1}},
  "4": {"class_type": "ImageChecksum", "inputs": {"image": ["3", 0]}}
})";

TEST_F(memory_semantics, a_host_eviction_through_a_stand_in_frees_the_workers_bytes) {
  deployment_options o;
  o.capacity = "1GiB";
  ASSERT_NO_FATAL_FAILURE(start(o));
  ASSERT_TRUE(run(load_and_sample).ok);
  const std::string env = env_of(*host_, "SimSampler");
  const std::string id = env + "/sim-model-256mib-8l";
  const auto resident = host_->sync([&] { return host_->stand_ins().find(id)->resident; });
  EXPECT_EQ(resident, 256 * mib);
  // More than the device holds (1 GiB): nobody is evicted for a load that can never fit.
  EXPECT_TRUE(host_->free_through_stand_ins(env, 2048 * mib).empty());
  EXPECT_EQ(host_->sync([&] { return host_->stand_ins().find(id)->resident; }), resident);
  const auto before = sim_counters();
  std::uint64_t free_before = 0;
  host_->sync([&] {
    auto* dev = host_->memory().backend();
    dev->api().mem_get_info(dev->device(), &free_before, nullptr);
  });
  // Ask for 64 MiB more than is free: the sampler's stand-in is the only candidate.
  const auto steps = host_->free_through_stand_ins(env, free_before + 64 * mib);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].id, id);
  EXPECT_EQ(steps[0].asked, 64 * mib);
  const auto after = sim_counters();
  // The receipt is what the device itself counts as given back.
  EXPECT_EQ(steps[0].freed, before.used_bytes - after.used_bytes);
  EXPECT_GE(steps[0].freed, 64 * mib);
  EXPECT_EQ(host_->sync([&] { return host_->stand_ins().find(id)->resident; }),
            resident - steps[0].freed);
}

TEST_F(memory_semantics, only_stand_ins_on_the_host_device_make_room_and_only_for_a_load_there) {
  deployment_options o;
  o.capacity = "1GiB";
  o.sampler_pack_worker = "device = \"cpu\"\n";  // its model lives in host memory
  ASSERT_NO_FATAL_FAILURE(start(o));
  ASSERT_TRUE(run(load_and_sample).ok);
  const std::string sampler = env_of(*host_, "SimSampler");
  ASSERT_NE(host_->sync([&] { return host_->stand_ins().find(sampler + "/sim-model-256mib-8l"); }),
            nullptr)
      << "the cpu pack's model has a stand-in";
  std::uint64_t free_now = 0;
  host_->sync([&] {
    auto* dev = host_->memory().backend();
    dev->api().mem_get_info(dev->device(), &free_now, nullptr);
  });
  const auto before = sim_counters();
  // A sim load short of 64 MiB: the cpu model is no candidate, as unloading it frees no device
  // byte.
  EXPECT_TRUE(host_->free_through_stand_ins(test_env(), free_now + 64 * mib).empty());
  // A load on the cpu: the host cannot poll that device, so it evicts nothing for it.
  EXPECT_TRUE(host_->free_through_stand_ins(sampler, 64 * mib).empty());
  EXPECT_EQ(logs_->count("env " + sampler + " runs on cpu, not on the host's device sim"), 1u)
      << logs_->all();
  EXPECT_EQ(sim_counters().used_bytes, before.used_bytes);
  EXPECT_NE(host_->sync([&] { return host_->stand_ins().find(sampler + "/sim-model-256mib-8l"); }),
            nullptr);
}

TEST_F(memory_semantics, a_models_report_older_than_the_last_one_applied_changes_nothing) {
  ASSERT_NO_FATAL_FAILURE(start());
  ASSERT_TRUE(run(load_and_sample).ok);
  const std::string env = env_of(*host_, "SimSampler");
  const std::string id = env + "/sim-model-256mib-8l";
  const auto seq = host_->sync([&] { return host_->stand_ins().find(id)->receipt_seq; });
  ASSERT_GT(seq, 0u);
  // A late report of "no models" from before the load must not drop the stand-in...
  host_->sync([&] { host_->update_stand_ins(env, json::array(), seq - 1); });
  EXPECT_NE(host_->sync([&] { return host_->stand_ins().find(id); }), nullptr);
  // ... nor may a repeat of the newest one; a newer one is applied.
  host_->sync([&] { host_->update_stand_ins(env, json::array(), seq); });
  EXPECT_NE(host_->sync([&] { return host_->stand_ins().find(id); }), nullptr);
  host_->sync([&] { host_->update_stand_ins(env, json::array(), seq + 1); });
  EXPECT_EQ(host_->sync([&] { return host_->stand_ins().find(id); }), nullptr);
}

TEST_F(memory_semantics, free_is_broadcast_and_every_worker_answers_with_a_receipt) {
  ASSERT_NO_FATAL_FAILURE(start());
  ASSERT_TRUE(run(load_and_sample).ok);
  const auto before = sim_counters();
  const auto receipts = host_->free_all(/*unload_models=*/true, /*drop_caches=*/true);
  EXPECT_EQ(receipts.size(), 3u);
  std::uint64_t freed = 0;
  for (const auto& [env, r] : receipts) {
    ASSERT_TRUE(r.ok()) << env;
    freed += (*r)["freed"].get<std::uint64_t>();
    EXPECT_EQ((*r)["resident"], 0u) << env;
  }
  EXPECT_EQ(freed, before.used_bytes - sim_counters().used_bytes);
  EXPECT_GE(freed, 256 * mib);
}

TEST_F(memory_semantics, a_ledger_worker_unloads_its_own_older_model_before_it_asks_the_host) {
  deployment_options o;
  o.capacity = "1GiB";
  o.sampler_pack_env = "ORCH_WORKER_PAGER = \"0\"\n";
  ASSERT_NO_FATAL_FAILURE(start(o));
  auto prompt = [](int size_mib) {
    return std::string(R"({"1": {"class_type": "SolidImage", "inputs": {"width": 4, "height": 4, "value": 0.5}},
      "2": {"class_type": "SimLoadModel", "inputs": {"size_mib": )") +
           std::to_string(size_mib) + R"(, "layers": 4}},
      "3": {"class_type": "SimSampler", "inputs": {"model": ["2", 0], "latent": ["1", 0], "steps": 1}},
      "4": {"class_type": "ImageChecksum", "inputs": {"image": ["3", 0]}}})";
  };
  ASSERT_TRUE(run(prompt(600)).ok);
  const auto outcome = run(prompt(592));
  ASSERT_TRUE(outcome.ok) << outcome.error->dump();
  const std::string env = env_of(*host_, "SimSampler");
  EXPECT_EQ(stats(env).ledger_loaded_bytes, 592 * mib) << "the 600 MiB model was unloaded";
  EXPECT_EQ(logs_->count("through stand-ins"), 0u) << "the worker made room itself";
}

// --- Divergence reports ----------------------------------------------------------------------

TEST_F(memory_semantics, the_warning_is_said_once_per_env_and_again_after_a_replacement) {
  deployment_options o;
  o.test_pack_env = "ORCH_WORKER_PAGER = \"0\"\n";
  ASSERT_NO_FATAL_FAILURE(start(o));
  const std::string env = test_env();
  const std::string warning = "WARNING " + env + ": memory manager=ledger, host=pager";
  EXPECT_EQ(logs_->count(warning), 1u) << logs_->all();
  EXPECT_EQ(logs_->count("ORCH_DIVERGENCE_ACK=1"), 1u);
  call(env, "TestEmpty", json::object(), 1);
  call(env, "TestEmpty", json::object(), 2);
  EXPECT_EQ(logs_->count(warning), 1u) << "not again on the next prompt";
  ASSERT_TRUE(kill_and_wait_for_replacement(env));
  EXPECT_EQ(logs_->count(warning), 2u) << "again for the replacement";
}

TEST_F(memory_semantics, an_acknowledged_divergence_is_only_the_routine_line_under_debug) {
  set_operator_var("ORCH_DEBUG_WORKER", "1");
  deployment_options o;
  o.test_pack_env = "ORCH_WORKER_PAGER = \"0\"\nORCH_DIVERGENCE_ACK = \"1\"\n";
  ASSERT_NO_FATAL_FAILURE(start(o));
  EXPECT_EQ(logs_->count("WARNING"), 0u);
  EXPECT_EQ(logs_->count(test_env() + ": memory manager=ledger (disabled by ORCH_WORKER_PAGER)"),
            1u)
      << logs_->all();
}

TEST_F(memory_semantics, a_falsy_acknowledgement_does_not_silence_the_warning) {
  set_operator_var("ORCH_DIVERGENCE_ACK", "0");  // the shell: present, but says no
  deployment_options o;
  o.test_pack_env = "ORCH_WORKER_PAGER = \"0\"\n";
  o.sampler_pack_env = "ORCH_WORKER_PAGER = \"0\"\nORCH_DIVERGENCE_ACK = \" off \"\n";
  ASSERT_NO_FATAL_FAILURE(start(o));
  EXPECT_EQ(logs_->count("WARNING " + test_env() + ":"), 1u) << logs_->all();
  EXPECT_EQ(logs_->count("WARNING " + env_of(*host_, "SimSampler") + ":"), 1u) << logs_->all();
}

// --- The one pinned budget ---------------------------------------------------------------------

TEST_F(memory_semantics, eight_workers_never_promise_more_than_one_pinned_budget) {
  // Eight packs of the test library, each asking for a third of the budget to pin and keep.
  std::string paths;
  for (int i = 0; i < 8; ++i) {
    const std::string pack = "packs/Pack" + std::to_string(i);
    write(dir_ / pack / "nodes/comfy-env.toml",
          "[worker]\nlibrary = \"liborch_pack_test_nodes.so\"\n");
    paths += (i ? ", \"" : "\"") + pack + "\"";
  }
  write(dir_ / "d.toml", "[host]\ndevice = \"sim\"\n\n[plugins]\nsearch_paths = [\"" +
                             std::string(ORCH_TEST_PLUGIN_DIR) + "\"]\n\n[packs]\npaths = [" +
                             paths + "]\nlibrary_paths = [\"" + ORCH_TEST_PACKS_DIR +
                             "\"]\n\n[shm]\npinned_pool_size = \"16MiB\"\n");
  ASSERT_NO_FATAL_FAILURE(start_file(dir_ / "d.toml"));
  const auto workers = host_->sync([&] { return host_->workers().workers(); });
  ASSERT_EQ(workers.size(), 8u);
  const std::uint64_t budget = host_->sync([&] { return host_->memory().budget_bytes(); });
  const std::int64_t third_mib = static_cast<std::int64_t>(budget / 3 / mib);
  int refused = 0;
  for (const auto& w : workers) {
    ASSERT_EQ(w.state, orchestrator::worker_state::ready);
    const json r = call(w.env, "TestSleep", {{"ms", 0}, {"pin_mib", third_mib}}, 1);
    refused += r["status"] == "error" ? 1 : 0;
    const std::uint64_t sum = host_->sync([&] {
      std::uint64_t total = 0;
      auto& control = host_->memory().control();
      for (std::uint32_t s = 0; s < control.slot_count(); ++s) {
        total += control.claimed_reserved(s);
      }
      return total;
    });
    EXPECT_LE(sum, budget);
  }
  EXPECT_GE(refused, 5) << "at most two thirds-of-the-budget pins fit next to the pool";
}

}  // namespace
}  // namespace orch::runtime_testing

namespace orch::runtime_testing {
namespace {

// The example of issue 6 end to end through the CLI: examples/sim-pressure-deployment.toml with
// its plugin and library paths pointed at this build, run by `comfy-orch run --json --free-after`.
TEST(memory_semantics_example, the_pressure_example_shows_every_behaviour_it_documents) {
  char tmpl[] = "/tmp/orch-example-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path dir = tmpl;
  const fs::path examples = fs::path(ORCH_SOURCE_DIR) / "examples";
  std::ifstream in(examples / "sim-pressure-deployment.toml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto replace = [&text](const std::string& from, const std::string& to) {
    const auto at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  };
  replace("\"../build/plugins/lib\"", "\"" + std::string(ORCH_TEST_PLUGIN_DIR) + "\"");
  replace("\"../build/examples\"", "\"" + std::string(ORCH_TEST_EXAMPLES_LIB_DIR) + "\"");
  for (const char* pack : {"ComfyUI-ImageOps", "ComfyUI-SimSampler", "ComfyUI-LegacySampler"}) {
    replace(std::string("\"packs/") + pack + "\"", "\"" + (examples / "packs" / pack).string() + "\"");
  }
  std::ofstream(dir / "deployment.toml") << text;
  const std::string cmd = std::string(ORCH_TEST_COMFY_ORCH) + " run " +
                          (dir / "deployment.toml").string() + " --prompt " +
                          (examples / "prompts/two-managers.json").string() +
                          " --json --free-after 2>" + (dir / "log.txt").string();
  FILE* out = ::popen(cmd.c_str(), "r");
  ASSERT_NE(out, nullptr);
  std::string stdout_text;
  char buffer[4096];
  while (std::size_t n = std::fread(buffer, 1, sizeof buffer, out)) stdout_text.append(buffer, n);
  const int status = ::pclose(out);
  std::ifstream log_in(dir / "log.txt");
  const std::string log((std::istreambuf_iterator<char>(log_in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(WEXITSTATUS(status), 0) << stdout_text << log;

  nlohmann::json table, receipts;
  bool success = false;
  std::istringstream lines(stdout_text);
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    if (j["type"] == "memory_table") table = j["data"];
    if (j["type"] == "free") receipts = j["data"];
    if (j["type"] == "execution_success") success = true;
  }
  EXPECT_TRUE(success) << stdout_text;
  // The WARNING, once, for the pack that pins the ledger.
  EXPECT_NE(log.find("WARNING legacysampler-nodes: memory manager=ledger, host=pager"),
            std::string::npos)
      << log;
  // Eviction through a stand-in, then the node once more.
  EXPECT_NE(log.find("through its stand-in"), std::string::npos) << log;
  EXPECT_NE(log.find("freed through stand-ins, retrying"), std::string::npos) << log;
  // Node-boundary releases.
  EXPECT_NE(log.find("node boundary: released"), std::string::npos) << log;
  // A mixed run in the table, and the pinned reservations within one budget.
  ASSERT_TRUE(table.is_array()) << stdout_text;
  std::uint64_t pinned = 0, budget = 0;
  std::set<std::string> managers;
  for (const auto& row : table) {
    pinned += row["pinned_reserved_bytes"].get<std::uint64_t>();
    budget = row["budget_bytes"].get<std::uint64_t>();
    if (row["mode"] == "worker") {
      managers.insert(row["manager"].get<std::string>());
      EXPECT_TRUE(row["settings_match"].get<bool>()) << row.dump();
      EXPECT_GE(row["boundary_releases"].get<std::uint64_t>(), 1u) << row.dump();
    }
  }
  EXPECT_EQ(managers, (std::set<std::string>{"pager", "ledger"}));
  EXPECT_LE(pinned, budget);
  // --free-after: every worker answered, and the two samplers gave their models back.
  ASSERT_TRUE(receipts.is_object()) << stdout_text;
  EXPECT_EQ(receipts.size(), 3u);
  EXPECT_GT(receipts["simsampler-nodes"]["freed"].get<std::uint64_t>(), 0u);
  EXPECT_GT(receipts["legacysampler-nodes"]["freed"].get<std::uint64_t>(), 0u);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace orch::runtime_testing
