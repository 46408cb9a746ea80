// ComfyUI's V1 node contract, item by item, through real Python workers (docs/python.md): the
// schema a pack declares reaches the host in the worker's hello, so the host validates and fills
// inputs exactly as for native packs; values cross by value and tensors as pool views.
#include "python_fixture.hpp"

namespace orch::python_testing {
namespace {

class python_contract : public python_worker_test {
 protected:
  const runtime::node_input* input(const std::string& cls, const std::string& name) {
    const auto* c = host_->catalogue().find(cls);
    if (c == nullptr) return nullptr;
    for (const auto& i : c->inputs)
      if (i.name == name) return &i;
    return nullptr;
  }
  // The class as the worker reported it in ready.
  json reported(const std::string& cls) {
    const auto w = info(runtime_testing::env_of(*host_, cls));
    for (const auto& n : w.nodes)
      if (n.value("class_type", "") == cls) return n;
    return {};
  }
};

// The memory table (`comfy-orch status`, /orch/status) and the stand-ins say the same: a worker's
// resident bytes are the sum of its stand-ins'.
void expect_table_agrees_with_stand_ins(runtime::host_runtime& host, const std::string& env) {
  std::uint64_t stand_ins = 0;
  for (const auto& e : host.on_io_thread([&] { return host.stand_ins().entries(); }))
    stand_ins += e.env == env ? e.resident : 0;
  bool found = false;
  for (const auto& r : runtime::read_memory_table(host)) {
    if (r.process != env) continue;
    found = true;
    EXPECT_EQ(r.device_resident, stand_ins) << env;
  }
  EXPECT_TRUE(found) << env;
}

TEST_F(python_contract, the_v1_schema_reaches_the_host_in_the_workers_hello) {
  ASSERT_NO_FATAL_FAILURE(start_python());
  const auto* mode = input("Options", "mode");
  ASSERT_NE(mode, nullptr) << "Options is not in the catalogue";
  EXPECT_EQ(mode->type, "COMBO");
  EXPECT_EQ(mode->options, (std::vector<std::string>{"fast", "exact"}));
  const auto* count = input("Options", "count");
  ASSERT_NE(count, nullptr);
  EXPECT_EQ(count->type, "INT");
  EXPECT_EQ(count->min, 1.0);
  EXPECT_EQ(count->max, 10.0);
  EXPECT_EQ(count->default_value, json(3));
  EXPECT_FALSE(input("Options", "extra")->required);
  EXPECT_TRUE(host_->catalogue().find("Options")->output_node);
  EXPECT_TRUE(host_->catalogue().find("Crash")->not_idempotent);
  EXPECT_EQ(host_->catalogue().find("Describe")->display_name, "Describe Input");
  EXPECT_EQ(host_->catalogue().find("Describe")->outputs,
            (std::vector<std::string>{"STRING", "STRING", "FLOAT", "STRING"}));

  const json describe = reported("Describe");
  EXPECT_EQ(describe["return_names"], json({"kind", "where", "sum", "unique_id"}));
  EXPECT_EQ(describe["hidden"], json({{"unique_id", "UNIQUE_ID"}, {"prompt", "PROMPT"}}));
  EXPECT_EQ(describe["category"], "test/contract");
  const json options = reported("Options");
  EXPECT_EQ(options["description"], "every widget kind");
  EXPECT_EQ(options["inputs"][4]["multiline"], true) << options.dump();
  EXPECT_EQ(options["inputs"][5]["forceInput"], true) << options.dump();
  EXPECT_EQ(reported("Lists")["input_is_list"], true);
  EXPECT_EQ(reported("Lists")["output_is_list"], json({true}));
  EXPECT_EQ(reported("Lists")["experimental"], true);
  EXPECT_EQ(reported("Crash")["deprecated"], true);
  EXPECT_FALSE(reported("Options").contains("deprecated"));
}

TEST_F(python_contract,
       a_combo_value_outside_its_list_or_a_number_past_max_is_refused_before_a_run) {
  ASSERT_NO_FATAL_FAILURE(start_python());
  auto p = executor::parse_prompt(
      json{{"1",
            {{"class_type", "Options"},
             {"inputs",
              {{"mode", "slow"}, {"count", 11}, {"scale", 0.5}, {"flag", true}, {"text", "x"}}}}}}
          .dump());
  ASSERT_TRUE(p.ok());
  const auto report = executor::validate_prompt(*p, host_->catalogue());
  ASSERT_FALSE(report.ok());
  std::set<std::string> types;
  for (const auto& e : report.node_errors.at("1").errors) types.insert(e.type);
  EXPECT_TRUE(types.count("value_not_in_list")) << report.to_json().dump();
  EXPECT_TRUE(types.count("value_bigger_than_max")) << report.to_json().dump();
}

TEST_F(python_contract, widget_values_defaults_and_the_result_dict_reach_and_leave_the_node) {
  ASSERT_NO_FATAL_FAILURE(start_python());
  const auto o = run_json({{"1",
                            {{"class_type", "Options"},
                             {"inputs",
                              {{"mode", "exact"},
                               {"count", 4},
                               {"scale", 0.25},
                               {"flag", false},
                               {"text", "a\nb"}}}}}});
  ASSERT_TRUE(o.ok) << o.error->dump();
  // The optional `extra` was not given, so the node's own default (None) applies.
  EXPECT_EQ(output(o, "1", 0), "exact|4|0.25|False|a\nb|None");
}

TEST_F(python_contract, hidden_values_are_filled_and_an_absent_optional_takes_its_default) {
  ASSERT_NO_FATAL_FAILURE(start_python());
  const auto o = run_json({{"1", {{"class_type", "MakeImage"}, {"inputs", {{"value", 0.5}}}}},
                           {"7", {{"class_type", "Describe"}, {"inputs", {{"image", {"1", 0}}}}}}});
  ASSERT_TRUE(o.ok) << o.error->dump();
  // UNIQUE_ID, the method's own default for `note` (as in ComfyUI), and the PROMPT document.
  EXPECT_EQ(output(o, "7", 3), "7/unset/Describe");
}

TEST_F(python_contract, a_tensor_input_is_a_view_of_the_producers_pool_buffer_in_another_env) {
  ASSERT_NO_FATAL_FAILURE(start_python());
  const auto o =
      run_json({{"1", {{"class_type", "MakeImage"}, {"inputs", {{"value", 0.5}}}}},
                {"2", {{"class_type", "TorchDescribe"}, {"inputs", {{"image", {"1", 0}}}}}},
                {"3", {{"class_type", "Describe"}, {"inputs", {{"image", {"2", 0}}}}}}});
  ASSERT_TRUE(o.ok) << o.error->dump();
  // Producer and consumer are two processes: the same file and offset is the same bytes.
  const std::string made_at = output(o, "1", 1);
  EXPECT_EQ(made_at.rfind("/memfd:orch-pool-", 0), 0u) << made_at;
  EXPECT_EQ(output(o, "2", 2), made_at);
  // The torch env got a torch tensor, the numpy env an array; the contents arrived: 0.5 × 2.
  EXPECT_EQ(output(o, "2", 1), "Tensor torch.float32 (1, 4, 8, 3)");
  EXPECT_EQ(output(o, "3", 0), "numpy ndarray float32 (1, 4, 8, 3)");
  EXPECT_DOUBLE_EQ(output(o, "3", 2).get<double>(), 1.0 * 4 * 8 * 3);
}

// numpy is imported at a worker's first tensor: an env without it starts and runs the nodes that
// pass text, and a tensor sent to it fails naming the fix.
TEST_F(python_contract, a_pack_in_an_env_without_numpy_runs_until_a_tensor_reaches_it) {
  ASSERT_NO_FATAL_FAILURE(make_bare_venv("pybare-nodes"));
  ASSERT_NO_FATAL_FAILURE(start_python({"PyContract", "PyBare"}));
  const auto text = run_json({{"1", {{"class_type", "BareEcho"}, {"inputs", {{"text", "hi"}}}}}});
  ASSERT_TRUE(text.ok) << text.error->dump();
  EXPECT_EQ(output(text, "1", 0), "hi, numpy importable: False");
  const auto image =
      run_json({{"1", {{"class_type", "MakeImage"}, {"inputs", {{"value", 0.5}}}}},
                {"2", {{"class_type", "BareShape"}, {"inputs", {{"image", {"1", 0}}}}}}});
  ASSERT_FALSE(image.ok);
  EXPECT_EQ((*image.error)["node_id"], "2") << image.error->dump();
  const std::string message = (*image.error)["exception_message"];
  EXPECT_NE(message.find("a tensor crossed into an env without numpy"), std::string::npos)
      << message;
  EXPECT_NE(message.find("add numpy to the pack's dependencies"), std::string::npos) << message;
}

TEST_F(python_contract, a_tensor_passed_through_unchanged_leaves_in_the_same_buffer) {
  ASSERT_NO_FATAL_FAILURE(start_python());
  const auto o =
      run_json({{"1", {{"class_type", "MakeImage"}, {"inputs", {{"value", 2.0}}}}},
                {"2", {{"class_type", "PassThrough"}, {"inputs", {{"image", {"1", 0}}}}}},
                {"3", {{"class_type", "Describe"}, {"inputs", {{"image", {"2", 0}}}}}}});
  ASSERT_TRUE(o.ok) << o.error->dump();
  EXPECT_EQ(output(o, "2", 0)["tensor"]["descriptor"], output(o, "1", 0)["tensor"]["descriptor"]);
  EXPECT_EQ(output(o, "2", 1), output(o, "1", 1));
  EXPECT_DOUBLE_EQ(output(o, "3", 2).get<double>(), 2.0 * 4 * 8 * 3);
}

TEST_F(python_contract, an_input_reshaped_in_place_and_returned_leaves_with_its_new_shape) {
  ASSERT_NO_FATAL_FAILURE(start_python());
  const auto o = run_json(
      {{"1", {{"class_type", "MakeImage"}, {"inputs", {{"value", 2.0}}}}},
       {"2", {{"class_type", "PassThrough"}, {"inputs", {{"image", {"1", 0}}, {"flatten", true}}}}},
       {"3", {{"class_type", "Describe"}, {"inputs", {{"image", {"2", 0}}}}}}});
  ASSERT_TRUE(o.ok) << o.error->dump();
  // The same Python object node code was given, but no longer the input's shape.
  EXPECT_EQ(output(o, "2", 0)["tensor"]["shape"], json::array({1, 96}));
  EXPECT_EQ(output(o, "3", 0), "numpy ndarray float32 (1, 96)");
  EXPECT_DOUBLE_EQ(output(o, "3", 2).get<double>(), 2.0 * 96);
}

TEST_F(python_contract, two_python_envs_and_a_native_env_share_one_prompt) {
  ASSERT_NO_FATAL_FAILURE(start_python());
  const auto o = run_json(
      {{"1",
        {{"class_type", "SolidImage"}, {"inputs", {{"width", 8}, {"height", 4}, {"value", 0.25}}}}},
       {"2", {{"class_type", "TorchDescribe"}, {"inputs", {{"image", {"1", 0}}}}}},
       {"3", {{"class_type", "Describe"}, {"inputs", {{"image", {"2", 0}}}}}},
       {"4", {{"class_type", "ImageChecksum"}, {"inputs", {{"image", {"2", 0}}}}}}});
  ASSERT_TRUE(o.ok) << o.error->dump();
  // 8 × 4 × 3 values of 0.25, doubled by the torch node, seen by numpy and by the native pack.
  EXPECT_DOUBLE_EQ(output(o, "3", 2).get<double>(), 0.5 * 8 * 4 * 3);
  EXPECT_NEAR(output(o, "4", 0).get<double>(), 0.5 * 8 * 4 * 3, 1e-3);
}

TEST_F(python_contract, a_latent_and_a_conditioning_cross_envs_with_their_tensors_in_the_pool) {
  ASSERT_NO_FATAL_FAILURE(start_python());
  const auto o = run_json(
      {{"1", {{"class_type", "MakeLatent"}, {"inputs", {{"value", 0.5}}}}},
       {"2", {{"class_type", "ReadLatent"},
              {"inputs", {{"latent", {"1", 0}}, {"conditioning", {"1", 1}}}}}}});
  ASSERT_TRUE(o.ok) << o.error->dump();
  // 1×4×8×8 samples of 0.5; pooled 1×16 of 1.0; the numpy scalar crossed as a FLOAT.
  EXPECT_EQ(output(o, "2", 0),
            "samples Tensor sum 128.0, batch [0], note made; cond (1, 3, 16), pooled sum 16.0, "
            "strength 0.50");
  // On the wire: a dict holding a tensor, which the host leased like any other output.
  const json latent = output(o, "1", 0);
  ASSERT_TRUE(latent.contains("dict")) << latent.dump();
  EXPECT_TRUE(latent["dict"]["samples"].contains("tensor")) << latent.dump();
  EXPECT_EQ(latent["dict"]["batch_index"], json::array({0}));
  const json conditioning = output(o, "1", 1);
  ASSERT_TRUE(conditioning.is_array() && conditioning[0].is_array()) << conditioning.dump();
  EXPECT_TRUE(conditioning[0][0].contains("tensor"));
  EXPECT_TRUE(conditioning[0][1]["dict"]["pooled_output"].contains("tensor"));
  EXPECT_TRUE(output(o, "2", 1)["dict"]["samples"].contains("tensor"));
}

TEST_F(python_contract, outputs_a_node_built_fresh_outlive_its_callback_until_they_are_copied) {
  ASSERT_NO_FATAL_FAILURE(start_python({"PyContract"}));
  // Two 256 KiB strings: far above malloc's mmap threshold, within the channel's 1 MiB body.
  const auto o = run_json({{"1", {{"class_type", "BigText"}, {"inputs", {{"kib", 256}}}}}});
  ASSERT_TRUE(o.ok) << o.error->dump().substr(0, 2000);
  const std::string text = output(o, "1", 0);
  EXPECT_EQ(text.size(), (256u << 10) + 1);
  EXPECT_EQ(text.back(), '!');
  EXPECT_EQ(output(o, "1", 1)[1]["dict"]["tail"].get<std::string>(), std::string(256u << 10, 'z'));
}

TEST_F(python_contract, input_is_list_passes_each_input_as_a_list_and_an_output_list_crosses) {
  ASSERT_NO_FATAL_FAILURE(start_python());
  const auto o = run_json({{"1", {{"class_type", "Lists"}, {"inputs", {{"value", 3}}}}}});
  ASSERT_TRUE(o.ok) << o.error->dump();
  EXPECT_EQ(output(o, "1", 0), json({"list:[3]"}));  // the OUTPUT_IS_LIST slot: its list
  EXPECT_EQ(o.nodes.at("1").output_lists, json::parse(R"([["list:[3]"]])"));
}

// An object stays in its worker for its own env; another env's node gets it as comfy-env lets
// it cross (docs/comfyui.md, "Objects across envs"): pickled, where that env can import its
// type, else refused naming the type, both envs and the fix.
TEST_F(python_contract, an_object_crosses_to_another_env_that_imports_its_type_or_is_refused) {
  ASSERT_NO_FATAL_FAILURE(start_python());
  auto same = run_json({{"1", {{"class_type", "MakeThing"}, {"inputs", {{"size", 9}}}}},
                        {"2", {{"class_type", "UseThing"}, {"inputs", {{"thing", {"1", 0}}}}}}});
  ASSERT_TRUE(same.ok) << same.error->dump();
  EXPECT_EQ(output(same, "2", 0), 9);

  auto other =
      run_json({{"1", {{"class_type", "MakeThing"}, {"inputs", {{"size", 9}}}}},
                {"2", {{"class_type", "UseOtherThing"}, {"inputs", {{"thing", {"1", 0}}}}}}});
  ASSERT_FALSE(other.ok);
  const std::string message = (*other.error)["exception_message"];
  const std::string maker = runtime_testing::env_of(*host_, "MakeThing");
  const std::string user = runtime_testing::env_of(*host_, "UseOtherThing");
  EXPECT_EQ((*other.error)["exception_type"], "TypeError");
  EXPECT_NE(message.find("nodes.Thing made in env '" + maker + "'"), std::string::npos) << message;
  EXPECT_NE(message.find("cannot be used in env '" + user + "': this env cannot import its type"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("register_serializer"), std::string::npos) << message;

  auto plain =
      run_json({{"1", {{"class_type", "MakePlainThing"}, {"inputs", {{"size", 7}}}}},
                {"2", {{"class_type", "UseOtherThing"}, {"inputs", {{"thing", {"1", 0}}}}}}});
  ASSERT_TRUE(plain.ok) << plain.error->dump();
  EXPECT_EQ(output(plain, "2", 0), 7);  // a SimpleNamespace, unpickled in the other env
}

// Progress is lossy: a node that reports faster than the host reads keeps only its latest report
// back (worker/src/progress_reports.hpp) and never fills the channel, which had closed the worker
// as a peer not reading (issue 55, item 7). The last report is the node's last value.
TEST_F(python_contract, a_flood_of_progress_reports_neither_kills_the_worker_nor_is_lost_last) {
  ASSERT_NO_FATAL_FAILURE(start_python());
  const json flood = {{"1", {{"class_type", "ProgressFlood"}, {"inputs", {{"count", 50000}}}}}};
  auto first = run_json(flood);
  ASSERT_TRUE(first.ok) << first.error->dump();
  auto second = run_json(flood);
  ASSERT_TRUE(second.ok) << second.error->dump();
  EXPECT_EQ(output(first, "1", 0), output(second, "1", 0));  // the same worker: never restarted
  json last;
  for (const auto& e : events_.events())
    if (e["type"] == "progress") last = e["data"];
  ASSERT_TRUE(last.is_object());
  EXPECT_EQ(last["value"], 50000);  // the node's last report always arrives
  EXPECT_EQ(last["max"], 50000);
}

TEST_F(python_contract, the_worker_environment_follows_comfy_env) {
  ::setenv("PYTHONPATH", "/nonexistent/shadowing", 1);
  ::setenv("PYTHONSTARTUP", "/nonexistent/startup.py", 1);
  start_python({"PyContract"});
  ::unsetenv("PYTHONPATH");
  ::unsetenv("PYTHONSTARTUP");
  ASSERT_FALSE(HasFatalFailure());
  const auto o = run_json({{"1", {{"class_type", "Environment"}, {"inputs", json::object()}}}});
  ASSERT_TRUE(o.ok) << o.error->dump();
  const std::string pack = (dir_ / "packs/PyContract").string();
  EXPECT_EQ(output(o, "1", 0),
            "PY_CONTRACT_VAR=from-pack|PYTHONNOUSERSITE=1|PYTHONPATH=<unset>|"
            "PYTHONSTARTUP=<unset>|PYTHONHOME=<unset>|cwd=" +
                pack + "|path0=" + pack + "|torch=False");
}

TEST_F(python_contract, a_model_a_python_node_registers_is_a_stand_in_the_host_can_evict) {
  ASSERT_NO_FATAL_FAILURE(start_python({"PyContract"}));
  const auto o = run_json(
      {{"1", {{"class_type", "LoadModel"}, {"inputs", {{"name", "weights"}, {"mib", 64}}}}}});
  ASSERT_TRUE(o.ok) << o.error->dump();
  EXPECT_EQ(output(o, "1", 0), 1);  // created by this call
  const std::string env = runtime_testing::env_of(*host_, "LoadModel");
  const auto entries = host_->on_io_thread([&] { return host_->stand_ins().entries(); });
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].env, env);
  EXPECT_EQ(entries[0].size, 64u << 20);
  std::uint64_t free_before = 0;
  host_->on_io_thread([&] {
    auto* dev = host_->memory().backend();
    dev->api().mem_get_info(dev->device(), &free_before, nullptr);
  });
  // 64 MiB more than is free: the Python worker's model is the only candidate, evicted by a
  // request to that worker, counted by its receipt.
  const auto steps = host_->free_through_stand_ins(env, free_before + (64u << 20));
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].env, env);
  EXPECT_EQ(steps[0].id, entries[0].id);
  EXPECT_EQ(steps[0].freed, entries[0].resident);
}

