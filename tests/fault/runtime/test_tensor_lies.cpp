// A worker must not hurt another through a tensor (docs/runtime.md). A producer's claim about its
// output tensor (dtype, shape, descriptor) is checked by the host before it is handed over, and a
// lie is the producer's execution_error; the consumer's worker checks again before it builds a
// view, so a forged call gets a clean error from the consumer node, never a crash. Real host,
// real workers in separate processes, real shared memory: the lying pack (tensor_lies_pack.cpp)
// runs in one worker and the consumer (ImageOps' ImageChecksum) in another.
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "runtime_fixture.hpp"

namespace orch::runtime_testing {
namespace {

using nlohmann::json;

class tensor_lies_test : public runtime_test {
 protected:
  fs::path write_lies_deployment() {
    write(dir_ / "packs/ComfyUI-ImageOps/nodes/comfy-env.toml",
          "[worker]\nlibrary = \"liborch_pack_image_ops.so\"\n");
    write(dir_ / "packs/ComfyUI-TensorLies/nodes/comfy-env.toml",
          "[worker]\nlibrary = \"liborch_pack_tensor_lies.so\"\n");
    const fs::path file = dir_ / "deployment.toml";
    write(file, "[host]\ndevice = \"sim\"\n\n[host.sim]\ncapacity = \"2GiB\"\npage_size = "
                "\"2MiB\"\n\n[plugins]\nsearch_paths = [\"" +
                    std::string(ORCH_TEST_PLUGIN_DIR) +
                    "\"]\n\n[packs]\npaths = [\"packs/ComfyUI-ImageOps\", "
                    "\"packs/ComfyUI-TensorLies\"]\nlibrary_paths = [\"" +
                    std::string(ORCH_TEST_EXAMPLES_LIB_DIR) + "\", \"" +
                    std::string(ORCH_TEST_PACKS_DIR) +
                    "\"]\n\n[workers]\nhandshake_timeout = \"5s\"\nheartbeat_interval = "
                    "\"100ms\"\nrestart_backoff = \"50ms\"\ncrash_loop_limit = 3\n\n[shm]\n"
                    "pinned_pool_size = \"64MiB\"\n");
    return file;
  }

  void SetUp() override {
    runtime_test::SetUp();
    start_file(write_lies_deployment());
    if (HasFatalFailure()) return;
    producer_ = env_of(*host_, "LyingImage");
    consumer_ = env_of(*host_, "ImageChecksum");
    ASSERT_FALSE(producer_.empty());
    ASSERT_FALSE(consumer_.empty());
    ASSERT_NE(producer_, consumer_) << "the consumer must run in another worker";
    before_ = info(consumer_);
    ASSERT_EQ(before_.state, runtime::worker_state::ready);
  }

  static std::string prompt(int lie, std::int64_t claim = 8) {
    return json{{"1", {{"class_type", "LyingImage"},
                       {"inputs", {{"lie", lie}, {"claim", claim}}}}},
                {"2", {{"class_type", "ImageChecksum"}, {"inputs", {{"image", {"1", 0}}}}}}}
        .dump();
  }

  // Whether the consumer node started, in the events from index `since` on.
  bool consumer_ran(std::size_t since) {
    const json events = events_.events();
    for (std::size_t k = since; k < events.size(); ++k) {
      if (events[k]["type"] == "executing" && events[k]["data"]["node"] == "2") return true;
    }
    return false;
  }

  // The consumer's worker is the one it was before the prompt: same process, not restarted.
  void expect_consumer_untouched() {
    const auto now = info(consumer_);
    EXPECT_EQ(now.pid, before_.pid);
    EXPECT_EQ(now.generation, before_.generation);
    EXPECT_EQ(now.state, runtime::worker_state::ready);
    EXPECT_FALSE(process_gone(before_.pid));
  }

  // A truthful prompt still runs through the same workers: the host is fine.
  void expect_truthful_prompt_runs() {
    const auto ok = run(prompt(0));
    ASSERT_TRUE(ok.ok) << (ok.error ? ok.error->dump() : "");
    EXPECT_EQ(ok.nodes.at("2").outputs[0].get<double>(), 1.0 * 8 * 16 * 3);
    expect_consumer_untouched();
  }

