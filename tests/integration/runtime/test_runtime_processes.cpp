// The runtime end to end on real processes (docs/runtime.md): a host, its
// supervisor and comfy-orch-worker processes running the example packs on the sim device.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "orch/live/process_status.hpp"
#include "runtime_fixture.hpp"

namespace orch::runtime_testing {
namespace {

using nlohmann::json;

constexpr const char* cross_pack_prompt = R"({
  "1": {"class_type": "SolidImage", "inputs": {"width": 16, "height": 8, "value": 0.5}},
  "2": {"class_type": "SimLoadModel", "inputs": {"size_mib": 16, "layers": 4}},
  "3": {"class_type": "SimSampler", "inputs": {"model": ["2", 0], "latent": ["1", 0], "steps": 4}},
  "4": {"class_type": "ImageChecksum", "inputs": {"image": ["3", 0]}}
})";

ipc::buffer_descriptor descriptor_of(const json& tensor_value) {
  return *ipc::descriptor_from_json(tensor_value["tensor"]["descriptor"]);
}

class runtime_processes : public runtime_test {};

TEST_F(runtime_processes, every_native_pack_reports_its_node_classes_at_the_handshake) {
  ASSERT_NO_FATAL_FAILURE(start());
  // ImageOps 3, SimSampler 2, the test pack 15.
  EXPECT_EQ(host_->catalogue().size(), 20u);
  const auto* sampler = host_->catalogue().find("SimSampler");
  ASSERT_NE(sampler, nullptr);
  EXPECT_EQ(sampler->outputs, std::vector<std::string>{"IMAGE"});
  ASSERT_EQ(sampler->inputs.size(), 4u);
  EXPECT_EQ(sampler->inputs[2].name, "steps");
  EXPECT_EQ(sampler->inputs[2].min, 1.0);
  EXPECT_EQ(sampler->inputs[3].name, "step_ms");
  EXPECT_FALSE(sampler->inputs[3].required);
  EXPECT_TRUE(host_->catalogue().find("ImageChecksum")->output_node);
  EXPECT_TRUE(host_->catalogue().find("TestCrash")->not_idempotent);
  EXPECT_NE(env_of(*host_, "SimSampler"), env_of(*host_, "SolidImage"));
}

TEST_F(runtime_processes, a_prompt_across_two_packs_produces_the_right_values) {
  ASSERT_NO_FATAL_FAILURE(start());
  const auto outcome = run(cross_pack_prompt);
  ASSERT_TRUE(outcome.ok) << outcome.error->dump();
  // 16 x 8 x 3 values, each 0.5 + 4 steps x 0.125 = 1.0.
  EXPECT_EQ(outcome.nodes.at("4").outputs[0].get<double>(), 384.0);
  const auto events = events_.events();
  std::vector<std::string> types;
  for (const auto& e : events) types.push_back(e["type"]);
  EXPECT_EQ(types.front(), "execution_start");
  ASSERT_GE(types.size(), 2u);
  EXPECT_EQ(types[types.size() - 2], "execution_success");
  EXPECT_EQ(types.back(), "executing");  // for no node: the prompt's end, as ComfyUI sends it
  EXPECT_TRUE(events.back()["data"]["node"].is_null());
  EXPECT_EQ(std::count(types.begin(), types.end(), "executing"), 4 + 1);
  EXPECT_EQ(std::count(types.begin(), types.end(), "progress"), 4);
  EXPECT_EQ(std::count(types.begin(), types.end(), "executed"), 1);
}

TEST_F(runtime_processes, an_output_reaches_the_next_pack_at_the_same_pool_offset_unchanged) {
  ASSERT_NO_FATAL_FAILURE(start());
  const auto outcome = run(cross_pack_prompt);
  ASSERT_TRUE(outcome.ok);
  const auto produced = descriptor_of(outcome.nodes.at("1").outputs[0]);
  // The sampler (another process) mapped exactly the block the image pack wrote.
  const auto seen = *ipc::descriptor_from_json(outcome.nodes.at("3").inputs_seen["latent"]["descriptor"]);
  EXPECT_EQ(seen, produced);
  const auto sampled = descriptor_of(outcome.nodes.at("3").outputs[0]);
  EXPECT_EQ(outcome.nodes.at("4").outputs[1].get<std::int64_t>(),
            static_cast<std::int64_t>(sampled.offset));
  // And the producer's bytes are unchanged: every value still 0.5.
  host_->on_io_thread([&] {
    auto bytes = host_->memory().pool().bytes(produced);
    ASSERT_TRUE(bytes.ok());
    ASSERT_EQ(bytes->size(), 16u * 8u * 3u * sizeof(float));
    for (std::size_t i = 0; i < bytes->size() / sizeof(float); ++i) {
      float v;
      std::memcpy(&v, bytes->data() + i * sizeof(float), sizeof v);
      ASSERT_EQ(v, 0.5f) << "value " << i;
    }
  });
}

