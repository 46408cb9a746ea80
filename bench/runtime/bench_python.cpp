// bench_python: Python workers against floors measured in the same run (docs/performance.md,
// "Python workers"). Every figure is a ratio; nothing is divided by a published number.
//
//   bench_python [calls] [cold_starts]     (defaults 2000, 10)
//
//   1. empty node call through the router: a Python worker's against a native worker's
//      (target: <= 2x);
//   2. a 64 MiB IMAGE passed through a Python node unchanged, against the empty Python call
//      (target: <= 2x: the tensor is a view, never copied); once from a producer that leaves
//      the image's bytes as they are, against the empty call, and once from one that writes
//      all of them, against the empty call right after the same write;
//   3. a new 64 MiB IMAGE from a Python node, against one memcpy of 64 MiB (target: <= 1.5x);
//   4. a Python worker's cold start (spawn to ready) against `python3 -s -c "import numpy"`, and a
//      torch pack's against `python3 -s -c "import torch"` (target: floor + 20 ms);
//
// The peers (comfy-env, pyisolate) are measured side by side by bench/peers
// (./scripts/bench-peers).
//
// The interpreter is ORCH_TEST_PYTHON, else /usr/bin/python3 (with numpy and torch).
#include <spawn.h>
#include <sys/wait.h>

#include <cstring>
#include <fstream>
#include <future>
#include <string>

#include "bench_support.hpp"
#include "interleaved_floors.hpp"
#include "orch/ipc/frame.hpp"
#include "orch/executor/executor.hpp"
#include "orch/executor/prompt_validation.hpp"
#include "orch/runtime/checked_call.hpp"
#include "orch/support/logging.hpp"

extern char** environ;

namespace {

using namespace orch;
using namespace orch::bench;
using nlohmann::json;

std::string python() {
  const char* chosen = std::getenv("ORCH_TEST_PYTHON");
  return chosen != nullptr && *chosen != '\0' ? chosen : "/usr/bin/python3";
}

// A deployment with `packs` (the native test pack "Native", the Python bench packs "PyBench"
// and "PyBenchTorch"), each Python env run by python() through [packs.python].
fs::path write_deployment(const fs::path& dir,
                          const std::vector<std::string>& packs = {"Native", "PyBench",
                                                                   "PyBenchTorch"}) {
  std::string paths;
  fs::create_directories(dir / "packs");
  for (const auto& pack : packs) {
    if (pack == "Native") {
      fs::create_directories(dir / "packs/Native/nodes");
      std::ofstream(dir / "packs/Native/nodes/comfy-env.toml")
          << "[worker]\nlibrary = \"liborch_pack_test_nodes.so\"\n";
    } else {
      fs::copy(fs::path(ORCH_BENCH_PYTHON_PACKS) / pack, dir / "packs" / pack,
               fs::copy_options::recursive);
    }
    paths += (paths.empty() ? "\"packs/" : ", \"packs/") + pack + "\"";
  }
  const fs::path file = dir / "deployment.toml";
  std::ofstream(file) << "[host]\ndevice = \"sim\"\n[host.sim]\ncapacity = \"4GiB\"\n"
                      << "[plugins]\nsearch_paths = [\"" << ORCH_BENCH_PLUGIN_DIR << "\"]\n"
                      << "[packs]\npaths = [" << paths << "]\nlibrary_paths = [\""
                      << ORCH_BENCH_PACKS_DIR << "\"]\n[packs.python]\n\"pybench-nodes\" = \""
                      << python() << "\"\n\"pybenchtorch-nodes\" = \"" << python()
                      << "\"\n[workers]\nhandshake_timeout = \"60s\"\nheartbeat_interval = \"1s\"\n"
                      << "[shm]\npinned_pool_size = \"512MiB\"\n";
  return file;
}

std::unique_ptr<runtime::host_runtime> start(const fs::path& file) {
  return start_host(file, {ORCH_BENCH_WORKER, 64, ORCH_BENCH_WORKER_LIBRARY,
                           ORCH_BENCH_PYTHON_PACKAGE});
}

double call_us(runtime::host_runtime& h, const std::string& class_type) {
  const std::string env = h.catalogue().find(class_type)->env;
  const json body{{"node", "1"}, {"class_type", class_type}, {"epoch", 1},
                  {"inputs", json::object()}};
  return round_trip(h, [&](auto finish) {
    h.workers().call(env, body, [finish](result<json>) { finish(); });
  });
}

// The same call on the env's call lane, from this thread (runtime::checked_call, as
// liborch_host.so's callers make it); every one must have gone on the lane.
double lane_call_us(runtime::host_runtime& h, const std::string& class_type) {
  const std::string env = h.catalogue().find(class_type)->env;
  const json body{{"node", "1"}, {"class_type", class_type}, {"epoch", 1},
                  {"inputs", json::object()}};
  const auto lane = h.workers().lane(env);
  const auto before = lane->durations().count;
  const auto t0 = clock_type::now();
  auto c = runtime::checked_call(h, env, body, {});
  const double t = us(clock_type::now() - t0);
  if (!c.response || (*c.response)["status"] != "ok" || lane->durations().count != before + 1) {
    std::fprintf(stderr, "bench: the empty call of %s failed or left the lane\n",
                 class_type.c_str());
    std::exit(2);
  }
  return t;
}

void bench_empty_calls(runtime::host_runtime& h, int calls) {
  using namespace bench_floors;
  std::vector<measured_kind> kinds = socket_floor_kinds(ipc::frame_header_size + 64);
  kinds.push_back({"native, router", [&] { return call_us(h, "TestEmpty"); }});
  kinds.push_back({"Python, router", [&] { return call_us(h, "PyEmpty"); }});
  kinds.push_back({"native, lane", [&] { return lane_call_us(h, "TestEmpty"); }});
  kinds.push_back({"Python, lane", [&] { return lane_call_us(h, "PyEmpty"); }});
  interleave(kinds, calls, 100);
  std::printf("empty node call, through the router and on the call lane (%d samples of each)\n",
              calls);
  const double floor50 = report_floors(kinds);
  const std::size_t n = kinds.size();
  const double n50 = report(kinds[n - 4], floor50);
  const double p50 = report(kinds[n - 3], floor50);
  const double nl50 = report(kinds[n - 2], floor50);
  const double pl50 = report(kinds[n - 1], floor50);
  std::printf("  ratio Python/native p50: router %.2f, lane %.2f (target <= 1.2)\n", p50 / n50,
              pl50 / nl50);
}

// One memcpy of `bytes` between two buffers already touched: the floor of writing an output.
double memcpy_us(std::size_t bytes, int reps) {
  std::vector<char> a(bytes, 1), b(bytes, 2);
  std::vector<double> samples;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = clock_type::now();
    std::memcpy(b.data(), a.data(), bytes);
    asm volatile("" : : "r"(b.data()) : "memory");
    samples.push_back(us(clock_type::now() - t0));
  }
  return percentile(samples, 0.5);
}