TEST_F(python_contract, a_torch_module_moved_to_the_device_is_registered_as_comfy_env_does) {
  ASSERT_NO_FATAL_FAILURE(start_python({"PyOther"}));
  const auto o =
      run_json({{"1", {{"class_type", "LoadTorchModel"}, {"inputs", {{"width", 256}}}}}});
  ASSERT_TRUE(o.ok) << o.error->dump();
  const std::int64_t parameters = 256 * 256 + 256 + 2 * 256;  // Linear, then LayerNorm
  EXPECT_EQ(output(o, "1", 0), parameters);
  const auto entries = host_->on_io_thread([&] { return host_->stand_ins().entries(); });
  ASSERT_EQ(entries.size(), 1u) << "moved twice, registered once";
  EXPECT_EQ(entries[0].env, runtime_testing::env_of(*host_, "LoadTorchModel"));
  EXPECT_NE(entries[0].id.find("Sequential_1"), std::string::npos) << entries[0].id;
  EXPECT_EQ(entries[0].size, static_cast<std::uint64_t>(parameters) * 4);
}

// A model moved submodule by submodule and then whole (ComfyUI's ModelPatcher.load) is one model:
// one record of its size, never a record per submodule plus one for the whole.
TEST_F(python_contract, a_module_moved_part_by_part_then_whole_is_one_record_of_its_size) {
  ASSERT_NO_FATAL_FAILURE(start_python({"PyOther"}));
  const auto o = run_json({{"1", {{"class_type", "LoadTorchModelInParts"},
                                  {"inputs", {{"width", 256}, {"layers", 4}}}}}});
  ASSERT_TRUE(o.ok) << o.error->dump();
  const std::int64_t parameters = 4 * (256 * 256 + 256);
  EXPECT_EQ(output(o, "1", 0), parameters);
  const auto entries = host_->on_io_thread([&] { return host_->stand_ins().entries(); });
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_NE(entries[0].id.find("Sequential_"), std::string::npos) << entries[0].id;
  EXPECT_EQ(entries[0].size, static_cast<std::uint64_t>(parameters) * 4);
  expect_table_agrees_with_stand_ins(*host_, entries[0].env);
}