TEST_F(runtime_processes, a_node_error_returns_its_node_id_error_type_and_message) {
  ASSERT_NO_FATAL_FAILURE(start());
  const std::string env = env_of(*host_, "TestFail");
  const auto generation = info(env).generation;
  const auto outcome = run(R"({"7": {"class_type": "TestFail", "inputs": {}}})");
  ASSERT_FALSE(outcome.ok);
  EXPECT_EQ((*outcome.error)["node_id"], "7");
  EXPECT_EQ((*outcome.error)["node_type"], "TestFail");
  EXPECT_EQ((*outcome.error)["exception_type"], "value_error");
  EXPECT_EQ((*outcome.error)["exception_message"], "TestFail always fails");
  // As ComfyUI sends it: the failing node's inputs, the nodes that have outputs and the time,
  // then an `executing` for no node, which ends every prompt.
  const auto events = events_.events();
  ASSERT_GE(events.size(), 2u);
  const auto& error = events[events.size() - 2];
  EXPECT_EQ(error["type"], "execution_error");
  EXPECT_EQ(error["data"]["current_inputs"], nlohmann::json::object()) << error.dump();
  EXPECT_EQ(error["data"]["current_outputs"], nlohmann::json::array()) << error.dump();
  EXPECT_TRUE(error["data"]["timestamp"].is_number_unsigned()) << error.dump();
  EXPECT_EQ(events.back()["type"], "executing");
  EXPECT_TRUE(events.back()["data"]["node"].is_null()) << events.back().dump();
  EXPECT_EQ(events.back()["data"]["prompt_id"], error["data"]["prompt_id"]);
  // A node error is not a crash: the same worker keeps serving.
  EXPECT_EQ(info(env).generation, generation);
  EXPECT_TRUE(run(R"({"1": {"class_type": "TestEmpty", "inputs": {}}})").ok);
}

// H10: prompts that crash a pack's worker fail its env for a cool-down, not until the host
// restarts: any client could take a pack offline for good.
TEST_F(runtime_processes, a_crash_looping_env_is_started_again_after_its_cool_down) {
  deployment_options o;
  o.crash_loop_limit = 1;
  o.failed_retry = "3s";
  ASSERT_NO_FATAL_FAILURE(start(o));
  const std::string env = env_of(*host_, "TestCrash");
  const auto info = [&] { return host_->on_io_thread([&] { return *host_->workers().find(env); }); };
  // Two crashes within the window: past crash_loop_limit 1, the env is failed.
  while (info().losses < 2) {
    ASSERT_TRUE(eventually([&] { return info().state == runtime::worker_state::ready; },
                           std::chrono::seconds(20)));
    run(R"({"1": {"class_type": "TestCrash", "inputs": {}}})");
  }
  // Failed for now, and the status says when it is started again (within the cool-down).
  const json status = host_->on_io_thread([&] { return live::read_process_status(*host_); });
  bool reported = false;
  for (const auto& row : status["processes"])
    if (row.value("process", "") == env) {
      ASSERT_EQ(row.value("state", ""), "failed") << row.dump();
      ASSERT_TRUE(row.contains("retry_in_ms")) << row.dump();
      EXPECT_LE(row["retry_in_ms"].get<std::int64_t>(), 3000) << row.dump();
      EXPECT_EQ(row.value("crash_loops", 0), 1) << row.dump();
      EXPECT_EQ(row.value("max_retry_ms", 0), 3'600'000) << row.dump();  // the cap, however many
      reported = true;
    }
  EXPECT_TRUE(reported) << status.dump();
  ASSERT_TRUE(eventually([&] { return info().state == runtime::worker_state::ready; },
                         std::chrono::seconds(30)))
      << "the env stayed failed after its cool-down: " << info().last_error;
  EXPECT_GT(info().generation, 2u);
  EXPECT_TRUE(run(R"({"1": {"class_type": "TestEmpty", "inputs": {}}})").ok);
}

