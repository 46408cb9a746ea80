// backend_pin_registrar over a real sim backend plugin: ranges reach host_register and
// host_unregister (counted by the device), a refusal is a "pin_failed" naming the status, and a
// table that cannot page-lock (no host_register) accepts ranges without a call.
#include <unistd.h>

#include <gtest/gtest.h>

#include <vector>

#include "orch/plugins/backend_pin_registrar.hpp"
#include "orch/plugins/backend_device.hpp"

namespace {

using orch::plugins::backend_pin_registrar;
using orch::plugins::backend_device;

class pin_registrar_on_sim : public ::testing::Test {
 protected:
  void SetUp() override {
    orch_sim_config config{sizeof(orch_sim_config), ORCH_SIM_FREE_DEVICE, 64ull << 20, 0, 0, 0};
    auto d = backend_device::create_sim(ORCH_TEST_PLUGIN_BACKEND_SIM, config, &fd_);
    ASSERT_TRUE(d) << d.err().message;
    device_ = std::move(*d);
  }
  void TearDown() override {
    device_.reset();
    if (fd_ >= 0) ::close(fd_);
  }
  orch_sim_counters counters() {
    orch_sim_counters c{};
    c.struct_size = sizeof c;
    EXPECT_EQ(device_->sim()->counters(device_->device(), &c), ORCH_OK);
    return c;
  }

  int fd_ = -1;
  std::unique_ptr<backend_device> device_;
  std::vector<unsigned char> range_ = std::vector<unsigned char>(1 << 20);
};

TEST_F(pin_registrar_on_sim, a_range_is_registered_with_the_device_and_unregistered) {
  backend_pin_registrar r(device_->api(), device_->device(), device_->backend());
  EXPECT_EQ(r.name(), "sim");
  ASSERT_TRUE(r.register_range(range_.data(), range_.size()));
  EXPECT_EQ(counters().process_registered_bytes, range_.size());
  r.unregister_range(range_.data(), range_.size());
  EXPECT_EQ(counters().process_registered_bytes, 0u);
  EXPECT_EQ(counters().host_unregistrations, 1u);
}

TEST_F(pin_registrar_on_sim, a_refused_range_is_pin_failed_with_the_status_named) {
  backend_pin_registrar r(device_->api(), device_->device(), device_->backend());
  ASSERT_TRUE(r.register_range(range_.data(), range_.size()));
  const auto twice = r.register_range(range_.data() + 4096, 4096);  // overlaps: sim refuses
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.err().code, "pin_failed");
  EXPECT_NE(twice.err().message.find("INVALID"), std::string::npos) << twice.err().message;
  r.unregister_range(range_.data(), range_.size());
}

TEST_F(pin_registrar_on_sim, a_backend_that_cannot_page_lock_accepts_ranges_without_a_call) {
  orch_backend_api unlockable = device_->api();
  unlockable.host_register = nullptr;
  unlockable.host_unregister = nullptr;
  backend_pin_registrar r(unlockable, device_->device(), "sim");
  ASSERT_TRUE(r.register_range(range_.data(), range_.size()));
  r.unregister_range(range_.data(), range_.size());
  EXPECT_EQ(counters().host_registrations, 0u);
  EXPECT_EQ(counters().host_unregistrations, 0u);
}

}  // namespace
