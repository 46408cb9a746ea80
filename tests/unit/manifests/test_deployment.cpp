// comfy-orch.toml: defaults, every section, the env-root precedence, and strict errors.
#include <map>

#include <fstream>

#include <gtest/gtest.h>

#include "manifest_test_support.hpp"
#include "orch/manifests/deployment.hpp"

namespace orch::manifests {
namespace {

using testing::find;

struct fake_environment : environment_reader {
  std::map<std::string, std::string> vars;
  std::optional<std::string> get(const std::string& name) const override {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  }
};

class deployment_test : public ::testing::Test {
 protected:
  deployment_test() { env.vars["HOME"] = "/home/op"; }

  std::optional<deployment> parse(const std::string& text) {
    diags = {};
    return parse_deployment_text(text, tmp.path() / "comfy-orch.toml", diags, env);
  }

  testing::temp_dir tmp;
  fake_environment env;
  diagnostics diags;
};

TEST_F(deployment_test, empty_file_gets_documented_defaults) {
  auto d = parse("");
  ASSERT_TRUE(d) << testing::dump(diags);
  EXPECT_EQ(d->host.device, (device_spec{device_kind::sim, 0}));
  EXPECT_EQ(d->host.sim.capacity, 8ull << 30);
  EXPECT_EQ(d->host.sim.page_size, 2ull << 20);
  EXPECT_EQ(d->host.sim.mode, free_memory_mode::device);
  EXPECT_FALSE(d->memory.disable_dynamic_vram);
  EXPECT_TRUE(d->memory.runtime_floor.empty()) << "no floor unless one is configured";
  EXPECT_EQ(d->host.sim.runtime, (runtime_version{1, 0}));
  EXPECT_EQ(d->workers.handshake_timeout, std::chrono::seconds(10));
  EXPECT_EQ(d->workers.crash_loop_limit, 5);
  EXPECT_EQ(d->shm.pinned_pool_size, 256ull << 20);
  EXPECT_EQ(d->env.root, std::filesystem::path("/home/op/.ce"));
  EXPECT_EQ(d->env.source, env_root_source::home_default);
  // No packs is allowed but said.
  EXPECT_NE(find(diags, "packs", severity::warning), nullptr);
}

TEST_F(deployment_test, every_section_is_read) {
  std::filesystem::create_directories(tmp.path() / "packs" / "a");
  std::filesystem::create_directories(tmp.path() / "custom_nodes");
  auto d = parse(R"(
[host]
device = "cuda:1"
[host.sim]
capacity = "4GiB"
page_size = "64KiB"
free_memory_mode = "process"
other_process_usage = "512MiB"
runtime_version = "12.10"

[memory]
disable_dynamic_vram = true
highvram = true
reserve_vram = "1GiB"
vram_headroom = 268435456
disable_pinned_memory = true
async_offload_streams = 3

[memory.runtime_floor]
cuda = "12.8"
hip = "7"

[plugins]
search_paths = ["build/plugins", "/opt/orch/plugins"]

[env]
root = "~/envs"

[packs]
paths = ["packs/a"]
custom_nodes = "custom_nodes"
library_paths = ["build/examples"]

[workers]
handshake_timeout = "5s"
heartbeat_interval = "250ms"
call_timeout = 30
restart_backoff = 0.25
restart_backoff_max = "8s"
crash_loop_limit = 3
crash_loop_window = "1m"
idle_reap = "10m"

[shm]
pinned_pool_size = "1GiB"
)");
  ASSERT_TRUE(d) << testing::dump(diags);
  EXPECT_TRUE(diags.items().empty()) << testing::dump(diags);
  EXPECT_EQ(d->host.device, (device_spec{device_kind::cuda, 1}));
  EXPECT_EQ(d->host.sim.capacity, 4ull << 30);
  EXPECT_EQ(d->host.sim.page_size, 64ull << 10);
  EXPECT_EQ(d->host.sim.mode, free_memory_mode::process);
  EXPECT_EQ(d->host.sim.other_process_usage, 512ull << 20);
  EXPECT_TRUE(d->memory.disable_dynamic_vram);
  EXPECT_TRUE(d->memory.highvram);
  EXPECT_EQ(d->memory.reserve_vram, 1ull << 30);
  EXPECT_EQ(d->memory.vram_headroom, 256ull << 20);
  EXPECT_TRUE(d->memory.disable_pinned_memory);
  EXPECT_EQ(d->memory.async_offload_streams, 3);
  EXPECT_EQ(d->host.sim.runtime, (runtime_version{12, 10}));
  EXPECT_EQ(d->memory.runtime_floor.size(), 2u);
  EXPECT_EQ(d->memory.runtime_floor.at(device_kind::cuda), (runtime_version{12, 8}));
  EXPECT_EQ(d->memory.runtime_floor.at(device_kind::hip), (runtime_version{7, 0}));
  ASSERT_EQ(d->plugin_paths.size(), 2u);
  EXPECT_EQ(d->plugin_paths[0], tmp.path() / "build" / "plugins");
  EXPECT_EQ(d->plugin_paths[1], std::filesystem::path("/opt/orch/plugins"));
  EXPECT_EQ(d->env.root, std::filesystem::path("/home/op/envs"));
  EXPECT_EQ(d->env.source, env_root_source::deployment);
  EXPECT_EQ(d->packs.paths.at(0), tmp.path() / "packs" / "a");
  EXPECT_EQ(d->packs.custom_nodes, tmp.path() / "custom_nodes");
  EXPECT_EQ(d->packs.library_paths.at(0), tmp.path() / "build" / "examples");
  EXPECT_EQ(d->workers.handshake_timeout, std::chrono::seconds(5));
  EXPECT_EQ(d->workers.heartbeat_interval, std::chrono::milliseconds(250));
  EXPECT_EQ(d->workers.call_timeout, std::chrono::seconds(30));
  EXPECT_EQ(d->workers.restart_backoff, std::chrono::milliseconds(250));
  EXPECT_EQ(d->workers.restart_backoff_max, std::chrono::seconds(8));
  EXPECT_EQ(d->workers.crash_loop_limit, 3);
  EXPECT_EQ(d->workers.crash_loop_window, std::chrono::minutes(1));
  EXPECT_EQ(d->workers.idle_reap, std::chrono::minutes(10));
  EXPECT_EQ(d->shm.pinned_pool_size, 1ull << 30);
}

TEST_F(deployment_test, env_root_comes_from_orch_env_root_before_comfy_env_root) {
  env.vars["ORCH_ENV_ROOT"] = "/srv/orch-envs";
  env.vars["COMFY_ENV_ROOT"] = "/srv/ce";
  auto d = parse("");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->env.root, std::filesystem::path("/srv/orch-envs"));
  EXPECT_EQ(d->env.source, env_root_source::orch_env_root);
}

TEST_F(deployment_test, env_root_falls_back_to_comfy_env_root) {
  env.vars["COMFY_ENV_ROOT"] = "/srv/ce";
  auto d = parse("");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->env.root, std::filesystem::path("/srv/ce"));
  EXPECT_EQ(d->env.source, env_root_source::comfy_env_root);
}