  // The prompt failed at the producer, with the host's refusal.
  // `since`: the number of events before the prompt ran.
  void expect_producers_error(const executor::prompt_outcome& o, std::size_t since = 0) {
    ASSERT_FALSE(o.ok) << "a lying tensor was handed over and the prompt succeeded";
    ASSERT_TRUE(o.error.has_value());
    const json& e = *o.error;
    EXPECT_EQ(e["exception_type"], "invalid_output") << e.dump();
    EXPECT_EQ(e["node_id"], "1") << e.dump();
    EXPECT_EQ(e["node_type"], "LyingImage");
    const std::string message = e["exception_message"].get<std::string>();
    EXPECT_NE(message.find("node 1 (LyingImage, env " + producer_ + ")"), std::string::npos)
        << message;
    EXPECT_FALSE(consumer_ran(since)) << "the lie reached the consumer";
    const json events = events_.events();
    ASSERT_GT(events.size(), since + 1);
    EXPECT_EQ(events[events.size() - 2]["type"], "execution_error");
    EXPECT_EQ(events.back()["type"], "executing");  // the prompt's end
  }

  std::string producer_, consumer_;
  runtime::worker_info before_;
};

TEST_F(tensor_lies_test, a_shape_far_past_its_block_is_the_producers_error_not_a_consumer_crash) {
  // 805 MB claimed over 1.5 KB: the consumer's read ran off the mapping (SIGSEGV, worker_died).
  const auto o = run(prompt(1, 4194304));
  expect_producers_error(o);
  const std::string message = (*o.error)["exception_message"];
  EXPECT_NE(message.find("float32 [1, 4194304, 16, 3] claims 805306368 bytes"), std::string::npos)
      << message;
  EXPECT_NE(message.find("its buffer holds 1536 bytes"), std::string::npos) << message;
  expect_consumer_untouched();
  // 200 MB claimed: past this 64 MiB pool too.
  const std::size_t since = events_.events().size();
  const auto o2 = run(prompt(1, 1048576));
  expect_producers_error(o2, since);
  EXPECT_NE((*o2.error)["exception_message"].get<std::string>().find(
                "claims 201326592 bytes, but its buffer holds 1536 bytes"),
            std::string::npos);
  expect_consumer_untouched();
  expect_truthful_prompt_runs();
}

TEST_F(tensor_lies_test, a_shape_reaching_into_other_blocks_is_refused_not_a_silent_success) {
  // 12 MB claimed over 1.5 KB, inside the 64 MiB pool: the consumer summed bytes that belong
  // to other blocks (or to none) and the prompt "succeeded".
  const auto o = run(prompt(1, 65536));
  expect_producers_error(o);
  const std::string message = (*o.error)["exception_message"];
  EXPECT_NE(message.find("claims 12582912 bytes, but its buffer holds 1536 bytes"),
            std::string::npos)
      << message;
  expect_consumer_untouched();
  expect_truthful_prompt_runs();
}

TEST_F(tensor_lies_test, one_row_too_many_is_refused_and_the_exact_size_is_not) {
  expect_producers_error(run(prompt(1, 9)));
  expect_consumer_untouched();
  const auto exact = run(prompt(1, 8));
  EXPECT_TRUE(exact.ok) << (exact.error ? exact.error->dump() : "");
}

TEST_F(tensor_lies_test, every_other_lie_about_a_tensor_is_the_producers_error) {
  const struct {
    int lie;
    const char* says;
  } lies[] = {
      {2, "dtype 99 is not a tensor dtype"},
      {3, "a tensor of rank 1000"},
      {4, "has a negative dim"},
      {5, "past 64 bits"},
      {6, "names no block the host holds"},  // a descriptor larger than the allocation
      {7, "names no block the host holds"},  // a block it never allocated
      {8, "names no block the host holds"},  // another generation
  };
  for (const auto& l : lies) {
    SCOPED_TRACE("lie " + std::to_string(l.lie));
    const std::size_t since = events_.events().size();
    const auto o = run(prompt(l.lie));
    expect_producers_error(o, since);
    if (o.error) {
      const std::string message = (*o.error)["exception_message"];
      EXPECT_NE(message.find(l.says), std::string::npos) << message;
    }
    expect_consumer_untouched();
  }
  // Nothing the lies allocated stays leased past the next prompt.
  expect_truthful_prompt_runs();
  executor_->release_outputs();
  EXPECT_EQ(host_->on_io_thread([&] { return host_->memory().leases().live_blocks(); }), 0u);
}

// --- the worker's own check: a call the host did not check (a host bug, a forged message) ---

class forged_call_test : public tensor_lies_test {
 protected:
  // Sends ImageChecksum a call whose image input is `tensor`, straight through the supervisor
  // (no executor, so no host-side check), and returns the worker's answer.
  result<json> forge(const json& tensor) {
    std::promise<result<json>> done;
    auto answer = done.get_future();
    const json body{{"node", "forged"},
                    {"class_type", "ImageChecksum"},
                    {"inputs", {{"image", {{"tensor", tensor}}}}}};
    host_->on_io_thread([&] {
      host_->workers().call(consumer_, body,
                            [&done](result<json> r) { done.set_value(std::move(r)); });
    });
    return answer.get();
  }

