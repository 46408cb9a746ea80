// What the runtime benchmarks share: percentiles, microseconds, a throwaway directory, and a
// host started on a deployment file (docs/performance.md).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <memory>
#include <vector>

#include "orch/manifests/inventory.hpp"
#include "orch/runtime/host_runtime.hpp"

namespace orch::bench {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1,
                    static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
}

inline double us(clock_type::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

struct temp_dir {
  fs::path path;
  temp_dir() {
    char t[] = "/tmp/orch-bench-XXXXXX";
    path = ::mkdtemp(t);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// A host on `file`, every worker settled; exits the benchmark with 2 when that fails.
inline std::unique_ptr<runtime::host_runtime> start_host(const fs::path& file,
                                                         runtime::host_options options) {
  manifests::diagnostics diags;
  auto d = manifests::load_deployment(file, diags);
  if (!d) {
    std::fprintf(stderr, "bench: deployment %s did not load\n", file.c_str());
    std::exit(2);
  }
  auto inv = manifests::build_inventory(*d, diags);
  auto h = runtime::host_runtime::start(*d, inv, std::move(options));
  if (!h) {
    std::fprintf(stderr, "bench: %s\n", h.err().message.c_str());
    std::exit(2);
  }
  if (!(*h)->wait_settled(std::chrono::seconds(120))) std::exit(2);
  return std::move(*h);
}

// Microseconds from the caller's thread until `start_one(finish)`, run on the host's io thread,
// has called finish(): one request's round trip as a caller sees it.
template <typename Start>
double round_trip(runtime::host_runtime& h, Start start_one) {
  std::promise<void> done;
  auto f = done.get_future();
  const auto t0 = clock_type::now();
  h.on_io_thread([&] { start_one([&done] { done.set_value(); }); });
  f.get();
  return us(clock_type::now() - t0);
}

}  // namespace orch::bench
