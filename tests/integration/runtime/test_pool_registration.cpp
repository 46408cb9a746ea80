// Every process registers the pinned pool's segments with its device through the backend plugin
// (docs/shared-memory.md): on sim the device counts each registration, so these
// tests see the host's and each worker's, and that they end with the process.
#include <signal.h>

#include "runtime_fixture.hpp"

namespace orch::runtime_testing {
namespace {

class pool_registration : public runtime_test {
 protected:
  std::vector<runtime::worker_info> ready_workers() {
    auto all = host_->on_io_thread([&] { return host_->workers().workers(); });
    std::erase_if(all, [](const auto& w) { return w.state != runtime::worker_state::ready; });
    return all;
  }
};

TEST_F(pool_registration, the_host_and_every_worker_register_the_pool_once) {
  ASSERT_NO_FATAL_FAILURE(start());
  const auto workers = ready_workers();
  ASSERT_EQ(workers.size(), 3u);
  const auto c = sim_counters();
  const std::uint64_t per_process = c.process_registered_bytes;  // the host's own registration
  EXPECT_GE(per_process, 64ull << 20);
  EXPECT_EQ(c.host_registrations, 1u + workers.size());
  EXPECT_EQ(c.registered_bytes, per_process * (1 + workers.size()));
  EXPECT_EQ(c.host_unregistrations, 0u);
}

TEST_F(pool_registration, workers_unregister_before_they_exit) {
  ASSERT_NO_FATAL_FAILURE(start());
  const std::uint64_t per_process = sim_counters().process_registered_bytes;
  host_->shutdown(std::chrono::seconds(5));
  const auto c = sim_counters();
  EXPECT_EQ(c.host_unregistrations, 3u);
  EXPECT_EQ(c.registered_bytes, per_process) << "only the host's registration is left";
}

TEST_F(pool_registration, a_killed_workers_registration_ends_with_it) {
  ASSERT_NO_FATAL_FAILURE(start());
  const std::uint64_t per_process = sim_counters().process_registered_bytes;
  const std::string env = env_of(*host_, "SimSampler");
  ASSERT_TRUE(kill_and_wait_for_replacement(env));
  // The replacement registered anew; the dead process's range was dropped with its slot, never
  // unregistered by anyone.
  const auto c = sim_counters();
  EXPECT_EQ(c.host_registrations, 5u);
  EXPECT_EQ(c.host_unregistrations, 0u);
  EXPECT_EQ(c.registered_bytes, per_process * 4);
}

TEST_F(pool_registration, pinning_turned_off_registers_nothing) {
  deployment_options o;
  o.pinned_memory = false;
  o.test_pack_env = "ORCH_WORKER_PAGER = \"0\"\n";  // a ledger worker still needs its device
  ASSERT_NO_FATAL_FAILURE(start(o));
  ASSERT_EQ(ready_workers().size(), 3u);
  const auto c = sim_counters();
  EXPECT_EQ(c.host_registrations, 0u);
  EXPECT_EQ(c.registered_bytes, 0u);
  // The ledger worker's cast buffer comes from its own device, opened without registering.
  const std::string env = env_of(*host_, "TestCast");
  std::promise<result<nlohmann::json>> done;
  auto f = done.get_future();
  host_->on_io_thread([&] {
    host_->workers().call(env,
                          {{"node", "1"}, {"class_type", "TestCast"}, {"epoch", 1},
                           {"inputs", {{"mib", 16}, {"stream", 0}}}},
                          [&done](result<nlohmann::json> r) { done.set_value(std::move(r)); });
  });
  const auto r = f.get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["outputs"][0], 0) << r->dump();
  EXPECT_EQ(sim_counters().used_bytes - c.used_bytes, 16ull << 20);
}

}  // namespace
}  // namespace orch::runtime_testing