// H6: Ctrl-C to `comfy-orch run` while a node ignores interrupts had waited for the call's
// deadline. The interrupt gives the node --stop-grace-ms, then its worker is killed and run ends.
TEST_F(runtime_processes, ctrl_c_during_a_node_that_ignores_interrupts_ends_run_after_the_grace) {
  const fs::path deployment = write_deployment();
  write(dir_ / "busy.json", R"({"1": {"class_type": "TestBusy", "inputs": {"ms": 120000}}})");
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  std::vector<std::string> args = {ORCH_TEST_COMFY_ORCH, "run", deployment.string(), "--prompt",
                                    (dir_ / "busy.json").string(), "--json",
                                    "--stop-grace-ms", "300"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  FILE* events = ::fdopen(out[0], "r");
  char line[65536];
  bool inside = false;  // the busy node started: its "executing" event came
  while (!inside && std::fgets(line, sizeof line, events) != nullptr) {
    const auto e = nlohmann::json::parse(line, nullptr, false);
    inside = !e.is_discarded() && e.value("type", "") == "executing" &&
             e["data"].value("node", nlohmann::json()) == "1";
  }
  ASSERT_TRUE(inside);
  ::kill(pid, SIGINT);
  int status = 0;
  bool ended = false;  // within 30 s (the grace is 300 ms; the deadline 120 s)
  for (int i = 0; i < 3000 && !ended; ++i) {
    ended = ::waitpid(pid, &status, WNOHANG) == pid;
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!ended) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  std::fclose(events);
  EXPECT_TRUE(ended) << "run waited for the node's deadline";
}

TEST_F(runtime_processes, interrupting_a_prompt_reaches_the_running_node) {
  ASSERT_NO_FATAL_FAILURE(start());
  auto running = run_async(R"({"1": {"class_type": "TestSleep", "inputs": {"ms": 20000}}})", "1");
  executor_->interrupt();
  ASSERT_EQ(running.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  const auto outcome = running.get();
  ASSERT_FALSE(outcome.ok);
  EXPECT_EQ((*outcome.error)["exception_type"], "interrupted");
  const auto events = events_.events();
  ASSERT_GE(events.size(), 2u);
  const auto& interrupted = events[events.size() - 2];
  EXPECT_EQ(interrupted["type"], "execution_interrupted");
  // ComfyUI's shape: who was interrupted and what had run, no exception fields.
  for (const char* key : {"prompt_id", "node_id", "node_type", "executed", "timestamp"})
    EXPECT_TRUE(interrupted["data"].contains(key)) << key << ": " << interrupted.dump();
  EXPECT_FALSE(interrupted["data"].contains("exception_type")) << interrupted.dump();
  EXPECT_FALSE(interrupted["data"].contains("exception_message")) << interrupted.dump();
  EXPECT_EQ(events.back()["type"], "executing");
}

TEST_F(runtime_processes, each_prompt_is_a_new_epoch_in_the_workers_control_block) {
  ASSERT_NO_FATAL_FAILURE(start());
  const std::string env = env_of(*host_, "TestEmpty");
  const std::string prompt = R"({"1": {"class_type": "TestEmpty", "inputs": {}}})";
  EXPECT_EQ(run(prompt).epoch, 1u);
  EXPECT_EQ(run(prompt).epoch, 2u);
  const auto stats = host_->on_io_thread(
      [&] { return host_->memory().control().block(host_->workers().find(env)->slot).read(); });
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->current_epoch, 2u);
  EXPECT_EQ(stats->call_count, 2u);
  EXPECT_EQ(stats->memory_manager, ipc::memory_manager_kind::pager);
}

TEST_F(runtime_processes, the_example_sampler_faults_its_model_and_uses_cast_buffers) {
  ASSERT_NO_FATAL_FAILURE(start());
  ASSERT_TRUE(run(cross_pack_prompt).ok);
  const std::string env = env_of(*host_, "SimSampler");
  const auto stats = host_->on_io_thread(
      [&] { return host_->memory().control().block(host_->workers().find(env)->slot).read(); });
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->pager_resident_bytes, 16u << 20);  // the whole 16 MiB model stays resident
  EXPECT_GT(stats->cast_buffer_high_water, 0u);
  EXPECT_EQ(stats->pinned_bytes, 16u << 20);  // its staging copy, from the one budget
}

}  // namespace
}  // namespace orch::runtime_testing
