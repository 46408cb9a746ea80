#include "orch/live/memory_sampler.hpp"

#include <future>

#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>

#include "orch/live/divergence_check.hpp"
#include "orch/live/process_status.hpp"
#include "orch/support/json_fields.hpp"

namespace orch::live {
namespace {

using nlohmann::json;

std::int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

process_figures figures_of(const json& e) {
  process_figures f;
  f.process = text_field(e, "process");
  f.pager_resident = unsigned_field(e, "pager_resident_bytes");
  f.pinned_reserved = unsigned_field(e, "pinned_reserved_bytes");
  f.cast_buffer = unsigned_field(e, "cast_buffer_bytes");
  f.device_free = unsigned_field(e, "device_free_bytes");
  f.epoch = unsigned_field(e, "epoch");
  f.boundary_releases = unsigned_field(e, "boundary_releases");
  f.generation = unsigned_field(e, "generation");
  f.state = text_field(e, "state");
  return f;
}

const process_figures* find_process(const timeline_sample& s, const std::string& process) {
  for (const auto& p : s.processes)
    if (p.process == process) return &p;
  return nullptr;
}

}  // namespace

memory_sampler::memory_sampler(runtime::host_runtime& host, std::chrono::milliseconds period,
                               std::size_t capacity)
    : host_(host),
      period_(period),
      capacity_(capacity == 0 ? 1 : capacity),
      timer_(std::make_shared<boost::asio::steady_timer>(host.io())),
      alive_(std::make_shared<bool>(true)) {}

memory_sampler::~memory_sampler() {
  stop();
}

void memory_sampler::start() {
  boost::asio::post(host_.io(), [this, alive = alive_] {
    if (*alive) sample();
  });
}

void memory_sampler::stop() {
  if (host_.stopped()) return;
  host_.on_io_thread([this] {
    *alive_ = false;
    timer_->cancel();
  });
}

void memory_sampler::arm() {
  timer_->expires_after(period_);
  timer_->async_wait([this, alive = alive_](boost::system::error_code ec) {
    if (!ec && *alive) sample();
  });
}

void memory_sampler::sample() {
  // On the io thread, which carries every worker's channel: nothing may escape, and the next
  // sample is taken whatever happened to this one.
  try {
    take_sample();
  } catch (const std::exception& e) {
    spdlog::warn("memory timeline: a sample failed: {}", e.what());
  }
  arm();
}

void memory_sampler::take_sample() {
  json status = read_process_status(host_);
  json divergences = find_divergences(status);
  timeline_sample s{now_unix_ms(), {}};
  for (const auto& e : status["processes"]) s.processes.push_back(figures_of(e));
  std::set<std::string> diverging;
  std::map<std::string, std::string> said;  // "process/field" -> its explanation
  for (const auto& d : divergences["differences"]) {
    if (d["severity"] != "divergence" || d["acknowledged"] == true) continue;
    const std::string key = text_field(d, "process") + "/" + text_field(d, "field");
    diverging.insert(key);
    said[key] = text_field(d, "explanation");
  }
  {
    std::lock_guard lock(mutex_);
    if (!samples_.empty()) {
      const timeline_sample& last = samples_.back();
      for (const auto& p : s.processes) {
        const process_figures* before = find_process(last, p.process);
        if (before == nullptr) continue;
        if (p.generation != before->generation) {
          push_marker(
              {s.unix_ms, p.process, "restart", "generation " + std::to_string(p.generation)});
        } else if (p.state != before->state) {
          push_marker({s.unix_ms, p.process, "state", before->state + " -> " + p.state});
        }
        if (p.epoch != before->epoch && p.generation == before->generation) {
          push_marker({s.unix_ms, p.process, "epoch", "epoch " + std::to_string(p.epoch)});
        }
        // A new generation counts from 0 again: all of its releases are new.
        const std::uint64_t since =
            p.generation != before->generation ? 0 : before->boundary_releases;
        if (p.boundary_releases > since) {
          push_marker({s.unix_ms, p.process, "boundary",
                       std::to_string(p.boundary_releases - since) + " node-boundary releases"});
        }
      }
    }
    for (const auto& key : diverging) {
      if (diverging_.count(key) != 0) continue;
      const auto slash = key.find('/');
      push_marker({s.unix_ms, key.substr(0, slash), "divergence",
                   key.substr(slash + 1) + ": " + said[key]});
    }
    for (const auto& key : diverging_) {
      if (diverging.count(key) != 0) continue;
      const auto slash = key.find('/');
      push_marker({s.unix_ms, key.substr(0, slash), "divergence",
                   key.substr(slash + 1) + ": no longer diverges"});
    }
    diverging_ = std::move(diverging);
    samples_.push_back(std::move(s));
    while (samples_.size() > capacity_) samples_.pop_front();
    latest_ = {{"status", std::move(status)}, {"diverge", std::move(divergences)}};
  }
}

void memory_sampler::push_marker(timeline_marker m) {
  ++counts_[m.kind][m.process];
  markers_.push_back(std::move(m));
  while (markers_.size() > marker_capacity) markers_.pop_front();
}

void memory_sampler::note(const std::string& kind, const std::string& process,
                          const std::string& text) {
  std::lock_guard lock(mutex_);
  push_marker({now_unix_ms(), process, kind, text});
}

json memory_sampler::timeline(std::optional<std::chrono::milliseconds> since) const {
  const std::int64_t from = since ? now_unix_ms() - since->count() : INT64_MIN;
  std::lock_guard lock(mutex_);
  // At most max_answer_samples, evenly spread: a chart is a few hundred pixels wide, and the
  // answer is built on the io thread.
  std::size_t wanted = 0;
  for (const auto& s : samples_) wanted += s.unix_ms >= from ? 1 : 0;
  const std::size_t stride = (wanted + max_answer_samples - 1) / max_answer_samples;
  std::size_t index = 0;
  json samples = json::array();
  for (const auto& s : samples_) {
    if (s.unix_ms < from) continue;
    const std::size_t at = index++;
    if (stride > 1 && at % stride != 0 && at + 1 != wanted) continue;
    json processes = json::object();
    for (const auto& p : s.processes) {
      processes[p.process] = {{"pager_resident_bytes", p.pager_resident},
                              {"pinned_reserved_bytes", p.pinned_reserved},
                              {"cast_buffer_bytes", p.cast_buffer},
                              {"device_free_bytes", p.device_free},
                              {"state", p.state}};
    }
    samples.push_back({{"unix_ms", s.unix_ms}, {"processes", std::move(processes)}});
  }
  json markers = json::array();
  for (const auto& m : markers_) {
    if (m.unix_ms < from) continue;
    markers.push_back(
        {{"unix_ms", m.unix_ms}, {"process", m.process}, {"kind", m.kind}, {"text", m.text}});
  }
  return {{"period_ms", period_.count()},
          {"capacity", capacity_},
          {"samples", std::move(samples)},
          {"markers", std::move(markers)}};
}

json memory_sampler::latest_status() const {
  std::lock_guard lock(mutex_);
  return latest_;
}

std::map<std::string, std::uint64_t> memory_sampler::marker_counts(const std::string& kind) const {
  std::lock_guard lock(mutex_);
  const auto it = counts_.find(kind);
  return it == counts_.end() ? std::map<std::string, std::uint64_t>{} : it->second;
}

}  // namespace orch::live
