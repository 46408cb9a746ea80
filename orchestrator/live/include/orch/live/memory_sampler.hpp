// memory_sampler: the memory timelines of a running `serve` (docs/cli.md, "timeline"). Every
// period the host reads each process's figures from the control segment (process_status.hpp;
// no worker is asked) into a ring buffer of fixed size: pager resident, pinned reserved, cast
// buffers and the device's free view. Markers go in a second ring: node-boundary releases and
// prompt epochs (read as their counters move between samples), restarts and state changes,
// divergences appearing or going (divergence_check.hpp), and the evictions and frees the host
// reports with their receipts. Memory is bounded by the two capacities, however long it runs.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "orch/runtime/host_runtime.hpp"

namespace orch::live {

struct process_figures {
  std::string process;
  std::uint64_t pager_resident = 0;
  std::uint64_t pinned_reserved = 0;
  std::uint64_t cast_buffer = 0;
  std::uint64_t device_free = 0;
  std::uint64_t epoch = 0;
  std::uint64_t boundary_releases = 0;
  std::uint64_t generation = 0;
  std::string state;
};

struct timeline_sample {
  std::int64_t unix_ms = 0;
  std::vector<process_figures> processes;
};

struct timeline_marker {
  std::int64_t unix_ms = 0;
  std::string process;
  std::string kind;  // boundary, epoch, restart, state, divergence, eviction, free
  std::string text;
};

class memory_sampler {
 public:
  static constexpr std::size_t default_capacity = 3600;  // an hour at the default period
  static constexpr std::size_t marker_capacity = 4096;
  static constexpr std::size_t max_answer_samples = 2000;  // timeline() thins out past this

  memory_sampler(runtime::host_runtime& host, std::chrono::milliseconds period,
                 std::size_t capacity = default_capacity);
  ~memory_sampler();  // stop()
  memory_sampler(const memory_sampler&) = delete;
  memory_sampler& operator=(const memory_sampler&) = delete;

  // Takes the first sample now and one every period after. From any thread.
  void start();
  // Not on the io thread. Idempotent.
  void stop();
  // A marker from outside the control segment (the host's evictions and frees). Any thread.
  void note(const std::string& kind, const std::string& process, const std::string& text);

  // {period_ms, capacity, samples: [{unix_ms, processes: {name: {figures}}}], markers: [...]},
  // those no older than `since` (all without); more than max_answer_samples samples are thinned
  // to that many, evenly, the newest always kept. Any thread.
  nlohmann::json timeline(std::optional<std::chrono::milliseconds> since) const;
  // The status and divergences read by the latest sample (null before the first). Any thread.
  nlohmann::json latest_status() const;
  // Markers of `kind` noted so far per process, for /metrics' counters. Any thread.
  std::map<std::string, std::uint64_t> marker_counts(const std::string& kind) const;

 private:
  void arm();
  void sample();       // io thread: take_sample, then the next one armed
  void take_sample();  // io thread
  void push_marker(timeline_marker m);  // under mutex_

  runtime::host_runtime& host_;
  std::chrono::milliseconds period_;
  std::size_t capacity_;
  std::shared_ptr<boost::asio::steady_timer> timer_;
  std::shared_ptr<bool> alive_;  // io thread: false once stopped

  mutable std::mutex mutex_;
  std::deque<timeline_sample> samples_;
  std::deque<timeline_marker> markers_;
  std::map<std::string, std::map<std::string, std::uint64_t>> counts_;  // kind -> process -> n
  std::set<std::string> diverging_;  // "process/field" of the latest sample's divergences
  nlohmann::json latest_;
};

}  // namespace orch::live