TEST_F(python_contract, a_module_moved_by_a_node_that_imports_torch_lazily_is_recorded) {
  ASSERT_NO_FATAL_FAILURE(start_python({"PyContract"}));
  const auto o =
      run_json({{"1", {{"class_type", "LoadTorchLazily"}, {"inputs", {{"width", 128}}}}}});
  ASSERT_TRUE(o.ok) << o.error->dump();
  const auto entries = host_->on_io_thread([&] { return host_->stand_ins().entries(); });
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_NE(entries[0].id.find("Linear_"), std::string::npos) << entries[0].id;
  EXPECT_EQ(entries[0].size, static_cast<std::uint64_t>(128 * 128 + 128) * 4);
}

// On the cpu device the CPU is the worker's device: a model moved there is a stand-in the host
// evicts with a receipt, as on a GPU.
TEST_F(python_contract, a_module_moved_to_the_cpu_device_is_a_stand_in_the_host_can_evict) {
  ASSERT_NO_FATAL_FAILURE(start_python({"PyOther"}, false, "cpu"));
  const auto o = run_json({{"1", {{"class_type", "LoadTorchModelInParts"},
                                  {"inputs", {{"width", 256}, {"layers", 4}}}}}});
  ASSERT_TRUE(o.ok) << o.error->dump();
  const std::string env = runtime_testing::env_of(*host_, "LoadTorchModelInParts");
  const auto entries = host_->on_io_thread([&] { return host_->stand_ins().entries(); });
  ASSERT_EQ(entries.size(), 1u);
  const std::uint64_t size = 4u * (256 * 256 + 256) * 4;
  EXPECT_EQ(entries[0].size, size);
  // All the machine's memory: more than is ever free, whatever else runs, so the one candidate
  // is evicted (the free reading of the cpu device moves with the machine).
  std::uint64_t free_now = 0;
  std::uint64_t total = 0;
  host_->on_io_thread([&] {
    auto* dev = host_->memory().backend();
    dev->api().mem_get_info(dev->device(), &free_now, &total);
  });
  expect_table_agrees_with_stand_ins(*host_, env);
  const auto steps = host_->free_through_stand_ins(env, total);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].id, entries[0].id);
  EXPECT_EQ(steps[0].freed, entries[0].resident);
  expect_table_agrees_with_stand_ins(*host_, env);  // what left is what the receipt said
}

TEST_F(python_contract, torch_allocates_through_the_allocator_plugin_where_it_has_cuda) {
  if (shell(test_python() + " -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() "
                            "else 1)' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "torch has no CUDA device here: CUDAPluggableAllocator cannot be installed "
                    "(run on a machine with an NVIDIA GPU and a CUDA build of torch)";
  }
  ASSERT_NO_FATAL_FAILURE(start_python({"PyOther"}));
  const auto o = run_json({{"1", {{"class_type", "AllocatorName"}, {"inputs", json::object()}}}});
  ASSERT_TRUE(o.ok) << o.error->dump();
  EXPECT_EQ(output(o, "1", 0), "pluggable 1048576");
}

}  // namespace
}  // namespace orch::python_testing
