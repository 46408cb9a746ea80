// Memory semantics across processes, on real workers and the sim device: how releases are
// mirrored (cast buffers and pins after every node, epochs) and how the host evicts memory that
// lives in a worker through its stand-ins. docs/memory-semantics.md.
#include <algorithm>

#include "memory_semantics_fixture.hpp"

namespace orch::runtime_testing {
namespace {

using nlohmann::json;

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
  const auto resident = host_->on_io_thread([&] { return host_->stand_ins().find(id)->resident; });
  EXPECT_EQ(resident, 256 * mib);
  // More than the device holds (1 GiB): nobody is evicted for a load that can never fit.
  EXPECT_TRUE(host_->free_through_stand_ins(env, 2048 * mib).empty());
  EXPECT_EQ(host_->on_io_thread([&] { return host_->stand_ins().find(id)->resident; }), resident);
  const auto before = sim_counters();
  std::uint64_t free_before = 0;
  host_->on_io_thread([&] {
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
  EXPECT_EQ(host_->on_io_thread([&] { return host_->stand_ins().find(id)->resident; }),
            resident - steps[0].freed);
}

TEST_F(memory_semantics, only_stand_ins_on_the_host_device_make_room_and_only_for_a_load_there) {
  deployment_options o;
  o.capacity = "1GiB";
  o.sampler_pack_worker = "device = \"cpu\"\n";  // its model lives in host memory
  ASSERT_NO_FATAL_FAILURE(start(o));
  ASSERT_TRUE(run(load_and_sample).ok);
  const std::string sampler = env_of(*host_, "SimSampler");
  ASSERT_NE(host_->on_io_thread(
                [&] { return host_->stand_ins().find(sampler + "/sim-model-256mib-8l"); }),
            nullptr)
      << "the cpu pack's model has a stand-in";
  std::uint64_t free_now = 0;
  host_->on_io_thread([&] {
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
  EXPECT_NE(host_->on_io_thread(
                [&] { return host_->stand_ins().find(sampler + "/sim-model-256mib-8l"); }),
            nullptr);
}

TEST_F(memory_semantics, a_models_report_older_than_the_last_one_applied_changes_nothing) {
  ASSERT_NO_FATAL_FAILURE(start());
  ASSERT_TRUE(run(load_and_sample).ok);
  const std::string env = env_of(*host_, "SimSampler");
  const std::string id = env + "/sim-model-256mib-8l";
  const auto seq = host_->on_io_thread([&] { return host_->stand_ins().find(id)->receipt_seq; });
  ASSERT_GT(seq, 0u);
  // A late report of "no models" from before the load must not drop the stand-in...
  host_->on_io_thread([&] { host_->update_stand_ins(env, json::array(), seq - 1); });
  EXPECT_NE(host_->on_io_thread([&] { return host_->stand_ins().find(id); }), nullptr);
  // ... nor may a repeat of the newest one; a newer one is applied.
  host_->on_io_thread([&] { host_->update_stand_ins(env, json::array(), seq); });
  EXPECT_NE(host_->on_io_thread([&] { return host_->stand_ins().find(id); }), nullptr);
  host_->on_io_thread([&] { host_->update_stand_ins(env, json::array(), seq + 1); });
  EXPECT_EQ(host_->on_io_thread([&] { return host_->stand_ins().find(id); }), nullptr);
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

}  // namespace
}  // namespace orch::runtime_testing
