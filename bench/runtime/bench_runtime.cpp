// bench_runtime: runtime figures (docs/performance.md), each against a floor from the same run.
//
//   bench_runtime [calls] [cold_starts] [fleet]     (defaults 2000, 10, 32)
//
//   1. empty node call, host -> worker -> host, on the call lane from the caller's thread
//      (checked_call, as liborch_host.so's callers make it) and through the router (the io
//      thread's path), against the raw socket floors and a ping on the worker's channel; comfy-env
//      is compared only when measured in the same run, never by dividing by a published figure
//      (docs/performance.md, "Peers side by side");
//   2. worker cold start (spawn to ready: handshake, plugins, pool mapping, node library), p50;
//   3. `fleet` workers started together: wall time to all ready, host RSS growth per worker;
//   4. tensor handoff between two packs: the consumer's call with a 256 MiB input against a
//      1 MiB one. Zero-copy means the ratio is close to 1.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "bench_support.hpp"
#include "doorbell_floor.hpp"
#include "interleaved_floors.hpp"
#include "thread_figures.hpp"
#include "orch/ipc/frame.hpp"
#include "orch/executor/executor.hpp"
#include "orch/executor/prompt_validation.hpp"
#include "orch/manifests/inventory.hpp"
#include "orch/runtime/checked_call.hpp"
#include "orch/runtime/host_runtime.hpp"
#include "orch/support/logging.hpp"

namespace {

using namespace orch;
using namespace orch::bench;
using runtime::host_runtime;

long rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return 0;
}

// A deployment of `packs` test packs (pack i uses variant B when b(i)).
fs::path write_deployment(const fs::path& dir, int packs, bool second_is_b, const char* pool) {
  std::string paths;
  for (int i = 0; i < packs; ++i) {
    const bool b = second_is_b && i == 1;
    const fs::path pack = dir / ("packs/Pack" + std::to_string(i) + "/nodes");
    fs::create_directories(pack);
    std::ofstream(pack / "comfy-env.toml")
        << "[worker]\nlibrary = \"liborch_pack_test_nodes" << (b ? "_b" : "") << ".so\"\n";
    paths += (i ? ", " : "") + std::string("\"packs/Pack") + std::to_string(i) + "\"";
  }
  const fs::path file = dir / "deployment.toml";
  std::ofstream(file) << "[host]\ndevice = \"sim\"\n[host.sim]\ncapacity = \"4GiB\"\n"
                      << "[plugins]\nsearch_paths = [\"" << ORCH_BENCH_PLUGIN_DIR << "\"]\n"
                      << "[packs]\npaths = [" << paths << "]\nlibrary_paths = [\""
                      << ORCH_BENCH_PACKS_DIR << "\"]\n[workers]\nhandshake_timeout = \"60s\"\n"
                      << "heartbeat_interval = \"1s\"\n[shm]\npinned_pool_size = \"" << pool
                      << "\"\n";
  return file;
}

std::unique_ptr<host_runtime> start(const fs::path& file) {
  return bench::start_host(file, {ORCH_BENCH_WORKER, 64, {}, {}});
}

// One call through the router, from this thread (the io thread sends and reads it).
void router_call(runtime::host_runtime& h, const std::string& env, const nlohmann::json& body) {
  round_trip(h, [&](auto finish) {
    h.workers().call(env, body, [finish](result<nlohmann::json>) { finish(); });
  });
}

// What load cannot move: the context switches and the CPU time per call of every thread of the
// host and its worker (the worker's poll for its next call included), over `calls` calls back
// to back.
template <typename Call>
void report_counts(const char* path, int calls, Call call) {
  const auto before = thread_figures_of(::getpid());
  for (int i = 0; i < calls; ++i) call();
  const auto delta = thread_figures_of(::getpid()) - before;
  thread_figures sum;
  for (const auto& entry : delta) {
    sum.voluntary += entry.second.voluntary;
    sum.involuntary += entry.second.involuntary;
    sum.run_ns += entry.second.run_ns;
  }
  std::printf("  per call on the %s, %d calls: %.2f voluntary and %.2f involuntary switches, "
              "%.1f us of CPU (host and worker)\n",
              path, calls, static_cast<double>(sum.voluntary) / calls,
              static_cast<double>(sum.involuntary) / calls,
              static_cast<double>(sum.run_ns) / 1000.0 / calls);
}

