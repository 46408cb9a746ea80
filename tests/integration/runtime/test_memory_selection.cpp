// Memory semantics across processes, on real workers and the sim device: which weight manager
// each worker runs (the host's resolution, its aliases and overrides, the fallbacks to the
// ledger) and which plugins it gets (adapters, probing a pack's plugins outside the host, the
// settings each worker applies). docs/memory-semantics.md.
#include "memory_semantics_fixture.hpp"

namespace orch::runtime_testing {
namespace {

using nlohmann::json;

// --- Manager resolution ---------------------------------------------------------------------

TEST_F(memory_semantics, the_host_resolves_the_pager_and_every_worker_follows_it) {
  ASSERT_NO_FATAL_FAILURE(start());
  EXPECT_EQ(logs_->count("memory manager: pager (default)"), 1u) << logs_->all();
  for (const auto& w : host_->on_io_thread([&] { return host_->workers().workers(); })) {
    EXPECT_EQ(manager_of(w.env), "pager") << w.env;
    EXPECT_EQ(reason_of(w.env), "enabled by ORCH_WORKER_PAGER") << w.env;
  }
  EXPECT_EQ(logs_->count("WARNING"), 0u);
}

// A real GPU has no per-device cap on processes; the sim device must not invent one. Each worker
// attaches its allocator and its pager to the device, so 64 workers hold well over 128 slots.
TEST_F(memory_semantics, sixty_four_workers_on_the_sim_device_all_run_the_pager) {
  constexpr int workers_wanted = 64;
  ASSERT_NO_FATAL_FAILURE(start_test_library_packs(workers_wanted));
  const auto workers = host_->on_io_thread([&] { return host_->workers().workers(); });
  ASSERT_EQ(workers.size(), static_cast<std::size_t>(workers_wanted));
  int paging = 0;
  for (const auto& w : workers) {
    ASSERT_EQ(w.state, runtime::worker_state::ready) << w.env;
    EXPECT_EQ(manager_of(w.env), "pager") << w.env << ": " << reason_of(w.env);
    paging += manager_of(w.env) == "pager" ? 1 : 0;
  }
  EXPECT_EQ(paging, workers_wanted);
  EXPECT_EQ(logs_->count("NO_SLOT"), 0u) << logs_->all();
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
  for (const auto& w : host_->on_io_thread([&] { return host_->workers().workers(); })) {
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
  for (const auto& w : host_->on_io_thread([&] { return host_->workers().workers(); })) {
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
  for (const auto& w : host_->on_io_thread([&] { return host_->workers().workers(); })) {
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

}  // namespace
}  // namespace orch::runtime_testing
