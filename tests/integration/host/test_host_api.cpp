// liborch_host.so as its callers see it (orchestrator/host_api/include/orch/host/host.h): loaded with
// dlopen, symbols by version, a real deployment with real workers, blocks held and released by
// the caller, and everything a caller can get wrong refused without a crash.
#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "orch/host/host.h"
#include "python_script.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The entry points, looked up by version as a ctypes caller would.
#define ORCH_HOST_FUNCTIONS(X)                                                                  \
  X(start)                                                                                      \
  X(nodes) X(begin_prompt) X(call) X(allocate) X(map) X(release) X(free) X(status) X(interrupt) \
      X(string_free) X(stop) X(models) X(evict) X(pinned_reserve) X(pinned_release)

struct host_api {
  void* handle = nullptr;
#define ORCH_HOST_MEMBER(name) decltype(&::orch_host_##name) name = nullptr;
  ORCH_HOST_FUNCTIONS(ORCH_HOST_MEMBER)
#undef ORCH_HOST_MEMBER
};

const host_api& api() {
  // Never dlclose'd: the library's static loggers are destroyed at exit, which needs its code.
  static const host_api a = [] {
    host_api r;
    r.handle = ::dlopen(ORCH_TEST_HOST_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (r.handle == nullptr) return r;
// Each entry point under the version node that introduced it (orchestrator/host_api/liborch_host.map).
#define ORCH_HOST_LOOKUP(name)                                                                \
  r.name = reinterpret_cast<decltype(&::orch_host_##name)>(                                   \
      ::dlvsym(r.handle, "orch_host_" #name, "ORCH_HOST_1"));                                 \
  if (r.name == nullptr)                                                                      \
    r.name = reinterpret_cast<decltype(&::orch_host_##name)>(                                 \
        ::dlvsym(r.handle, "orch_host_" #name, "ORCH_HOST_2"));
    ORCH_HOST_FUNCTIONS(ORCH_HOST_LOOKUP)
#undef ORCH_HOST_LOOKUP
    return r;
  }();
  return a;
}

json take(char* text) {
  if (text == nullptr) return nullptr;
  json j = json::parse(text, nullptr, false);
  api().string_free(text);
  return j;
}

class host_library : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(api().handle, nullptr) << ::dlerror();
    ASSERT_NE(api().stop, nullptr);
    char pattern[] = "/tmp/orch-host-api-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    if (host_ != nullptr) api().stop(host_);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // The native test pack (and `packs`, the [packs] paths to list instead), on a 32 MiB pool.
  fs::path write_deployment(const std::string& extra = "",
                            const std::string& packs = "\"packs/Native\"") {
    fs::create_directories(dir_ / "packs/Native/nodes");
    std::ofstream(dir_ / "packs/Native/nodes/comfy-env.toml")
        << "[worker]\nlibrary = \"liborch_pack_test_nodes.so\"\n";
    const fs::path file = dir_ / "deployment.toml";
    std::ofstream(file) << "[host]\ndevice = \"sim\"\n[host.sim]\ncapacity = \"1GiB\"\n"
                        << "[plugins]\nsearch_paths = [\"" << ORCH_TEST_PLUGIN_DIR << "\"]\n"
                        << "[packs]\npaths = [" << packs << "]\nlibrary_paths = [\""
                        << ORCH_TEST_PACKS_DIR << "\"]\n"
                        << "[workers]\nhandshake_timeout = \"20s\"\nrestart_backoff = \"50ms\"\n"
                        << "[shm]\npinned_pool_size = \"32MiB\"\n"
                        << extra;
    return file;
  }

  void start(const fs::path& file) {
    orch_host_options o{};
    o.struct_size = sizeof o;
    const std::string path = file.string();
    o.deployment = path.c_str();
    o.worker_executable = ORCH_TEST_WORKER;
    o.on_event = [](void* user, const char* type, const char* data) {
      auto* self = static_cast<host_library*>(user);
      std::lock_guard lock(self->events_mutex_);
      self->events_.push_back({{"type", type}, {"data", json::parse(data)}});
    };
    o.user = this;
    char* error = nullptr;
    ASSERT_EQ(api().start(&o, &host_, &error), ORCH_HOST_OK) << take(error).dump();
    ASSERT_NE(host_, nullptr);
  }

  // A ComfyUI tree in dir_/ComfyUI with one native pack, started from its description (the
  // root added to `description`) instead of a deployment file.
  void start_comfyui(json description) {
    const fs::path nodes = dir_ / "ComfyUI/custom_nodes/ComfyUI-Native/nodes";
    fs::create_directories(nodes);
    fs::create_directories(dir_ / "ComfyUI/comfy");
    // The test pack's library lives with the tests, not with the library's own packs.
    std::ofstream(nodes / "comfy-env.toml")
        << "[worker]\nlibrary = \"" << ORCH_TEST_PACKS_DIR << "/liborch_pack_test_nodes.so\"\n";
    description["root"] = (dir_ / "ComfyUI").string();
    const std::string text = description.dump();
    orch_host_options o{};
    o.struct_size = sizeof o;
    o.comfyui = text.c_str();
    o.worker_executable = ORCH_TEST_WORKER;
    char* error = nullptr;
    ASSERT_EQ(api().start(&o, &host_, &error), ORCH_HOST_OK) << take(error).dump();
  }

  // orch_host_call: its status, and the response (or the refusal) as JSON.
  std::pair<int, json> call(const json& request) {
    char* response = nullptr;
    const int status = api().call(host_, request.dump().c_str(), &response);
    return {status, take(response)};
  }

  static orch_host_block block_of(const json& descriptor) {
    orch_host_block b{};
    b.struct_size = sizeof b;
    b.segment = descriptor["segment"];
    b.generation = descriptor["generation"];
    b.offset = descriptor["offset"];
    b.size = descriptor["size"];
    return b;
  }

  static json blob_of(const orch_host_block& b, std::uint64_t bytes) {
    return {{"tensor",
             {{"dtype", 2},
              {"shape", {bytes}},
              {"descriptor",
               {{"segment", b.segment},
                {"generation", b.generation},
                {"offset", b.offset},
                {"size", b.size}}}}}};
  }

  fs::path dir_;
  orch_host* host_ = nullptr;
  std::mutex events_mutex_;
  std::vector<json> events_;
};

TEST_F(host_library, every_entry_point_is_exported_under_its_version_and_the_runtime_only_privately) {
  const auto& a = api();
  for (void* fn : {reinterpret_cast<void*>(a.start), reinterpret_cast<void*>(a.nodes),
                   reinterpret_cast<void*>(a.begin_prompt), reinterpret_cast<void*>(a.call),
                   reinterpret_cast<void*>(a.allocate), reinterpret_cast<void*>(a.map),
                   reinterpret_cast<void*>(a.release), reinterpret_cast<void*>(a.free),
                   reinterpret_cast<void*>(a.status), reinterpret_cast<void*>(a.interrupt),
                   reinterpret_cast<void*>(a.string_free), reinterpret_cast<void*>(a.models),
                   reinterpret_cast<void*>(a.evict), reinterpret_cast<void*>(a.pinned_reserve),
                   reinterpret_cast<void*>(a.pinned_release)})
    EXPECT_NE(fn, nullptr);
  // orch::runtime::host_python(const manifests::deployment&), as the compiler names it: the
  // runtime's C++ API is inside, and exported under no version (comfy-orch links its own).
  const char* internal = "_ZN4orch7runtime11host_pythonERKNS_9manifests10deploymentE";
  EXPECT_EQ(::dlvsym(a.handle, internal, "ORCH_HOST_1"), nullptr);
  EXPECT_EQ(::dlvsym(a.handle, internal, "ORCH_HOST_2"), nullptr);
  EXPECT_EQ(::dlvsym(a.handle, internal, "ORCH_HOST_PRIVATE"), nullptr);
  EXPECT_EQ(::dlsym(a.handle, internal), nullptr);
  // Nothing of the libraries inside (spdlog, fmt, Boost, nlohmann-json, toml++) is exported, so
  // the caller's own copies never bind to ours: every exported name is the C API or orch's.
  std::FILE* nm = ::popen("nm -DC --defined-only '" ORCH_TEST_HOST_LIBRARY "'", "r");
  ASSERT_NE(nm, nullptr);
  std::vector<std::string> foreign;
  char chunk[4096];
  std::size_t exported = 0;
  std::string name;
  while (std::fgets(chunk, sizeof chunk, nm) != nullptr) {
    name += chunk;  // a name may be longer than a chunk: Beast's operations run to 10 KiB
    if (name.back() != '\n') continue;
    name.pop_back();
    const auto third_space = name.find(' ', name.find(' ') + 1);
    name = third_space == std::string::npos ? name : name.substr(third_space + 1);
    ++exported;
    bool ours = name.rfind("orch_host_", 0) == 0 || name.rfind("ORCH_HOST_", 0) == 0;
    for (const char* prefix : {"orch::", "vtable for orch::", "typeinfo for orch::",
                               "typeinfo name for orch::", "VTT for orch::",
                               "guard variable for orch::"})
      ours = ours || name.rfind(prefix, 0) == 0;
    if (!ours) foreign.push_back(name);
    name.clear();
  }
  EXPECT_EQ(::pclose(nm), 0);
  EXPECT_GT(exported, 16u);
  EXPECT_TRUE(foreign.empty()) << foreign.size() << " foreign symbols exported, e.g. "
                               << foreign.front();
}

TEST_F(host_library, bad_arguments_are_refused_with_a_reason_and_nothing_starts) {
  char* error = nullptr;
  orch_host* h = reinterpret_cast<orch_host*>(0x1);
  EXPECT_EQ(api().start(nullptr, &h, &error), ORCH_HOST_INVALID);
  EXPECT_EQ(h, nullptr);
  EXPECT_EQ(take(error)["code"], "invalid_argument");
  orch_host_options o{};  // struct_size 0: a caller that does not speak this ABI
  o.deployment = "x.toml";
  EXPECT_EQ(api().start(&o, &h, &error), ORCH_HOST_INVALID);
  EXPECT_EQ(take(error)["code"], "invalid_argument");
  // Every other entry point takes a null host without a crash.
  EXPECT_EQ(api().nodes(nullptr), nullptr);
  EXPECT_EQ(api().status(nullptr), nullptr);
  EXPECT_EQ(api().call(nullptr, "{}", &error), ORCH_HOST_INVALID);
  api().interrupt(nullptr);
  api().stop(nullptr);
}

TEST_F(host_library, a_deployment_with_errors_is_refused_with_file_line_and_key) {
  const fs::path file = write_deployment("[workers]\nbogus_key = 1\n");
  orch_host_options o{};
  o.struct_size = sizeof o;
  const std::string path = file.string();
  o.deployment = path.c_str();
  char* error = nullptr;
  EXPECT_EQ(api().start(&o, &host_, &error), ORCH_HOST_INVALID);
  EXPECT_EQ(host_, nullptr);
  const json e = take(error);
  EXPECT_EQ(e["code"], "invalid_deployment") << e.dump();
  ASSERT_TRUE(e["diagnostics"].is_array() && !e["diagnostics"].empty()) << e.dump();
  const json d = e["diagnostics"][0];
  EXPECT_EQ(d["file"], path);
  EXPECT_GT(d["line"].get<int>(), 0);
  EXPECT_NE(e.dump().find("workers"), std::string::npos) << e.dump();
}

// ComfyUI as the host describes its tree instead of writing a deployment: its custom_nodes, its
// device, its aimdo's level and its memory arguments. Plugins and native packs are found beside
// the library (not beside this test's executable), as inside ComfyUI's python3.
TEST_F(host_library, a_comfyui_tree_description_starts_a_host_with_comfyuis_memory_flags) {
  ASSERT_NO_FATAL_FAILURE(start_comfyui({{"device", "sim"},
                                         {"protocol_level", 3},
                                         {"memory", {{"highvram", true}, {"reserve_vram", 0}}}}));
  const json state = take(api().nodes(host_));
  EXPECT_TRUE(state["classes"].contains("TestBlob")) << state.dump();
  EXPECT_EQ(state["workers"][0]["state"], "ready") << state.dump();
  const json status = take(api().status(host_));
  const json& row = status["memory"][0];
  EXPECT_EQ(row["process"], "host");
  EXPECT_EQ(row["manager"], "ledger") << row.dump();  // --highvram selects ComfyUI's ledger
  EXPECT_NE(row["reason"].get<std::string>().find("highvram"), std::string::npos) << row.dump();
}

// ComfyUI's comfy-aimdo speaks a level (DESIGN §4.5); the host runs at it and its workers'
// plugins are chosen against it, as under `run`.
TEST_F(host_library, a_described_aimdo_level_is_the_hosts_and_its_workers_follow_it) {
  ASSERT_NO_FATAL_FAILURE(start_comfyui({{"device", "sim"}, {"protocol_level", 2}}));
  const json rows = take(api().status(host_))["memory"];
  ASSERT_EQ(rows.size(), 2u) << rows.dump();
  for (const auto& row : rows) {
    EXPECT_EQ(row["manager"], "pager") << row.dump();
    EXPECT_EQ(row["level"], 2) << row.dump();
  }
}

TEST_F(host_library, a_bad_comfyui_description_is_refused_naming_the_key) {
  auto refused = [&](const std::string& description) {
    orch_host_options o{};
    o.struct_size = sizeof o;
    o.comfyui = description.c_str();
    char* error = nullptr;
    EXPECT_EQ(api().start(&o, &host_, &error), ORCH_HOST_INVALID) << description;
    EXPECT_EQ(host_, nullptr);
    return take(error).dump();
  };
  const std::string root = (dir_ / "ComfyUI").string();
  fs::create_directories(dir_ / "ComfyUI/comfy");
  EXPECT_NE(refused("not json").find("not JSON"), std::string::npos);
  EXPECT_NE(refused(R"({"custom_nodes": "x"})").find("root"), std::string::npos);
  EXPECT_NE(refused(json{{"root", root}, {"nodes", 1}}.dump()).find(R"(key \"nodes\")"),
            std::string::npos);
  EXPECT_NE(refused(json{{"root", root}, {"memory", {{"highvram", json::array()}}}}.dump())
                .find("memory.highvram"),
            std::string::npos);
  // A key the deployment does not have: the parser's diagnostic names it.
  EXPECT_NE(refused(json{{"root", root}, {"memory", {{"bogus_flag", true}}}}.dump())
                .find("bogus_flag"),
            std::string::npos);
  EXPECT_NE(refused(json{{"root", root}, {"protocol_level", 9}}.dump()).find("protocol_level"),
            std::string::npos);
}

TEST_F(host_library, a_node_runs_and_its_output_block_is_the_callers_until_released) {
  ASSERT_NO_FATAL_FAILURE(start(write_deployment()));
  const json nodes = take(api().nodes(host_));
  ASSERT_TRUE(nodes["classes"].contains("TestBlob")) << nodes.dump();
  EXPECT_EQ(nodes["classes"]["TestBlob"]["env"], "native-nodes");
  EXPECT_EQ(nodes["workers"][0]["state"], "ready");
  EXPECT_GE(api().begin_prompt(host_), 1u);

  auto [status, r] = call({{"node", "1"}, {"class_type", "TestBlob"}, {"inputs", {{"mib", 1}}}});
  ASSERT_EQ(status, ORCH_HOST_OK) << r.dump();
  ASSERT_EQ(r["held"].size(), 1u) << r.dump();
  orch_host_block b = block_of(r["held"][0]);
  ASSERT_EQ(api().map(host_, &b), ORCH_HOST_OK);
  // The worker's bytes, read in this process: TestBlob sets the first and the last.
  EXPECT_EQ(static_cast<unsigned char*>(b.data)[0], 7);
  EXPECT_EQ(static_cast<unsigned char*>(b.data)[(1u << 20) - 1], 9);
  // Held, it is any call's input.
  auto [peek_status, peek] = call(
      {{"node", "2"}, {"class_type", "TestBlobPeek"}, {"inputs", {{"blob", r["outputs"][0]}}}});
  ASSERT_EQ(peek_status, ORCH_HOST_OK) << peek.dump();
  EXPECT_EQ(peek["outputs"][0], 16);
  // Released once; a second release and a use after it are refused, not crashes.
  EXPECT_EQ(api().release(host_, &b), ORCH_HOST_OK);
  EXPECT_EQ(api().release(host_, &b), ORCH_HOST_INVALID);
  EXPECT_EQ(api().map(host_, &b), ORCH_HOST_INVALID);
  auto [after, refusal] = call(
      {{"node", "3"}, {"class_type", "TestBlobPeek"}, {"inputs", {{"blob", r["outputs"][0]}}}});
  EXPECT_EQ(after, ORCH_HOST_INVALID);
  EXPECT_EQ(refusal["code"], "invalid_input") << refusal.dump();
}

TEST_F(host_library, a_block_the_caller_allocated_and_filled_reaches_a_worker) {
  ASSERT_NO_FATAL_FAILURE(start(write_deployment()));
  orch_host_block b{};
  b.struct_size = sizeof b;
  ASSERT_EQ(api().allocate(host_, 4096, &b), ORCH_HOST_OK);
  ASSERT_NE(b.data, nullptr);
  std::memset(b.data, 0, 4096);
  static_cast<unsigned char*>(b.data)[0] = 40;
  static_cast<unsigned char*>(b.data)[4095] = 2;
  auto [status, r] = call(
      {{"node", "1"}, {"class_type", "TestBlobPeek"}, {"inputs", {{"blob", blob_of(b, 4096)}}}});
  ASSERT_EQ(status, ORCH_HOST_OK) << r.dump();
  EXPECT_EQ(r["outputs"][0], 42);
  // A generation past the pool's 32 bits names no block, even one whose low bits match.
  orch_host_block wide = b;
  wide.generation += std::uint64_t{1} << 32;
  EXPECT_EQ(api().map(host_, &wide), ORCH_HOST_INVALID);
  EXPECT_EQ(api().map(host_, &b), ORCH_HOST_OK);
  EXPECT_EQ(api().release(host_, &b), ORCH_HOST_OK);
  // A zero-sized or short struct is refused.
  orch_host_block short_block{};
  EXPECT_EQ(api().allocate(host_, 4096, &short_block), ORCH_HOST_INVALID);
}

TEST_F(host_library, a_block_the_caller_does_not_hold_never_reaches_a_worker) {
  ASSERT_NO_FATAL_FAILURE(start(write_deployment()));
  orch_host_block forged{};
  forged.struct_size = sizeof forged;
  forged.segment = 1;
  forged.generation = 1;
  forged.size = 4096;
  auto [status, r] = call({{"node", "1"},
                           {"class_type", "TestBlobPeek"},
                           {"inputs", {{"blob", blob_of(forged, 4096)}}}});
  EXPECT_EQ(status, ORCH_HOST_INVALID);
  EXPECT_EQ(r["code"], "invalid_input") << r.dump();
}

TEST_F(host_library, bad_requests_and_unknown_classes_are_refused_and_node_errors_are_failures) {
  ASSERT_NO_FATAL_FAILURE(start(write_deployment()));
  char* response = nullptr;
  EXPECT_EQ(api().call(host_, "{not json", &response), ORCH_HOST_INVALID);
  EXPECT_EQ(take(response)["code"], "invalid_request");
  EXPECT_EQ(call({{"class_type", "TestEmpty"}}).first, ORCH_HOST_INVALID);
  auto [unknown, u] =
      call({{"node", "1"}, {"class_type", "NoSuchNode"}, {"inputs", json::object()}});
  EXPECT_EQ(unknown, ORCH_HOST_INVALID);
  EXPECT_EQ(u["code"], "missing_node_type");
  auto [failed, f] = call({{"node", "9"}, {"class_type", "TestFail"}, {"inputs", json::object()}});
  EXPECT_EQ(failed, ORCH_HOST_FAILED);
  EXPECT_EQ(f["error"]["type"], "value_error") << f.dump();
  EXPECT_EQ(f["error"]["node"], "9");
  EXPECT_EQ(f["error"]["message"], "TestFail always fails");
}

TEST_F(host_library, a_worker_killed_mid_call_fails_that_call_and_the_next_one_runs) {
  ASSERT_NO_FATAL_FAILURE(start(write_deployment()));
  const json status = take(api().status(host_));
  const pid_t pid = status["workers"][0]["pid"];
  ASSERT_GT(pid, 0) << status.dump();
  auto running = std::async(std::launch::async, [&] {
    return call({{"node", "1"}, {"class_type", "TestSleep"}, {"inputs", {{"ms", 20000}}}});
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_EQ(running.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto [killed, k] = running.get();
  EXPECT_EQ(killed, ORCH_HOST_RETRYABLE);  // not now: the next call gets a new worker
  EXPECT_EQ(k["error"]["type"], "worker_died") << k.dump();
  // The supervisor restarts it: a later call runs in the new generation.
  int ok = ORCH_HOST_FAILED;
  for (int i = 0; i < 100 && ok != ORCH_HOST_OK; ++i) {
    ok = call({{"node", "2"}, {"class_type", "TestEmpty"}, {"inputs", json::object()}}).first;
    if (ok != ORCH_HOST_OK) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(ok, ORCH_HOST_OK);
  std::lock_guard lock(events_mutex_);
  bool saw_ready = false;
  for (const auto& e : events_)
    saw_ready = saw_ready || (e["type"] == "worker" && e["data"]["state"] == "ready");
  EXPECT_TRUE(saw_ready);
}

TEST_F(host_library, progress_reaches_the_callback_and_interrupt_stops_the_running_node) {
  ASSERT_NO_FATAL_FAILURE(start(write_deployment()));
  api().begin_prompt(host_);
  auto running = std::async(std::launch::async, [&] {
    return call({{"node", "5"}, {"class_type", "TestSleep"}, {"inputs", {{"ms", 20000}}}});
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  api().interrupt(host_);
  ASSERT_EQ(running.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto [status, r] = running.get();
  EXPECT_EQ(status, ORCH_HOST_INTERRUPTED);
  EXPECT_EQ(r["error"]["type"], "interrupted") << r.dump();
  std::lock_guard lock(events_mutex_);
  bool progress = false;
  for (const auto& e : events_)
    progress = progress || (e["type"] == "progress" && e["data"]["node"] == "5" &&
                            e["data"]["env"] == "native-nodes");
  EXPECT_TRUE(progress);
}

// An event callback runs on the host's io thread, which delivers workers' answers: a call there
// that waits for one is refused at once instead of waiting on itself forever.
TEST_F(host_library, an_eviction_or_free_from_an_event_callback_is_refused_not_a_deadlock) {
  struct probe {
    std::atomic<orch_host*> host{nullptr};
    std::atomic<int> evict_status{-1};
    std::string evict_error;
    std::atomic<bool> freed{false};
  } p;
  orch_host_options o{};
  o.struct_size = sizeof o;
  const std::string path = write_deployment().string();
  o.deployment = path.c_str();
  o.worker_executable = ORCH_TEST_WORKER;
  o.user = &p;
  o.on_event = [](void* user, const char* type, const char*) {
    auto* q = static_cast<probe*>(user);
    orch_host* h = q->host.load();
    if (std::string(type) != "progress" || h == nullptr || q->evict_status.load() != -1) return;
    char* receipt = nullptr;
    q->evict_error = "";
    const int st = api().evict(h, "native-nodes", 1, 1, &receipt);
    q->evict_error = take(receipt).dump();
    char* freed = api().free(h, 1, 1);
    q->freed = freed != nullptr;
    api().string_free(freed);
    q->evict_status = st;
  };
  char* error = nullptr;
  ASSERT_EQ(api().start(&o, &host_, &error), ORCH_HOST_OK) << take(error).dump();
  p.host = host_;
  api().begin_prompt(host_);
  auto done = std::async(std::launch::async, [&] {
    return call({{"node", "6"}, {"class_type", "TestSleep"}, {"inputs", {{"ms", 300}}}});
  });
  ASSERT_EQ(done.wait_for(std::chrono::seconds(20)), std::future_status::ready) << "deadlock";
  EXPECT_EQ(done.get().first, ORCH_HOST_OK);
  p.host = nullptr;
  EXPECT_EQ(p.evict_status.load(), ORCH_HOST_FAILED);
  EXPECT_NE(p.evict_error.find("wrong_thread"), std::string::npos) << p.evict_error;
  EXPECT_TRUE(p.freed.load());  // answered (nothing asked), not waited for
}

// A caller built for ORCH_HOST_1 passes the shorter struct: its worker_executable is still read.
TEST_F(host_library, a_caller_of_the_first_abi_still_chooses_its_worker) {
  const fs::path file = write_deployment();
  orch_host_options o{};
  o.struct_size = offsetof(orch_host_options, comfyui);
  const std::string path = file.string();
  o.deployment = path.c_str();
  o.worker_executable = "/nonexistent/comfy-orch-worker";
  char* error = nullptr;
  const int status = api().start(&o, &host_, &error);
  const json e = take(error);
  if (status == ORCH_HOST_OK) {
    const json state = take(api().nodes(host_));
    EXPECT_NE(state["workers"][0]["state"], "ready") << state.dump();
    EXPECT_NE(state.dump().find("/nonexistent/comfy-orch-worker"), std::string::npos)
        << state.dump();
  } else {
    EXPECT_NE(e.dump().find("/nonexistent/comfy-orch-worker"), std::string::npos) << e.dump();
  }
}

TEST_F(host_library, free_and_status_answer_as_json) {
  ASSERT_NO_FATAL_FAILURE(start(write_deployment()));
  const json receipts = take(api().free(host_, 1, 1));
  ASSERT_TRUE(receipts.contains("native-nodes")) << receipts.dump();
  EXPECT_TRUE(receipts["native-nodes"].contains("freed")) << receipts.dump();
  const json status = take(api().status(host_));
  ASSERT_TRUE(status["memory"].is_array());
  EXPECT_EQ(status["memory"][0]["process"], "host") << status.dump();
  EXPECT_EQ(status["memory"].size(), 2u);
}

TEST_F(host_library, worker_models_are_listed_and_evicted_with_receipts_from_their_generation) {
  ASSERT_NO_FATAL_FAILURE(start(write_deployment()));
  ASSERT_EQ(call({{"node", "1"}, {"class_type", "TestRegion"}, {"inputs", {{"mib", 8}}}}).first,
            ORCH_HOST_OK);
  json models = take(api().models(host_));
  ASSERT_EQ(models.size(), 1u) << models.dump();
  EXPECT_EQ(models[0]["key"], "region-8");
  EXPECT_EQ(models[0]["resident"], 8u << 20);
  const std::string env = models[0]["env"];
  const std::uint32_t generation = models[0]["generation"];
  auto evict = [&](const std::string& e, std::uint32_t g, std::uint64_t bytes) {
    char* receipt = nullptr;
    const int st = api().evict(host_, e.c_str(), g, bytes, &receipt);
    return std::make_pair(st, take(receipt));
  };
  // A stand-in of a replaced worker asks nothing of its successor.
  auto [stale, why] = evict(env, generation + 1, 4u << 20);
  EXPECT_EQ(stale, ORCH_HOST_FAILED);
  EXPECT_EQ(why["code"], "stale_generation") << why.dump();
  EXPECT_EQ(take(api().models(host_))[0]["resident"], 8u << 20);
  EXPECT_EQ(evict("no-such-env", 1, 1).first, ORCH_HOST_FAILED);
  EXPECT_EQ(api().evict(host_, nullptr, 1, 1, nullptr), ORCH_HOST_INVALID);
  auto [ok, receipt] = evict(env, generation, 4u << 20);
  ASSERT_EQ(ok, ORCH_HOST_OK) << receipt.dump();
  const std::uint64_t freed = receipt["freed"];
  EXPECT_GE(freed, 4u << 20) << receipt.dump();
  EXPECT_EQ(take(api().models(host_))[0]["resident"], (8u << 20) - freed);
}

TEST_F(host_library, the_callers_pinning_is_charged_to_the_hosts_slot_of_the_one_budget) {
  ASSERT_NO_FATAL_FAILURE(start(write_deployment()));
  auto host_pinned = [&] {
    const json status = take(api().status(host_));  // not a temporary in the range-for below
    for (const auto& row : status["memory"])
      if (row["process"] == "host") return row["pinned_reserved_bytes"].get<std::uint64_t>();
    ADD_FAILURE() << "no host row: " << status.dump();
    return std::uint64_t{0};
  };
  const std::uint64_t before = host_pinned();
  EXPECT_EQ(api().pinned_reserve(host_, 1u << 20), ORCH_HOST_OK);
  EXPECT_EQ(host_pinned(), before + (1u << 20));
  EXPECT_EQ(api().pinned_reserve(host_, std::uint64_t{1} << 60), ORCH_HOST_FAILED);
  EXPECT_EQ(host_pinned(), before + (1u << 20));
  api().pinned_release(host_, 1u << 20);
  EXPECT_EQ(host_pinned(), before);
  // More than the caller holds: the pool's own share of the slot stays.
  ASSERT_GT(before, 0u);
  EXPECT_EQ(api().pinned_reserve(host_, 4096), ORCH_HOST_OK);
  api().pinned_release(host_, std::uint64_t{1} << 40);
  EXPECT_EQ(host_pinned(), before);
}

TEST_F(host_library, the_comfy_orch_host_package_drives_it_from_python) {
  if (const auto why = orch::host_testing::python_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  const fs::path pack = fs::path(ORCH_TEST_PYTHON_PACKS) / "PyContract";
  fs::create_directories(dir_ / "packs");
  fs::copy(pack, dir_ / "packs/PyContract", fs::copy_options::recursive);
  fs::copy_file(fs::path(ORCH_TEST_PYTHON_PACKS) / "where.py",
                dir_ / "packs/PyContract/nodes/where.py");
  // The pool is 32 MiB: the script's release test counts on it.
  const fs::path file = write_deployment(
      "[packs.python]\n\"pycontract-nodes\" = \"" + orch::host_testing::test_python() + "\"\n",
      "\"packs/Native\", \"packs/PyContract\"");
  const auto r = orch::host_testing::run_script(
      dir_, "PYTHONPATH='" + std::string(ORCH_TEST_PYTHON_PACKAGE) + "'", ORCH_TEST_HOST_SCRIPT,
      file.string());
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("\nOK"), std::string::npos) << r.output;
}

}  // namespace