TEST_F(deployment_test, deployment_env_root_wins_over_variables) {
  env.vars["ORCH_ENV_ROOT"] = "/srv/orch-envs";
  auto d = parse("[env]\nroot = \"/data/envs\"\n");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->env.root, std::filesystem::path("/data/envs"));
}

// ---- errors: each names line, column and key, and nothing is returned ----

TEST_F(deployment_test, unknown_key_suggests_the_close_one) {
  EXPECT_FALSE(parse("[workers]\nhandshake_timout = \"5s\"\n"));
  EXPECT_SINGLE_ERROR_AT(diags, "workers.handshake_timout", 2u, 20u);
  EXPECT_NE(find(diags, "workers.handshake_timout")->fix.find("handshake_timeout"),
            std::string::npos);
}

TEST_F(deployment_test, unknown_section_is_an_error) {
  EXPECT_FALSE(parse("[host]\ndevice = \"cpu\"\n\n[hots]\ndevice = \"sim\"\n"));
  EXPECT_SINGLE_ERROR_AT(diags, "hots", 4u, 1u);
  EXPECT_NE(find(diags, "hots")->fix.find("host"), std::string::npos);
}

TEST_F(deployment_test, unknown_device_is_an_error) {
  EXPECT_FALSE(parse("[host]\ndevice = \"cuda:x\"\n"));
  EXPECT_SINGLE_ERROR_AT(diags, "host.device", 2u, 10u);
}

TEST_F(deployment_test, bad_free_memory_mode_is_an_error) {
  EXPECT_FALSE(parse("[host.sim]\nfree_memory_mode = \"wddm\"\n"));
  EXPECT_SINGLE_ERROR_AT(diags, "host.sim.free_memory_mode", 2u, 20u);
}