  void SetUp() override {
    tensor_lies_test::SetUp();
    if (HasFatalFailure()) return;
    auto d = host_->on_io_thread(
        [&] { return host_->memory().leases().allocate(runtime::host_slot, 1536); });
    ASSERT_TRUE(d.ok()) << d.err().message;
    block_ = *d;
  }
  void TearDown() override {
    if (host_ && block_.generation != 0) {
      host_->on_io_thread([&] { (void)host_->memory().leases().free(block_, runtime::host_slot); });
    }
    tensor_lies_test::TearDown();
  }

  json tensor(json dtype, json shape) const {
    return {{"dtype", std::move(dtype)},
            {"shape", std::move(shape)},
            {"descriptor", ipc::descriptor_to_json(block_)}};
  }

  // The consumer node answered with a clean invalid_input naming `says`, and lives on.
  void expect_clean_refusal(const result<json>& r, const std::string& says) {
    ASSERT_TRUE(r.ok()) << "the worker did not answer: " << r.err().code << ": " << r.err().message;
    EXPECT_EQ((*r)["status"], "error") << r->dump();
    EXPECT_EQ((*r)["error"]["type"], "invalid_input") << r->dump();
    const std::string message = (*r)["error"]["message"];
    EXPECT_NE(message.find("image: "), std::string::npos) << message;
    EXPECT_NE(message.find(says), std::string::npos) << message;
    expect_consumer_untouched();
  }

