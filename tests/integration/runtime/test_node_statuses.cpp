// The statuses a node sees through the node ABI are the plugins' own, carried across the worker's
// error vocabulary unchanged (docs/errors.md). A pager's ORCH_OOM_RETRYABLE once became the text
// "OOM_RETRYABLE" in worker_memory::region() and ORCH_DEVICE_ERROR in node_context, so a node
// that would have streamed its weight failed instead.
#include <future>

#include "orch/plugin/sim.h"
#include "runtime_fixture.hpp"

namespace orch::runtime_testing {
namespace {

using nlohmann::json;

class node_statuses : public runtime_test {
 protected:
  // The value TestRegion returns for a region of `mib` MiB: the first status that is not ORCH_OK.
  std::int64_t region_status(std::int64_t mib) {
    const std::string env = env_of(*host_, "TestRegion");
    json body{{"node", "n" + std::to_string(++calls_)},
              {"class_type", "TestRegion"},
              {"inputs", {{"mib", mib}}},
              {"epoch", 1}};
    std::promise<result<json>> done;
    auto f = done.get_future();
    host_->on_io_thread([&] {
      host_->workers().call(env, body, [&done](result<json> r) { done.set_value(std::move(r)); });
    });
    auto r = f.get();
    if (!r) {
      ADD_FAILURE() << r.err().message;
      return -1;
    }
    EXPECT_EQ((*r).value("status", ""), "ok") << r->dump();
    return (*r)["outputs"][0].get<std::int64_t>();
  }
  // The next `count` va_reserve calls on the shared sim device, in any process, run out of
  // address space.
  void exhaust_address_space(std::int32_t count) {
    host_->on_io_thread([&] {
      auto* backend = host_->memory().backend();
      ASSERT_NE(backend, nullptr);
      ASSERT_NE(backend->sim(), nullptr);
      ASSERT_EQ(backend->sim()->inject_fault(backend->device(), ORCH_SIM_FAULT_VA_OOM, count),
                ORCH_OK);
    });
  }
  int calls_ = 0;
};

TEST_F(node_statuses, a_region_the_pager_cannot_create_is_out_of_memory_so_the_node_streams) {
  ASSERT_NO_FATAL_FAILURE(start());
  exhaust_address_space(1);
  EXPECT_EQ(region_status(64), ORCH_OOM_RETRYABLE);
  // Not remembered as broken: once the address space is back the same model is created.
  EXPECT_EQ(region_status(64), ORCH_OK);
}

TEST_F(node_statuses, faulting_a_region_past_the_sim_device_capacity_is_out_of_memory) {
  ASSERT_NO_FATAL_FAILURE(start());  // a 2 GiB sim device
  // The pager clamps the region to the device (aimdo's VBAR clamp); pages past it are never
  // mapped, so the fault answers "stream it", not an error.
  EXPECT_EQ(region_status(4096), ORCH_OOM_RETRYABLE);
  EXPECT_EQ(region_status(16), ORCH_OK);
}

}  // namespace
}  // namespace orch::runtime_testing