TEST_F(deployment_test, capacity_must_be_a_multiple_of_page_size) {
  EXPECT_FALSE(parse("[host.sim]\ncapacity = \"3MiB\"\npage_size = \"2MiB\"\n"));
  EXPECT_SINGLE_ERROR_AT(diags, "host.sim.capacity", 2u, 12u);
}

TEST_F(deployment_test, size_with_unknown_unit_is_an_error) {
  EXPECT_FALSE(parse("[shm]\npinned_pool_size = \"12 gigs\"\n"));
  EXPECT_SINGLE_ERROR_AT(diags, "shm.pinned_pool_size", 2u, 20u);
}

TEST_F(deployment_test, float_size_is_an_error_with_a_unit_hint) {
  EXPECT_FALSE(parse("[memory]\nreserve_vram = 1.5\n"));
  EXPECT_SINGLE_ERROR_AT(diags, "memory.reserve_vram", 2u, 16u);
  EXPECT_NE(find(diags, "memory.reserve_vram")->fix.find("MiB"), std::string::npos);
}

TEST_F(deployment_test, flag_of_wrong_type_is_an_error) {
  EXPECT_FALSE(parse("[memory]\nhighvram = \"yes\"\n"));
  EXPECT_SINGLE_ERROR_AT(diags, "memory.highvram", 2u, 12u);
}

TEST_F(deployment_test, contradicting_vram_modes_are_an_error) {
  EXPECT_FALSE(parse("[memory]\nhighvram = true\nnovram = true\n"));
  EXPECT_SINGLE_ERROR_AT(diags, "memory.novram", 3u, 10u);
}

TEST_F(deployment_test, enable_and_disable_dynamic_vram_contradict) {
  EXPECT_FALSE(parse("[memory]\ndisable_dynamic_vram = true\nenable_dynamic_vram = true\n"));
  EXPECT_SINGLE_ERROR_AT(diags, "memory.enable_dynamic_vram", 3u, 23u);
}

TEST_F(deployment_test, streams_out_of_range_is_an_error) {
  EXPECT_FALSE(parse("[memory]\nasync_offload_streams = 64\n"));
  EXPECT_SINGLE_ERROR_AT(diags, "memory.async_offload_streams", 2u, 25u);
}

TEST_F(deployment_test, a_runtime_floor_that_is_not_a_version_is_an_error) {
  EXPECT_FALSE(parse("[memory.runtime_floor]\ncuda = \"12.8.1\"\n"));
  EXPECT_SINGLE_ERROR_AT(diags, "memory.runtime_floor.cuda", 2u, 8u);
  EXPECT_NE(find(diags, "memory.runtime_floor.cuda")->fix.find("\"12.8\""), std::string::npos);
}

TEST_F(deployment_test, a_runtime_floor_written_as_a_float_is_an_error) {
  EXPECT_FALSE(parse("[memory.runtime_floor]\ncuda = 12.8\n"));
  EXPECT_SINGLE_ERROR_AT(diags, "memory.runtime_floor.cuda", 2u, 8u);
}

TEST_F(deployment_test, a_runtime_floor_for_an_unknown_backend_suggests_the_close_one) {
  EXPECT_FALSE(parse("[memory.runtime_floor]\ncdua = \"12.8\"\n"));
  EXPECT_SINGLE_ERROR_AT(diags, "memory.runtime_floor.cdua", 2u, 8u);
  EXPECT_NE(find(diags, "memory.runtime_floor.cdua")->fix.find("cuda"), std::string::npos);
}

TEST_F(deployment_test, a_sim_runtime_version_out_of_range_is_an_error) {
  EXPECT_FALSE(parse("[host.sim]\nruntime_version = \"70000.1\"\n"));
  EXPECT_SINGLE_ERROR_AT(diags, "host.sim.runtime_version", 2u, 19u);
  // A runtime has a version: 0.0 is what the device segment reads as "none given".
  EXPECT_FALSE(parse("[host.sim]\nruntime_version = \"0.0\"\n"));
  EXPECT_SINGLE_ERROR_AT(diags, "host.sim.runtime_version", 2u, 19u);
}

TEST_F(deployment_test, a_file_past_the_size_cap_is_refused_before_it_is_parsed) {
  const auto file = tmp.path() / "huge.toml";
  {
    std::ofstream out(file);
    const std::string comment(1023, '#');
    for (int i = 0; i < 5 * 1024; ++i) out << comment << '\n';  // 5 MiB of comments
  }
  EXPECT_FALSE(load_deployment(file, diags, env));
  ASSERT_EQ(diags.count(severity::error), 1u) << testing::dump(diags);
  EXPECT_NE(diags.items()[0].message.find("larger than 4 MiB"), std::string::npos)
      << testing::dump(diags);
}