  ipc::buffer_descriptor block_;
};

TEST_F(forged_call_test, a_truthful_forged_tensor_is_read) {
  auto r = forge(tensor(1, {1, 8, 16, 3}));
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ((*r)["status"], "ok") << r->dump();
}

TEST_F(forged_call_test, a_shape_past_the_block_gets_a_clean_error_from_the_consumer_not_a_crash) {
  expect_clean_refusal(forge(tensor(1, {1, 4194304, 16, 3})),
                       "float32 [1, 4194304, 16, 3] claims 805306368 bytes, but its buffer "
                       "holds 1536 bytes");
  expect_clean_refusal(forge(tensor(1, {1, 1048576, 16, 3})), "claims 201326592 bytes");
}

TEST_F(forged_call_test, malformed_tensor_fields_get_a_clean_error_not_an_exception) {
  // Each of these threw inside the worker's node thread (std::terminate) or built a bad view.
  expect_clean_refusal(forge(tensor("f32", {1, 8, 16, 3})), "dtype");
  expect_clean_refusal(forge(tensor(1, {1, "8", 16, 3})), "not an integer");
  expect_clean_refusal(forge(tensor(1, {1, 8.5, 16, 3})), "not an integer");
  expect_clean_refusal(forge(tensor(1, "1x8x16x3")), "not a list");
  expect_clean_refusal(forge(tensor(77, {1})), "dtype 77 is not a tensor dtype");
  expect_clean_refusal(forge(tensor(1, json(std::vector<int>(9, 1)))), "rank 9");
  expect_clean_refusal(forge(tensor(1, {1, -8, 16, 3})), "negative dim");
  expect_clean_refusal(forge(tensor(1, {std::uint64_t{1} << 63})), "past int64");
  expect_clean_refusal(forge(json("not a map")), "not a map");
  json no_shape = tensor(1, {1});
  no_shape.erase("shape");
  expect_clean_refusal(forge(no_shape), "lacks shape");
}

TEST_F(forged_call_test, a_descriptor_larger_than_its_block_is_refused_by_the_worker) {
  // The shape fits the descriptor, but the descriptor claims more than the block: the worker's
  // block table bounds it (the block is one 4 KiB granule).
  json t = tensor(1, {1, 2048});
  t["descriptor"]["size"] = 8192;
  expect_clean_refusal(forge(t), "larger than its block of 4096 bytes");
  t = tensor(2, {std::uint64_t{1} << 30});
  t["descriptor"]["size"] = std::uint64_t{1} << 30;
  expect_clean_refusal(forge(t), "leaves the segment");
}

TEST_F(forged_call_test, a_tensor_typed_into_a_prompt_never_reaches_a_worker) {
  // The block stands for another prompt's output that the host still holds: a prompt that names
  // it literally must not read it, though it fits and is live.
  const json p{{"2", {{"class_type", "ImageChecksum"},
                      {"inputs", {{"image", {{"tensor", tensor(1, {1, 8, 16, 3})}}}}}}}};
  const auto o = run(p.dump());
  ASSERT_FALSE(o.ok) << "a prompt read a pool block it did not produce";
  ASSERT_TRUE(o.error.has_value());
  EXPECT_EQ((*o.error)["exception_type"], "invalid_input") << o.error->dump();
  EXPECT_EQ((*o.error)["node_id"], "2");
  const std::string message = (*o.error)["exception_message"];
  EXPECT_NE(message.find("input image: float32 [1, 8, 16, 3] in descriptor"), std::string::npos)
      << message;
  EXPECT_NE(message.find("is no output of this prompt"), std::string::npos) << message;
  // The refused input as ComfyUI's execution_error shows a node's inputs: described by shape
  // and dtype, never read.
  const json events = events_.events();
  ASSERT_GE(events.size(), 2u);
  const json& error = events[events.size() - 2];
  ASSERT_EQ(error["type"], "execution_error") << error.dump();
  EXPECT_EQ(error["data"]["current_inputs"]["image"],
            json::array({"tensor(shape=[1,8,16,3], dtype=1)"}))
      << error.dump();
  expect_consumer_untouched();
  expect_truthful_prompt_runs();
}

// --- the operator's view: comfy-orch run ---

TEST_F(tensor_lies_test, a_lying_tensor_inside_a_dict_is_refused_naming_its_key) {
  const auto o = run(json{{"1", {{"class_type", "LyingLatent"},
                                 {"inputs", {{"lie", 1}, {"claim", 1 << 20}}}}}}
                         .dump());
  ASSERT_FALSE(o.ok) << "a lying tensor inside a container was handed over";
  EXPECT_EQ((*o.error)["exception_type"], "invalid_output") << o.error->dump();
  const std::string message = (*o.error)["exception_message"];
  EXPECT_NE(message.find("output 0.samples:"), std::string::npos) << message;
  expect_truthful_prompt_runs();
}

TEST_F(tensor_lies_test, a_list_that_contains_itself_is_cut_off_not_followed_forever) {
  const auto o =
      run(json{{"1", {{"class_type", "CyclicList"}, {"inputs", json::object()}}}}.dump());
  ASSERT_TRUE(o.ok) << o.error->dump();
  // Five levels are followed (worker/src/node_values.cpp), the sixth is left empty.
  EXPECT_EQ(o.nodes.at("1").outputs[0], json::parse("[[[[[[]]]]]]"));
  expect_consumer_untouched();
}

TEST_F(tensor_lies_test, comfy_orch_run_exits_2_naming_the_producer) {
  // The host this fixture started is not needed: the CLI starts its own.
  executor_.reset();
  host_.reset();
  const fs::path prompt_file = dir_ / "lie.json";
  std::ofstream(prompt_file) << prompt(1, 4194304);
  const fs::path out = dir_ / "out", err = dir_ / "err";
  const std::string cmd = "'" + std::string(ORCH_TEST_COMFY_ORCH) + "' run '" +
                          (dir_ / "deployment.toml").string() + "' --prompt '" +
                          prompt_file.string() + "' >'" + out.string() + "' 2>'" + err.string() +
                          "'";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  std::stringstream text;
  text << std::ifstream(out).rdbuf() << std::ifstream(err).rdbuf();
  EXPECT_EQ(WEXITSTATUS(status), 2) << text.str();
  EXPECT_NE(text.str().find("invalid_output"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("node 1 (LyingImage, env " + producer_ + ")"), std::string::npos)
      << text.str();
  EXPECT_NE(text.str().find("claims 805306368 bytes, but its buffer holds 1536 bytes"),
            std::string::npos)
      << text.str();
}

}  // namespace
}  // namespace orch::runtime_testing