void bench_calls(int calls) {
  using namespace bench_floors;
  temp_dir dir;
  auto h = start(write_deployment(dir.path, 1, false, "64MiB"));
  const std::string env = h->catalogue().find("TestEmpty")->env;
  const nlohmann::json body{{"node", "1"}, {"class_type", "TestEmpty"}, {"epoch", 1},
                            {"inputs", nlohmann::json::object()}};
  // The channel's frames: an empty ping's size stands for both (the floor moves a few bytes).
  const std::size_t frame_bytes = ipc::frame_header_size + ipc::encode_body(body).size();
  std::vector<measured_kind> kinds = socket_floor_kinds(frame_bytes);
  // The moonshot's floor: a futex doorbell over shared memory, polled as long as the lane's
  // worker polls (docs/performance.md, "The call path"); no socket floor, so not the floor.
  auto doorbell = std::make_shared<doorbell_floor>(std::chrono::microseconds(100));
  kinds.push_back({"futex doorbell over shared memory",
                   [doorbell] { return doorbell->round_trip_us(); }, [doorbell] { doorbell->pin(); },
                   [doorbell] { doorbell->unpin(); }});
  kinds.push_back({"channel ping on the worker's channel", [&] {
                     return round_trip(*h, [&](auto finish) {
                       h->workers().ping(env, [finish](result<nlohmann::json>) { finish(); });
                     });
                   }});
  kinds.push_back({"empty node call (router, supervisor::call)", [&] {
                     const auto t0 = clock_type::now();
                     router_call(*h, env, body);
                     return us(clock_type::now() - t0);
                   }});
  const auto lane = h->workers().lane(env);
  const auto lane_calls_before = lane->durations().count;
  kinds.push_back({"empty node call (lane, checked_call)", [&] {
                     const auto t0 = clock_type::now();
                     auto c = runtime::checked_call(*h, env, body, {});
                     const double t = us(clock_type::now() - t0);
                     if (!c.response || (*c.response)["status"] != "ok") {
                       std::fprintf(stderr, "bench: the empty call failed\n");
                       std::exit(2);
                     }
                     return t;
                   }});
  interleave(kinds, calls, 100);
  std::printf("empty node call, host -> worker -> host (%d samples of each)\n", calls);
  const double floor50 = report_floors(kinds);
  const double bell50 = report(kinds[kinds.size() - 4], floor50);
  const double p50 = report(kinds[kinds.size() - 3], floor50);
  const double c50 = report(kinds[kinds.size() - 2], floor50);
  const double l50 = report(kinds.back(), floor50);
  // Every lane sample must have gone on the lane: a fallback to the router would be measured
  // under the lane's name.
  const auto on_lane = lane->durations().count - lane_calls_before;
  std::printf("  ratio router call/ping p50 %.2f; lane call/floor p50 %.2f, lane call/doorbell p50 "
              "%.2f (%llu of %d lane samples went on the lane)\n",
              c50 / p50, l50 / floor50, l50 / bell50, static_cast<unsigned long long>(on_lane),
              calls + 100);
  kinds.clear();  // the floors' echo processes go: only the host and its worker are counted
  report_counts("router", calls, [&] { router_call(*h, env, body); });
  report_counts("lane", calls, [&] { (void)runtime::checked_call(*h, env, body, {}); });
  h->shutdown();
}

void bench_cold_start(int runs) {
  std::vector<double> ready_ms;
  for (int i = 0; i < runs; ++i) {
    temp_dir dir;
    auto h = start(write_deployment(dir.path, 1, false, "64MiB"));
    for (const auto& w : h->on_io_thread([&] { return h->workers().workers(); })) {
      ready_ms.push_back(us(w.ready_at - w.spawned_at) / 1000.0);
    }
    h->shutdown();
  }
  std::printf("worker cold start to ready (native worker, sim device, %d runs): p50 %.1f ms  "
              "max %.1f ms\n",
              runs, percentile(ready_ms, 0.5), percentile(ready_ms, 1.0));
}

void bench_fleet(int fleet) {
  temp_dir dir;
  const fs::path file = write_deployment(dir.path, fleet, false, "64MiB");
  const long rss_before = rss_kib();
  const auto t0 = clock_type::now();
  auto h = start(file);
  const double total_ms = us(clock_type::now() - t0) / 1000.0;
  const long rss_after = rss_kib();
  int ready = 0;
  for (const auto& w : h->on_io_thread([&] { return h->workers().workers(); })) {
    ready += w.state == runtime::worker_state::ready ? 1 : 0;
  }
  std::printf("%d workers started together: %d ready in %.1f ms total (%.1f ms per worker); host "
              "RSS +%.1f KiB per worker\n",
              fleet, ready, total_ms, total_ms / fleet,
              static_cast<double>(rss_after - rss_before) / fleet);
  h->shutdown();
}

void bench_handoff(int reps) {
  temp_dir dir;
  auto h = start(write_deployment(dir.path, 2, true, "600MiB"));
  executor::recording_event_sink sink;
  executor::executor ex(*h, sink);
  auto consumer_us = [&](int mib) {
    std::vector<double> samples;
    for (int i = 0; i < reps; ++i) {
      auto p = executor::parse_prompt(
          R"({"1": {"class_type": "TestBlob", "inputs": {"mib": )" + std::to_string(mib) +
          R"(}}, "2": {"class_type": "TestBlobPeekB", "inputs": {"blob": ["1", 0]}}})");
      const auto report = executor::validate_prompt(*p, h->catalogue());
      const auto outcome = ex.run(*p, report.outputs, "bench");
      if (!outcome.ok) {
        std::fprintf(stderr, "bench: handoff prompt failed: %s\n", outcome.error->dump().c_str());
        std::exit(2);
      }
      samples.push_back(outcome.nodes.at("2").call_us);
    }
    return percentile(samples, 0.5);
  };
  const double small = consumer_us(1), large = consumer_us(256);
  std::printf("tensor handoff between two packs (consumer call, p50 of %d): 1 MiB %.1f us, "
              "256 MiB %.1f us, ratio %.2f (zero-copy: close to 1)\n",
              reps, small, large, large / small);
  ex.release_outputs();
  h->shutdown();
}

}  // namespace

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::atoi(argv[1]) : 2000;
  const int cold = argc > 2 ? std::atoi(argv[2]) : 10;
  const int fleet = argc > 3 ? std::atoi(argv[3]) : 32;
  ::setenv("ORCH_LOG_LEVEL", "warn", 0);
  orch::init_logging("bench_runtime");
  bench_calls(calls);
  bench_cold_start(cold);
  bench_fleet(fleet);
  bench_handoff(20);
  return 0;
}