void bench_big_images(runtime::host_runtime& h, int reps) {
  executor::recording_event_sink sink;
  executor::executor ex(h, sink);
  auto node_us = [&](const json& prompt, const std::string& node) {
    std::vector<double> samples;
    for (int i = 0; i < reps; ++i) {
      auto p = executor::parse_prompt(prompt.dump());
      const auto report = executor::validate_prompt(*p, h.catalogue());
      const auto outcome = ex.run(*p, report.outputs, "bench");
      if (!outcome.ok) {
        std::fprintf(stderr, "bench: prompt failed: %s\n", outcome.error->dump().c_str());
        std::exit(2);
      }
      samples.push_back(outcome.nodes.at(node).call_us);
      ex.release_outputs();
    }
    return percentile(samples, 0.5);
  };
  // Every consumer below is the second node of its prompt, so its floor is an empty node that is
  // second too: the first node of a prompt finds the worker's node thread asleep, the second
  // finds it polling for the next call, on a core the host's threads then share.
  const json empty_node = {{"class_type", "PyEmpty"}, {"inputs", json::object()}};
  const double empty_first = node_us({{"1", empty_node}}, "1");
  const double empty = node_us({{"1", empty_node}, {"2", empty_node}}, "2");
  // The same two figures for a native consumer: what the runtime itself costs for an input.
  const json native_empty_node = {{"class_type", "TestEmpty"}, {"inputs", json::object()}};
  const double native_empty = node_us({{"1", native_empty_node}, {"2", native_empty_node}}, "2");
  const double native_take = node_us(
      {{"1", {{"class_type", "TestBlob"}, {"inputs", {{"mib", 64}}}}},
       {"2", {{"class_type", "TestBlobPeek"}, {"inputs", {{"blob", {"1", 0}}}}}}},
      "2");
  // `producer`'s image passed through PassBig, or taken by TakeBig; node 2's call time.
  auto through = [&](const char* producer, const char* consumer) {
    return node_us({{"1", {{"class_type", producer}, {"inputs", json::object()}}},
                    {"2", {{"class_type", consumer}, {"inputs", {{"image", {"1", 0}}}}}}},
                   "2");
  };
  // MakeBig sets two elements, as TestBlob does: the consumer runs as warm as the empty floor.
  const double pass = through("MakeBig", "PassBig");
  const double take = through("MakeBig", "TakeBig");
  // FillBig writes all 64 MiB, as a real producer does. Whatever runs next in either process
  // then starts from cold caches, so its floor is the empty node run right after the same write
  // (FillBig is an output node: node ids order the two).
  const double pass_written = through("FillBig", "PassBig");
  const double empty_written = node_us(
      {{"1", {{"class_type", "FillBig"}, {"inputs", json::object()}}}, {"2", empty_node}}, "2");
  const double fresh =
      node_us({{"1", {{"class_type", "NewBig"}, {"inputs", json::object()}}}}, "1");
  const double copy = memcpy_us(64u << 20, reps);
  std::printf("64 MiB IMAGE through a Python node (executor call time, p50 of %d)\n", reps);
  std::printf("  empty Python call, first node:  %.1f us\n", empty_first);
  std::printf("  empty Python call, second node (floor): %.1f us\n", empty);
  std::printf("  native: empty second node %.1f us, a 64 MiB input %.1f us, ratio %.2f\n",
              native_empty, native_take, native_take / native_empty);
  std::printf("  taken as an input only:         %.1f us, ratio %.2f\n", take, take / empty);
  std::printf("  passed through unchanged:       %.1f us, ratio %.2f (target <= 2)\n", pass,
              pass / empty);
  std::printf(
      "  after a producer wrote all 64 MiB: empty %.1f us (floor), passed through %.1f us, "
      "ratio %.2f (target <= 2)\n",
      empty_written, pass_written, pass_written / empty_written);
  std::printf("  memcpy of 64 MiB (floor):       %.1f us\n", copy);
  std::printf("  a new 64 MiB output:            %.1f us, ratio %.2f (target <= 1.5)\n", fresh,
              fresh / copy);
}

