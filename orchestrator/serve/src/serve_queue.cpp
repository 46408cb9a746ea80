#include "orch/serve/serve_queue.hpp"

#include <algorithm>
#include <unordered_set>

#include "orch/serve/serve_request_fields.hpp"

namespace orch::serve {

using nlohmann::json;

json queued_prompt::to_json() const {
  return json::array({queue_number(number), prompt_id, document, extra_data, outputs});
}

std::string queued_prompt::client_id() const {
  const auto it = extra_data.find("client_id");
  return it != extra_data.end() && it->is_string() ? it->get<std::string>() : std::string();
}

void prompt_queue::on_change(std::function<void(std::size_t)> fn) {
  std::lock_guard lock(mutex_);
  on_change_ = std::move(fn);
}

std::optional<std::string> prompt_queue::full_for(std::size_t bytes) const {
  std::lock_guard lock(mutex_);
  if (pending_.size() >= limits_.max_pending)
    return std::to_string(pending_.size()) + " prompts are pending, the most this server keeps "
           "(--max-queue)";
  if (pending_bytes_ + bytes > limits_.max_pending_bytes)
    return "the pending prompts and this one would hold more than " +
           std::to_string(limits_.max_pending_bytes) + " bytes (--max-queue-bytes)";
  return std::nullopt;
}

void prompt_queue::changed(std::unique_lock<std::mutex>& lock) {
  pending_bytes_ = 0;
  for (const auto& p : pending_) pending_bytes_ += p.bytes;
  const std::size_t left = pending_.size() + (running_ ? 1 : 0);
  remaining_.store(left);
  {
    std::lock_guard id_lock(running_id_mutex_);
    running_id_ = running_ ? std::optional<std::string>(running_->prompt_id) : std::nullopt;
  }
  auto fn = on_change_;
  lock.unlock();
  if (fn) fn(left);
}

double prompt_queue::next_number(bool front) {
  std::lock_guard lock(mutex_);
  const double n = counter_;
  counter_ += 1;
  return front ? -n : n;
}

void prompt_queue::put(queued_prompt p) {
  p.text = std::make_shared<const std::string>(
      p.to_json().dump(-1, ' ', false, json::error_handler_t::replace));
  std::unique_lock lock(mutex_);
  insert_pending(std::move(p), lock);
}

bool prompt_queue::put_new(queued_prompt p) {
  p.text = std::make_shared<const std::string>(
      p.to_json().dump(-1, ' ', false, json::error_handler_t::replace));
  std::unique_lock lock(mutex_);
  const auto same = [&](const queued_prompt& q) { return q.prompt_id == p.prompt_id; };
  if (by_id_.count(p.prompt_id) != 0 || (running_ && same(*running_)) ||
      std::any_of(pending_.begin(), pending_.end(), same))
    return false;
  insert_pending(std::move(p), lock);
  return true;
}

void prompt_queue::insert_pending(queued_prompt p, std::unique_lock<std::mutex>& lock) {
  p.sequence = sequence_++;
  const auto at = std::upper_bound(pending_.begin(), pending_.end(), p, [](const auto& a,
                                                                           const auto& b) {
    return a.number < b.number || (a.number == b.number && a.sequence < b.sequence);
  });
  pending_.insert(at, std::move(p));
  changed(lock);
}

std::optional<queued_prompt> prompt_queue::try_take() {
  std::unique_lock lock(mutex_);
  if (stopped_ || pending_.empty()) return std::nullopt;
  running_ = std::move(pending_.front());
  pending_.erase(pending_.begin());
  queued_prompt copy = *running_;
  changed(lock);
  return copy;
}

void prompt_queue::finish(const json& outputs, const json& status) {
  std::unique_lock lock(mutex_);
  if (!running_) return;
  json entry = {{"prompt", running_->to_json()},
                {"outputs", outputs},
                {"status", status},
                {"meta", json::object()}};
  for (const auto& [node, _] : outputs.items())
    entry["meta"][node] = {
        {"node_id", node}, {"display_node", node}, {"parent_node", nullptr}, {"real_node_id", node}};
  // Kept parsed (for the jobs API) and as text (for /history, streamed): counted twice its text.
  auto text = std::make_shared<const std::string>(
      entry.dump(-1, ' ', false, json::error_handler_t::replace));
  const std::string id = running_->prompt_id;
  const std::size_t bytes = 2 * text->size();
  running_.reset();
  if (auto it = by_id_.find(id); it != by_id_.end()) erase_history(it->second);
  while (!history_.empty() && (history_.size() >= history_size_ ||
                               history_bytes_ + bytes > limits_.max_history_bytes))
    erase_history(history_.begin());
  if (history_size_ > 0) {
    history_.push_back({id, std::make_shared<const json>(std::move(entry)), std::move(text), bytes});
    history_bytes_ += bytes;
    by_id_[id] = std::prev(history_.end());
  }
  changed(lock);
}

void prompt_queue::stop() {
  std::lock_guard lock(mutex_);
  stopped_ = true;
}

prompt_queue::queue_texts prompt_queue::texts() const {
  std::lock_guard lock(mutex_);
  queue_texts out;
  if (running_) out.running.push_back(running_->text);
  for (const auto& p : pending_) out.pending.push_back(p.text);
  return out;
}

void prompt_queue::clear_pending() {
  std::unique_lock lock(mutex_);
  pending_.clear();
  changed(lock);
}

std::size_t prompt_queue::delete_pending(const std::vector<std::string>& ids) {
  std::unique_lock lock(mutex_);
  const auto before = pending_.size();
  // A set: 200,000 ids against 1,000 prompts, searched one by one, had held the API thread 2 s.
  const std::unordered_set<std::string> doomed(ids.begin(), ids.end());
  std::erase_if(pending_, [&](const queued_prompt& p) { return doomed.count(p.prompt_id) > 0; });
  const std::size_t removed = before - pending_.size();
  if (removed > 0) changed(lock);
  return removed;
}

void prompt_queue::visit_queue(
    const std::function<void(const queued_prompt&, bool running)>& fn) const {
  std::lock_guard lock(mutex_);
  if (running_) fn(*running_, true);
  for (const auto& p : pending_) fn(p, false);
}

void prompt_queue::visit_history(
    const std::function<void(const std::string&, const json&)>& fn) const {
  std::lock_guard lock(mutex_);
  for (const auto& h : history_) fn(h.id, *h.entry);
}

std::optional<std::string> prompt_queue::running_id() const {
  std::lock_guard lock(running_id_mutex_);
  return running_id_;
}

std::string prompt_queue::running_client_id() const {
  std::lock_guard lock(mutex_);
  return running_ ? running_->client_id() : std::string();
}

std::vector<prompt_queue::history_item> prompt_queue::history_items(
    std::optional<std::size_t> max_items, std::int64_t offset) const {
  std::lock_guard lock(mutex_);
  // ComfyUI: without an offset, the newest max_items; with one, max_items from there.
  std::int64_t first = offset;
  if (first < 0)
    first = max_items ? static_cast<std::int64_t>(history_.size()) -
                            static_cast<std::int64_t>(*max_items)
                      : 0;
  std::vector<history_item> out;
  std::int64_t i = 0;
  for (const auto& h : history_) {
    if (i++ < first) continue;
    if (max_items && out.size() >= *max_items) break;
    out.push_back({h.id, h.entry, h.text});
  }
  return out;
}

nlohmann::ordered_json prompt_queue::history(std::optional<std::size_t> max_items,
                                             std::int64_t offset) const {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& item : history_items(max_items, offset)) out[item.id] = *item.entry;
  return out;
}

json prompt_queue::history_of(const std::string& prompt_id) const {
  std::lock_guard lock(mutex_);
  json out = json::object();
  if (auto it = by_id_.find(prompt_id); it != by_id_.end()) out[prompt_id] = *it->second->entry;
  return out;
}

void prompt_queue::clear_history() {
  std::lock_guard lock(mutex_);
  history_.clear();
  by_id_.clear();
  history_bytes_ = 0;
}

void prompt_queue::delete_history(const std::vector<std::string>& ids) {
  std::lock_guard lock(mutex_);
  for (const auto& id : ids)
    if (auto it = by_id_.find(id); it != by_id_.end()) erase_history(it->second);
}

void prompt_queue::erase_history(std::list<history_entry>::iterator at) {
  history_bytes_ -= at->bytes;
  by_id_.erase(at->id);
  history_.erase(at);
}

std::size_t prompt_queue::history_size() const {
  std::lock_guard lock(mutex_);
  return history_.size();
}

}  // namespace orch::serve
