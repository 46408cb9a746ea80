// The host's ledger of host models and worker stand-ins: ComfyUI's eviction order and
// free_memory over both (docs/memory-semantics.md).
#include <map>

#include <gtest/gtest.h>

#include "orch/runtime/stand_in_table.hpp"

namespace orch::runtime {
namespace {

constexpr std::uint64_t GiB = 1ull << 30;

model_entry host_model(std::string id, std::uint64_t size, std::uint64_t resident,
                       bool dynamic = false, std::uint32_t refcount = 1) {
  return {std::move(id), "", size, resident, refcount, dynamic, 0, {}};
}

model_entry stand_in(std::string env, std::string model, std::uint64_t size,
                     std::uint64_t resident) {
  return {env + "/" + model, std::move(env), size, resident, 1, false, 0, {}};
}

std::vector<std::string> ids(const std::vector<const model_entry*>& order) {
  std::vector<std::string> out;
  for (const auto* e : order) out.push_back(e->id);
  return out;
}

TEST(stand_in_table, a_model_keeps_what_its_loader_was_asked_through_its_receipts) {
  stand_in_table t;
  t.load(stand_in("imageops", "ckpt-sd15", GiB, GiB));
  EXPECT_TRUE(t.set_asked("imageops/ckpt-sd15", {"checkpoints/sd15.safetensors"}));
  EXPECT_TRUE(t.apply_receipt("imageops/ckpt-sd15", GiB / 2, 1));
  EXPECT_EQ(t.find("imageops/ckpt-sd15")->asked,
            std::vector<std::string>{"checkpoints/sd15.safetensors"});
  EXPECT_FALSE(t.set_asked("imageops/other", {"loras/x.safetensors"}));
}

TEST(stand_in_table, order_is_most_offloaded_then_refcount_then_size_then_position) {
  stand_in_table l;
  l.load(host_model("small", 1 * GiB, 1 * GiB));
  l.load(host_model("big", 4 * GiB, 4 * GiB));
  l.load(host_model("shared", 1 * GiB, 1 * GiB, false, 3));
  l.load(host_model("partial", 4 * GiB, 1 * GiB));
  l.load(host_model("small-newer", 1 * GiB, 1 * GiB));
  // partial (3 GiB offloaded) first; then refcount 1 before 3; then size; then list index
  // (index 0 is the newest).
  EXPECT_EQ(ids(l.eviction_order()),
            (std::vector<std::string>{"partial", "small-newer", "small", "big", "shared"}));
}

TEST(stand_in_table, stand_in_is_evicted_by_message_and_receipt_updates_residency) {
  stand_in_table l;
  l.load(stand_in("sampler-nodes", "unet", 3 * GiB, 3 * GiB));
  std::uint64_t device_free = 1 * GiB;
  std::map<std::string, std::uint64_t> asked;
  const auto steps = l.free_memory(
      2 * GiB, false, [&] { return device_free; },
      [&](const model_entry& e, std::uint64_t bytes) {
        asked[e.id] = bytes;
        device_free += bytes;  // the worker frees exactly what was asked
        return bytes;
      });
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].env, "sampler-nodes");
  EXPECT_EQ(steps[0].asked, 1 * GiB);
  EXPECT_EQ(steps[0].freed, 1 * GiB);
  EXPECT_EQ(l.find("sampler-nodes/unet")->resident, 2 * GiB);
}

TEST(stand_in_table, worker_model_is_evictable_when_every_host_model_is_dynamic) {
  stand_in_table l;
  l.load(host_model("host-unet", 6 * GiB, 6 * GiB, /*dynamic=*/true));
  l.load(stand_in("pack-nodes", "vae", 2 * GiB, 2 * GiB));
  std::uint64_t device_free = 0;
  std::vector<std::string> evicted;
  const auto steps = l.free_memory(
      1 * GiB, /*for_dynamic=*/true, [&] { return device_free; },
      [&](const model_entry& e, std::uint64_t bytes) {
        evicted.push_back(e.id);
        device_free += bytes;
        return bytes;
      });
  // The dynamic host model is protected; the stand-in, non-dynamic on purpose, is not.
  EXPECT_EQ(evicted, std::vector<std::string>{"pack-nodes/vae"});
  EXPECT_EQ(l.find("host-unet")->resident, 6 * GiB);
}

TEST(stand_in_table, dynamic_skip_takes_its_resident_bytes_off_the_requirement) {
  stand_in_table l;
  l.load(host_model("host-unet", 4 * GiB, 3 * GiB, true));  // most offloaded: visited first
  l.load(stand_in("pack-nodes", "vae", 2 * GiB, 2 * GiB));
  std::uint64_t asked = 0;
  (void)l.free_memory(
      4 * GiB, true, [] { return std::uint64_t{0}; },
      [&](const model_entry&, std::uint64_t bytes) {
        asked = bytes;
        return bytes;
      });
  EXPECT_EQ(asked, 1 * GiB);  // 4 GiB required, minus the dynamic model's 3 GiB resident
}

TEST(stand_in_table, short_receipt_is_what_counts) {
  stand_in_table l;
  l.load(stand_in("a", "m", 4 * GiB, 4 * GiB));
  l.load(stand_in("b", "m", 4 * GiB, 4 * GiB));
  std::uint64_t device_free = 0;
  const auto steps = l.free_memory(
      3 * GiB, false, [&] { return device_free; },
      [&](const model_entry&, std::uint64_t) {
        device_free += 1 * GiB;  // a busy worker gives back only 1 GiB
        return 1 * GiB;
      });
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].asked, 3 * GiB);
  EXPECT_EQ(steps[1].asked, 2 * GiB);
  EXPECT_EQ(l.find("a/m")->resident + l.find("b/m")->resident, 6 * GiB);
}

TEST(stand_in_table, nothing_is_evicted_when_enough_is_free) {
  stand_in_table l;
  l.load(stand_in("a", "m", 4 * GiB, 4 * GiB));
  bool called = false;
  const auto steps = l.free_memory(
      1 * GiB, false, [] { return 2 * GiB; },
      [&](const model_entry&, std::uint64_t) {
        called = true;
        return std::uint64_t{0};
      });
  EXPECT_TRUE(steps.empty());
  EXPECT_FALSE(called);
}

TEST(stand_in_table, stale_receipts_are_ignored) {
  stand_in_table l;
  l.load(stand_in("a", "m", 4 * GiB, 4 * GiB));
  EXPECT_TRUE(l.apply_receipt("a/m", 1 * GiB, 5));
  EXPECT_FALSE(l.apply_receipt("a/m", 4 * GiB, 4));
  EXPECT_EQ(l.find("a/m")->resident, 1 * GiB);
  EXPECT_EQ(l.find("a/m")->receipt_seq, 5u);
}

TEST(stand_in_table, a_replaced_worker_loses_its_stand_ins) {
  stand_in_table l;
  l.load(stand_in("a", "m1", 1 * GiB, 1 * GiB));
  l.load(stand_in("a", "m2", 1 * GiB, 1 * GiB));
  l.load(stand_in("b", "m1", 1 * GiB, 1 * GiB));
  EXPECT_EQ(l.remove_env("a"), 2u);
  EXPECT_EQ(l.entries().size(), 1u);
}

}  // namespace
}  // namespace orch::runtime
