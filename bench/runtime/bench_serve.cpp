// bench_serve: `comfy-orch serve` as a client sees it (docs/performance.md, "serve"), each
// figure against a floor from the same run.
//
//   bench_serve [prompts] [clients]     (defaults 500, 8)
//
//   1. POST /prompt to execution_success over the WebSocket, for a one-node prompt on a warm
//      worker, against the same node's call through the router from an in-process host (the
//      empty node call): the difference is what HTTP, validation, the queue, the executor and
//      the WebSocket add, p50. The POST goes on a kept-alive connection (a browser, Node's
//      fetch) and on a new one per prompt (urllib), interleaved. The call is measured back to
//      back, and after 500 us idle, as a served prompt finds its worker;
//   2. throughput of back-to-back one-node prompts from `clients` clients at once, against one
//      client's (one prompt runs at a time, so the ideal ratio is 1: queueing must not cost).
//   Both with [server] cache = "none", so every prompt runs its node.
//   3. the example sampler prompt (examples/prompts/sim-sampler.json, the example's native packs)
//      re-run from the execution cache, against its first run (after /free dropped the cache
//      and the model), the ComfyUI default cache.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "orch/support/logging.hpp"
#include "serve_client.hpp"
#include "thread_figures.hpp"

namespace {

using namespace orch;
using namespace orch::bench;
using nlohmann::json;

fs::path write_deployment(const fs::path& dir, const std::string& cache) {
  const fs::path pack = dir / "packs/Pack0/nodes";
  fs::create_directories(pack);
  std::ofstream(pack / "comfy-env.toml") << "[worker]\nlibrary = \"liborch_pack_test_nodes.so\"\n";
  const fs::path file = dir / "deployment.toml";
  std::ofstream(file) << "[host]\ndevice = \"sim\"\n[host.sim]\ncapacity = \"4GiB\"\n"
                      << "[plugins]\nsearch_paths = [\"" << ORCH_BENCH_PLUGIN_DIR << "\"]\n"
                      << "[packs]\npaths = [\"packs/Pack0\"]\nlibrary_paths = [\""
                      << ORCH_BENCH_PACKS_DIR << "\"]\n[workers]\nhandshake_timeout = \"60s\"\n"
                      << "heartbeat_interval = \"1s\"\n[shm]\npinned_pool_size = \"64MiB\"\n"
                      << "[server]\ncache = \"" << cache << "\"\n";
  return file;
}

// The example deployment's two native packs (no Python env to make), the default cache.
fs::path write_example_deployment(const fs::path& dir) {
  const fs::path file = dir / "example.toml";
  const std::string examples = ORCH_BENCH_SOURCE_DIR "/examples/packs/";
  std::ofstream(file) << "[host]\ndevice = \"sim\"\n[host.sim]\ncapacity = \"4GiB\"\n"
                      << "[plugins]\nsearch_paths = [\"" << ORCH_BENCH_PLUGIN_DIR << "\"]\n"
                      << "[packs]\npaths = [\"" << examples << "ComfyUI-ImageOps\", \"" << examples
                      << "ComfyUI-SimSampler\"]\nlibrary_paths = [\"" << ORCH_BENCH_EXAMPLES_DIR
                      << "\"]\n[workers]\nhandshake_timeout = \"60s\"\n"
                      << "[shm]\npinned_pool_size = \"256MiB\"\n";
  return file;
}

const json one_node = {{"1", {{"class_type", "TestSleep"}, {"inputs", {{"ms", 0}}}}}};

// The floor: the node's own call, host -> worker -> host, from an in-process host; back to back,
// or after `idle` with nothing to do (as between served prompts, where the worker's node thread
// has gone to sleep and the CPUs may have halted).
struct floor_figures {
  double p50_us;
  tree_figures figures;  // over all the calls, this process's threads and its workers'
};

floor_figures node_call(const fs::path& file, int calls,
                        std::chrono::microseconds idle = std::chrono::microseconds(0)) {
  auto h = start_host(file, {ORCH_BENCH_WORKER, 64, {}, {}});
  const std::string env = h->catalogue().find("TestSleep")->env;
  const json body{{"node", "1"}, {"class_type", "TestSleep"}, {"epoch", 1},
                  {"inputs", {{"ms", 0}}}};
  std::vector<double> samples;
  tree_figures before;
  for (int i = 0; i < calls + calls / 10; ++i) {
    if (i == calls / 10) before = thread_figures_of(::getpid());
    if (idle.count() > 0) std::this_thread::sleep_for(idle);
    const double c = round_trip(*h, [&](auto finish) {
      h->workers().call(env, body, [finish](result<json>) { finish(); });
    });
    if (i >= calls / 10) samples.push_back(c);
  }
  tree_figures figures = thread_figures_of(::getpid()) - before;
  h->shutdown();
  return {percentile(samples, 0.5), std::move(figures)};
}

// The wake-ups per call or prompt, total and by thread, then the CPU time it cost and the time
// its threads waited for a CPU, total and by process (the part of a thread name before '/').
void print_figures(const char* what, const tree_figures& c, int n) {
  long wakeups = 0;
  std::map<std::string, thread_figures> by_process;
  thread_figures total;
  for (const auto& [name, v] : c) {
    wakeups += v.voluntary;
    auto& p = by_process[name.substr(0, name.find('/'))];
    for (auto* f : {&p, &total}) {
      f->run_ns += v.run_ns;
      f->wait_ns += v.wait_ns;
    }
  }
  std::printf("    %s: %.1f voluntary switches (wake-ups) per prompt:", what,
              static_cast<double>(wakeups) / n);
  auto per = [n](long long ns) { return static_cast<double>(ns) / 1e3 / n; };
  for (const auto& [name, v] : c)
    if (v.voluntary >= n / 10 || v.run_ns >= 1000LL * n)
      std::printf(" %s %.1f (%.0f us)", name.c_str(), static_cast<double>(v.voluntary) / n,
                  per(v.run_ns));
  std::printf("\n      CPU %.1f us per prompt:", per(total.run_ns));
  for (const auto& [name, v] : by_process) std::printf(" %s %.1f", name.c_str(), per(v.run_ns));
  std::printf("; waiting for a CPU %.1f us:", per(total.wait_ns));
  for (const auto& [name, v] : by_process) std::printf(" %s %.1f", name.c_str(), per(v.wait_ns));
  std::printf("\n");
}

// One prompt from POST to its execution_success on this client's WebSocket, in microseconds.
// `keep`: POST on this kept-alive connection, else on a new connection per prompt.
double prompt_us(const testing::serve_process& s, testing::ws_client& ws, const std::string& id,
                 const json& prompt = one_node, testing::http_connection* keep = nullptr) {
  const auto t0 = clock_type::now();
  const json body = {{"prompt", prompt}, {"client_id", id}};
  const auto r = keep != nullptr ? keep->post("/prompt", body) : s.post("/prompt", body);
  if (r.status != 200) {
    std::fprintf(stderr, "bench_serve: POST /prompt answered %u %s\n", r.status, r.body.c_str());
    std::exit(2);
  }
  const std::string prompt_id = r.json()["prompt_id"];
  while (auto m = ws.next()) {
    if ((*m)["type"] == "execution_success" && (*m)["data"]["prompt_id"] == prompt_id)
      return us(clock_type::now() - t0);
    if ((*m)["type"] == "execution_error") {
      std::fprintf(stderr, "bench_serve: the prompt failed: %s\n", m->dump().c_str());
      std::exit(2);
    }
  }
  std::fprintf(stderr, "bench_serve: no execution_success\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  const int prompts = argc > 1 ? std::atoi(argv[1]) : 500;
  const int clients = argc > 2 ? std::atoi(argv[2]) : 8;
  ::setenv("ORCH_LOG_LEVEL", "warn", 0);
  orch::init_logging("bench_serve");
  temp_dir dir;
  const fs::path file = write_deployment(dir.path, "none");

  const floor_figures call = node_call(file, prompts);
  const floor_figures idle_call = node_call(file, prompts, std::chrono::microseconds(500));
  const double call50 = call.p50_us, idle_call50 = idle_call.p50_us;
  testing::serve_process s(ORCH_BENCH_COMFY_ORCH, file.string());
  if (s.port() == 0) {
    std::fprintf(stderr, "bench_serve: comfy-orch serve did not start\n");
    return 2;
  }
  std::vector<double> fresh, kept;  // interleaved, so both see the same machine
  {
    testing::ws_client ws(s.port(), "bench");
    ws.next();  // the greeting
    testing::http_connection keep(s.port());
    for (int i = 0; i < prompts + prompts / 10; ++i) {
      const double a = prompt_us(s, ws, "bench");
      const double b = prompt_us(s, ws, "bench", one_node, &keep);
      if (i < prompts / 10) continue;
      fresh.push_back(a);
      kept.push_back(b);
    }
  }
  // The wake-ups and CPU time a prompt costs, counted on kept-alive prompts alone: serve, its
  // workers, and this client (its WebSocket reader and the posting thread).
  auto served = [&] {
    tree_figures c = thread_figures_of(s.pid());
    add_threads(::getpid(), "client/", c);
    return c;
  };
  tree_figures served_figures;
  {
    testing::ws_client ws(s.port(), "count");
    ws.next();
    testing::http_connection keep(s.port());
    const tree_figures before = served();
    for (int i = 0; i < prompts; ++i) prompt_us(s, ws, "count", one_node, &keep);
    served_figures = served() - before;
  }
  std::printf("one-node prompt, POST /prompt to execution_success on the WebSocket (%d prompts)\n",
              prompts);
  std::printf("  the node's call through the router (floor): p50 %.1f us back to back, %.1f us "
              "after 500 us idle\n",
              call50, idle_call50);
  for (const auto& [what, e2e] : {std::pair{"kept-alive connection", &kept},
                                  std::pair{"a connection per POST ", &fresh}}) {
    const double e2e50 = percentile(*e2e, 0.5);
    std::printf("  %s: p50 %.1f us  p99 %.1f us; overhead p50 %.1f us over the back-to-back "
                "call (target <= 200 us), ratio %.2f; %.1f us over the idle call\n",
                what, e2e50, percentile(*e2e, 0.99), e2e50 - call50, e2e50 / call50,
                e2e50 - idle_call50);
  }
  print_figures("the back-to-back call", call.figures, prompts);
  print_figures("the idle call        ", idle_call.figures, prompts);
  print_figures("a kept-alive prompt  ", served_figures, prompts);

  // Throughput: every client posts its next prompt as soon as its last one succeeded.
  auto throughput = [&](int n) {
    const int each = std::max(1, prompts / n);
    std::vector<std::thread> threads;
    const auto t0 = clock_type::now();
    for (int c = 0; c < n; ++c)
      threads.emplace_back([&, c] {
        const std::string id = "tp-" + std::to_string(n) + "-" + std::to_string(c);
        testing::ws_client ws(s.port(), id);
        ws.next();
        for (int i = 0; i < each; ++i) prompt_us(s, ws, id);
      });
    for (auto& t : threads) t.join();
    return each * n / (us(clock_type::now() - t0) / 1e6);
  };
  const double one = throughput(1);
  const double many = throughput(clients);
  std::printf("back-to-back one-node prompts: 1 client %.0f prompts/s (floor), %d clients %.0f "
              "prompts/s, ratio %.2f (one prompt runs at a time: ideal 1)\n",
              one, clients, many, many / one);
  if (s.stop() != 0) return 2;

  // The cached re-run: each round frees the cache (and the model) and runs the prompt once
  // cold, then re-runs it from the cache.
  testing::serve_process example(ORCH_BENCH_COMFY_ORCH, write_example_deployment(dir.path).string());
  if (example.port() == 0) {
    std::fprintf(stderr, "bench_serve: serve on the example packs did not start\n");
    return 2;
  }
  json sampler;
  std::ifstream(ORCH_BENCH_SOURCE_DIR "/examples/prompts/sim-sampler.json") >> sampler;
  testing::ws_client ws(example.port(), "cache");
  ws.next();
  prompt_us(example, ws, "cache", sampler);  // the workers' first prompt maps the pool
  std::vector<double> first, cached;
  const int rounds = std::max(3, prompts / 50);
  for (int round = 0; round < rounds; ++round) {
    example.post("/free", {{"unload_models", true}, {"free_memory", true}});
    first.push_back(prompt_us(example, ws, "cache", sampler));
    for (int i = 0; i < 20; ++i) cached.push_back(prompt_us(example, ws, "cache", sampler));
  }
  const double first50 = percentile(first, 0.5);
  const double cached50 = percentile(cached, 0.5);
  std::printf("the example sampler prompt (%d rounds): first run p50 %.1f us, cached re-run p50 "
              "%.1f us, ratio %.3f\n",
              rounds, first50, cached50, cached50 / first50);
  return example.stop() == 0 ? 0 : 2;
}
