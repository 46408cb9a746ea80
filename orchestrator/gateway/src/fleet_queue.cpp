#include "orch/gateway/fleet_queue.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include <spdlog/spdlog.h>

#include "orch/fleet/prompt_needs.hpp"
#include "orch/serve/serve_request_fields.hpp"

namespace orch::gateway {

using nlohmann::json;

json fleet_prompt::to_json() const {
  return json::array({serve::queue_number(number), prompt_id, document, extra_data, outputs});
}

std::string fleet_prompt::client_id() const {
  const auto it = extra_data.find("client_id");
  return it != extra_data.end() && it->is_string() ? it->get<std::string>() : std::string();
}

namespace {

stored_prompt stored(const fleet_prompt& p, const std::optional<std::string>& host,
                     bool node_started) {
  return {p.prompt_id, p.number, p.sequence, p.document,  p.extra_data,
          p.outputs,   p.bytes,  host,       node_started};
}

}  // namespace

void fleet_queue::kept(const status& s) const {
  if (!s) spdlog::error("gateway: {}", s.err().message);
}

void fleet_queue::restore(const stored_state& from) {
  counter_ = from.counter;
  const auto now = std::chrono::steady_clock::now();
  for (const auto& s : from.prompts) {
    fleet_prompt p;
    p.number = s.number;
    p.prompt_id = s.prompt_id;
    p.document = s.document;
    p.extra_data = s.extra_data;
    p.outputs = s.outputs;
    p.bytes = s.bytes;
    p.sequence = s.sequence;
    // Its needs, as when it was queued (it was accepted then: the rule has not changed).
    if (auto needs = fleet::prompt_needs_of(p.document, p.prompt_id); needs.needs)
      p.needs = std::move(*needs.needs);
    sequence_ = std::max(sequence_, s.sequence + 1);
    if (s.host) {
      running_.emplace(s.prompt_id,
                       running_prompt{std::move(p), *s.host, s.node_started, true, now});
    } else {
      insert_pending(std::move(p));
    }
  }
  std::vector<std::string> dropped;
  for (const auto& h : from.history) add_history(h.prompt_id, h.entry, h.bytes, dropped);
  if (state_ != nullptr && !dropped.empty()) kept(state_->remove_history(dropped));
  changed();
}

std::optional<std::string> fleet_queue::full_for(std::size_t bytes) const {
  std::size_t held = 0;
  for (const auto& p : pending_) held += p.bytes;
  if (pending_.size() >= limits_.max_pending)
    return std::to_string(pending_.size()) + " prompts are pending, the most this gateway keeps";
  if (held + bytes > limits_.max_pending_bytes)
    return "the pending prompts and this one would hold more than " +
           std::to_string(limits_.max_pending_bytes) + " bytes";
  return std::nullopt;
}

double fleet_queue::next_number(bool front) {
  const double n = counter_;
  counter_ += 1;
  return front ? -n : n;
}

void fleet_queue::insert_pending(fleet_prompt p) {
  const auto at = std::upper_bound(
      pending_.begin(), pending_.end(), p, [](const fleet_prompt& a, const fleet_prompt& b) {
        return a.number < b.number || (a.number == b.number && a.sequence < b.sequence);
      });
  pending_.insert(at, std::move(p));
}

status fleet_queue::put(fleet_prompt p) {
  p.sequence = sequence_++;
  if (state_ != nullptr)
    if (auto written = state_->put(stored(p, std::nullopt, false), counter_); !written)
      return written;
  insert_pending(std::move(p));
  changed();
  return ok_status();
}

running_prompt* fleet_queue::running(const std::string& prompt_id) {
  const auto it = running_.find(prompt_id);
  return it == running_.end() ? nullptr : &it->second;
}

const running_prompt* fleet_queue::running_on(const std::string& host) const {
  for (const auto& [_, r] : running_)
    if (r.host == host) return &r;
  return nullptr;
}

bool fleet_queue::holds(const std::string& prompt_id) const {
  return running_.count(prompt_id) != 0 ||
         std::any_of(pending_.begin(), pending_.end(),
                     [&](const fleet_prompt& p) { return p.prompt_id == prompt_id; });
}

bool fleet_queue::take(const std::string& prompt_id, const std::string& host) {
  const auto it = std::find_if(pending_.begin(), pending_.end(),
                               [&](const fleet_prompt& p) { return p.prompt_id == prompt_id; });
  if (it == pending_.end() || running_.count(prompt_id) != 0) return false;
  if (state_ != nullptr) kept(state_->set_host(prompt_id, host, false));
  running_.emplace(prompt_id, running_prompt{std::move(*it), host, false, false, {}});
  pending_.erase(it);
  changed();
  return true;
}

void fleet_queue::requeue(const std::string& prompt_id) {
  const auto it = running_.find(prompt_id);
  if (it == running_.end()) return;
  if (state_ != nullptr) kept(state_->set_host(prompt_id, std::nullopt, false));
  insert_pending(std::move(it->second.prompt));  // its own number and sequence: its place
  running_.erase(it);
  changed();
}

void fleet_queue::node_started(const std::string& prompt_id) {
  const auto it = running_.find(prompt_id);
  if (it == running_.end() || it->second.node_started) return;
  it->second.node_started = true;
  if (state_ != nullptr) kept(state_->set_host(prompt_id, it->second.host, true));
}

void fleet_queue::set_in_doubt(const std::string& prompt_id, bool in_doubt) {
  const auto it = running_.find(prompt_id);
  if (it == running_.end() || it->second.in_doubt == in_doubt) return;
  it->second.in_doubt = in_doubt;
  if (in_doubt) it->second.in_doubt_since = std::chrono::steady_clock::now();
}

void fleet_queue::finish(const std::string& prompt_id, const json& outputs, const json& status,
                         const json& meta, std::vector<std::string> outputs_to_execute) {
  const auto it = running_.find(prompt_id);
  if (it == running_.end()) return;
  fleet_prompt& p = it->second.prompt;
  if (!outputs_to_execute.empty()) p.outputs = std::move(outputs_to_execute);
  json entry = {{"prompt", p.to_json()},
                {"outputs", outputs},
                {"status", status},
                {"meta", meta.is_object() ? meta : json::object()}};
  running_.erase(it);
  const std::size_t bytes = 2 * entry.dump(-1, ' ', false, json::error_handler_t::replace).size();
  std::vector<std::string> dropped;
  const bool kept_entry = history_size_ > 0;
  stored_history written{kept_entry ? prompt_id : std::string(),
                         kept_entry ? entry : json::object(), bytes};
  add_history(prompt_id, std::move(entry), bytes, dropped);
  if (state_ != nullptr) kept(state_->finish(prompt_id, written, dropped));
  changed();
}

void fleet_queue::add_history(const std::string& prompt_id, json entry, std::size_t bytes,
                              std::vector<std::string>& dropped) {
  if (auto old = by_id_.find(prompt_id); old != by_id_.end()) {
    history_bytes_ -= old->second->bytes;
    history_.erase(old->second);
    by_id_.erase(old);
  }
  while (!history_.empty() &&
         (history_.size() >= history_size_ || history_bytes_ + bytes > limits_.max_history_bytes)) {
    history_bytes_ -= history_.front().bytes;
    by_id_.erase(history_.front().id);
    dropped.push_back(history_.front().id);
    history_.pop_front();
  }
  if (history_size_ > 0) {
    history_.push_back({prompt_id, std::move(entry), bytes});
    history_bytes_ += bytes;
    by_id_[prompt_id] = std::prev(history_.end());
  }
}

void fleet_queue::clear_pending() {
  if (state_ != nullptr) kept(state_->remove_pending());
  pending_.clear();
  changed();
}

std::size_t fleet_queue::delete_pending(const std::vector<std::string>& ids) {
  const std::unordered_set<std::string> doomed(ids.begin(), ids.end());
  std::vector<std::string> removed_ids;
  for (const auto& p : pending_)
    if (doomed.contains(p.prompt_id)) removed_ids.push_back(p.prompt_id);
  if (state_ != nullptr && !removed_ids.empty()) kept(state_->remove_prompts(removed_ids));
  const std::size_t removed =
      std::erase_if(pending_, [&](const fleet_prompt& p) { return doomed.contains(p.prompt_id); });
  if (removed > 0) changed();
  return removed;
}

json fleet_queue::queue_json() const {
  json running = json::array();
  json pending = json::array();
  for (const auto& [_, r] : running_) running.push_back(r.prompt.to_json());
  for (const auto& p : pending_) pending.push_back(p.to_json());
  return {{"queue_running", running}, {"queue_pending", pending}};
}

nlohmann::ordered_json fleet_queue::history(std::optional<std::size_t> max_items,
                                            std::int64_t offset) const {
  // ComfyUI: without an offset, the newest max_items; with one, max_items from there.
  std::int64_t first = offset;
  if (first < 0)
    first = max_items
                ? static_cast<std::int64_t>(history_.size()) - static_cast<std::int64_t>(*max_items)
                : 0;
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  std::int64_t i = 0;
  std::size_t taken = 0;
  for (const auto& h : history_) {
    if (i++ < first) continue;
    if (max_items && taken >= *max_items) break;
    out[h.id] = h.entry;
    ++taken;
  }
  return out;
}

json fleet_queue::history_of(const std::string& prompt_id) const {
  json out = json::object();
  if (auto it = by_id_.find(prompt_id); it != by_id_.end()) out[prompt_id] = it->second->entry;
  return out;
}

void fleet_queue::visit_history(
    const std::function<void(const std::string&, const json&)>& fn) const {
  for (const auto& h : history_) fn(h.id, h.entry);
}

void fleet_queue::clear_history() {
  if (state_ != nullptr) kept(state_->clear_history());
  history_.clear();
  by_id_.clear();
  history_bytes_ = 0;
}

void fleet_queue::delete_history(const std::vector<std::string>& ids) {
  if (state_ != nullptr) {
    std::vector<std::string> known;
    for (const auto& id : ids)
      if (by_id_.count(id) != 0) known.push_back(id);
    if (!known.empty()) kept(state_->remove_history(known));
  }
  for (const auto& id : ids)
    if (auto it = by_id_.find(id); it != by_id_.end()) {
      history_bytes_ -= it->second->bytes;
      history_.erase(it->second);
      by_id_.erase(it);
    }
}

void fleet_queue::changed() {
  if (on_change_) on_change_(remaining());
}

}  // namespace orch::gateway