// Wall time of `python3 -s -c '<code>; os._exit(0)'`, spawned as the host spawns a worker: the
// interpreter's start and the import, without its teardown (a worker's "ready" has none either).
double python_ms(const std::string& code) {
  const std::string py = python();
  std::string line = "import os; " + code + "; os._exit(0)";
  std::vector<char*> argv{const_cast<char*>(py.c_str()), const_cast<char*>("-s"),
                          const_cast<char*>("-c"), line.data(), nullptr};
  const auto t0 = clock_type::now();
  pid_t pid = 0;
  if (::posix_spawn(&pid, py.c_str(), nullptr, nullptr, argv.data(), environ) != 0) return -1;
  int status = 0;
  ::waitpid(pid, &status, 0);
  return us(clock_type::now() - t0) / 1000.0;
}

// Each pack's worker started alone, so the figure is the worker's and not two interpreters
// sharing the machine's cores.
void bench_cold_start(int runs) {
  std::vector<double> numpy_pack, torch_pack, numpy_floor, torch_floor;
  auto ready_ms = [](const std::string& pack) {
    temp_dir dir;
    auto h = start(write_deployment(dir.path, {pack}));
    double ms = 0;
    for (const auto& w : h->on_io_thread([&] { return h->workers().workers(); })) {
      ms = us(w.ready_at - w.spawned_at) / 1000.0;
    }
    h->shutdown();
    return ms;
  };
  for (int i = 0; i < runs; ++i) {
    numpy_floor.push_back(python_ms("import numpy"));
    numpy_pack.push_back(ready_ms("PyBench"));
    torch_floor.push_back(python_ms("import torch"));
    torch_pack.push_back(ready_ms("PyBenchTorch"));
  }
  const double nf = percentile(numpy_floor, 0.5), tf = percentile(torch_floor, 0.5);
  const double np = percentile(numpy_pack, 0.5), tp = percentile(torch_pack, 0.5);
  // Each start against the floor measured just before it: the machine's drift over the runs
  // (other processes, the page cache) cancels out of each pair.
  auto paired = [](const std::vector<double>& pack, const std::vector<double>& floor) {
    std::vector<double> d;
    for (std::size_t i = 0; i < pack.size(); ++i) d.push_back(pack[i] - floor[i]);
    return percentile(d, 0.5);
  };
  std::printf("Python worker cold start, spawn to ready, one worker at a time (p50 of %d runs)\n",
              runs);
  std::printf(
      "  python3 -s -c 'import numpy' (floor): %.1f ms; numpy pack %.1f ms: floor %+.1f ms; "
      "paired %+.1f ms (target <= +20)\n",
      nf, np, np - nf, paired(numpy_pack, numpy_floor));
  std::printf(
      "  python3 -s -c 'import torch' (floor): %.1f ms; torch pack %.1f ms: floor %+.1f ms; "
      "paired %+.1f ms (target <= +20)\n",
      tf, tp, tp - tf, paired(torch_pack, torch_floor));
}

}  // namespace

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::atoi(argv[1]) : 2000;
  const int cold = argc > 2 ? std::atoi(argv[2]) : 10;
  ::setenv("ORCH_LOG_LEVEL", "warn", 0);
  orch::init_logging("bench_python");
  {
    temp_dir dir;
    auto h = start(write_deployment(dir.path));
    bench_empty_calls(*h, calls);
    bench_big_images(*h, 60);
    h->shutdown();
  }
  bench_cold_start(cold);
  return 0;
}