TEST_F(deployment_test, missing_pack_directory_is_an_error) {
  EXPECT_FALSE(parse("[packs]\npaths = [\"nope\"]\n"));
  EXPECT_SINGLE_ERROR_AT(diags, "packs.paths", 2u, 9u);
}

TEST_F(deployment_test, zero_heartbeat_is_an_error) {
  EXPECT_FALSE(parse("[workers]\nheartbeat_interval = 0\n"));
  EXPECT_SINGLE_ERROR_AT(diags, "workers.heartbeat_interval", 2u, 22u);
}

TEST_F(deployment_test, a_heartbeat_below_its_floor_is_an_error) {
  // At 1ms, live workers were killed as hung in 4 runs of 5.
  EXPECT_FALSE(parse("[workers]\nheartbeat_interval = \"1ms\"\n"));
  EXPECT_SINGLE_ERROR_AT(diags, "workers.heartbeat_interval", 2u, 22u);
  EXPECT_NE(testing::find(diags, "workers.heartbeat_interval")->message.find("at least 50ms"),
            std::string::npos);
}

TEST_F(deployment_test, a_size_past_64_bits_says_it_overflows) {
  EXPECT_FALSE(parse("[shm]\npinned_pool_size = \"99999999999TiB\"\n"));
  EXPECT_SINGLE_ERROR_AT(diags, "shm.pinned_pool_size", 2u, 20u);
  EXPECT_NE(testing::find(diags, "shm.pinned_pool_size")->message.find("overflows"),
            std::string::npos);
}

TEST_F(deployment_test, section_of_wrong_type_is_an_error) {
  EXPECT_FALSE(parse("host = \"sim\"\n"));
  EXPECT_SINGLE_ERROR_AT(diags, "host", 1u, 8u);
}

TEST_F(deployment_test, server_defaults_are_classic_and_directories_beside_the_file) {
  auto d = parse("");
  ASSERT_TRUE(d) << testing::dump(diags);
  EXPECT_EQ(d->server.cache, cache_policy::classic);
  EXPECT_EQ(d->server.input_directory, tmp.path() / "input");
  EXPECT_EQ(d->server.output_directory, tmp.path() / "output");
}

TEST_F(deployment_test, server_directories_default_into_the_comfyui_root) {
  std::filesystem::create_directories(tmp.path() / "ComfyUI" / "comfy");
  auto d = parse("[comfyui]\nroot = \"ComfyUI\"\n");
  ASSERT_TRUE(d) << testing::dump(diags);
  EXPECT_EQ(d->server.input_directory, tmp.path() / "ComfyUI" / "input");
  EXPECT_EQ(d->server.output_directory, tmp.path() / "ComfyUI" / "output");
}

TEST_F(deployment_test, server_section_is_read) {
  auto d = parse("[server]\ncache = \"lru\"\nlru_prompts = 3\ninput_directory = \"in\"\n"
                 "output_directory = \"/srv/out\"\n");
  ASSERT_TRUE(d) << testing::dump(diags);
  EXPECT_EQ(d->server.cache, cache_policy::lru);
  EXPECT_EQ(d->server.lru_prompts, 3u);
  EXPECT_EQ(d->server.input_directory, tmp.path() / "in");
  EXPECT_EQ(d->server.output_directory, std::filesystem::path("/srv/out"));
}

TEST_F(deployment_test, an_unknown_cache_policy_is_an_error) {
  EXPECT_FALSE(parse("[server]\ncache = \"ram\"\n"));
  EXPECT_SINGLE_ERROR_AT(diags, "server.cache", 2u, 9u);
}

TEST_F(deployment_test, lru_prompts_without_lru_is_an_error) {
  EXPECT_FALSE(parse("[server]\nlru_prompts = 4\n"));
  EXPECT_SINGLE_ERROR_AT(diags, "server.lru_prompts", 2u, 15u);
  EXPECT_FALSE(parse("[server]\ncache = \"lru\"\nlru_prompts = 0\n"));
}

TEST_F(deployment_test, missing_file_is_an_error) {
  diagnostics d;
  EXPECT_FALSE(load_deployment(tmp.path() / "absent.toml", d, env));
  ASSERT_EQ(d.count(severity::error), 1u);
  EXPECT_NE(d.items()[0].message.find("not found"), std::string::npos);
}

}  // namespace
}  // namespace orch::manifests
