#include "orch/executor/execution_cache.hpp"

#include <cmath>
#include <set>

namespace orch::executor {

using manifests::cache_policy;
using nlohmann::json;

namespace {

// ComfyUI's Unhashable: a NaN anywhere is never equal to itself, so the key never matches.
bool holds_nan(const json& v) {
  if (v.is_number_float()) return std::isnan(v.get<double>());
  if (!v.is_structured()) return false;
  // Iterative: a change key comes from a worker (bounded by the body depth, but kept off the
  // stack all the same).
  std::vector<const json*> stack{&v};
  while (!stack.empty()) {
    const json* j = stack.back();
    stack.pop_back();
    if (j->is_number_float() && std::isnan(j->get<double>())) return true;
    if (j->is_structured()) {
      for (const auto& item : *j) stack.push_back(&item);
    }
  }
  return false;
}

}  // namespace

cache_key execution_cache::key(
    const std::string& class_type, const std::optional<json>& change, const std::string& node_id,
    const json& literals,
    const std::map<std::string, std::pair<const cache_key*, std::int64_t>>& links) {
  cache_key k;
  k.serial = ++next_serial_;
  if (policy_ == cache_policy::none || !change || holds_nan(*change)) return k;
  json inputs = json::object();
  for (const auto& [name, value] : literals.items()) inputs[name] = json{{"value", value}};
  for (const auto& [name, link] : links) {
    if (link.first == nullptr || link.first->text.empty()) return k;  // fed by an uncacheable
    inputs[name] = json{{"link", {link.first->serial, link.second}}};
    k.inputs.push_back(link.first->serial);
  }
  try {
    // Strict: prompt text is valid UTF-8 once parsed, and a worker's text is made valid on
    // decoding; were it not, replacing bytes could make two keys one.
    k.text = json::array({class_type, *change, node_id.empty() ? json() : json(node_id), inputs})
                 .dump(-1, ' ', false, json::error_handler_t::strict);
  } catch (const json::exception&) {
    k.text.clear();
    return k;
  }
  if (auto it = entries_.find(k.text); it != entries_.end()) {
    it->second.used = prompt_;
    k.serial = it->second.serial;
    k.hit = true;
  } else if (auto [seen, fresh] = keyed_.try_emplace(k.text, k.serial); !fresh) {
    k.serial = seen->second;  // the same node twice in one prompt: one serial, one entry
  }
  return k;
}

const cache_entry* execution_cache::find(const cache_key& key) const {
  if (key.text.empty()) return nullptr;
  auto it = entries_.find(key.text);
  return it == entries_.end() ? nullptr : &it->second;
}

std::vector<ipc::buffer_descriptor> execution_cache::end_keys() {
  const std::uint64_t now = prompt_;
  if (policy_ == cache_policy::none) return clear();
  if (policy_ == cache_policy::classic) {
    return drop([now](const cache_entry& e) { return e.used != now; });
  }
  const std::uint64_t oldest_kept = now >= lru_prompts_ ? now - lru_prompts_ + 1 : 0;
  return drop([oldest_kept](const cache_entry& e) { return e.used < oldest_kept; });
}

bool execution_cache::store(const cache_key& key, cache_entry entry) {
  // A key already kept (its leases would be lost under the overwrite) stays the caller's.
  if (policy_ == cache_policy::none || key.text.empty() || entries_.count(key.text)) return false;
  entry.serial = key.serial;
  entry.inputs = key.inputs;
  entry.used = prompt_;
  by_serial_[key.serial] = key.text;
  entries_[key.text] = std::move(entry);
  return true;
}

std::vector<ipc::buffer_descriptor> execution_cache::drop(
    const std::function<bool(const cache_entry&)>& doomed) {
  std::vector<ipc::buffer_descriptor> released;
  std::set<std::uint64_t> dropped;
  // By serial, so every ancestor is decided before the entries whose keys name it.
  for (auto it = by_serial_.begin(); it != by_serial_.end();) {
    auto entry = entries_.find(it->second);
    if (entry == entries_.end()) {  // never so (one serial per kept key); never a crash either
      it = by_serial_.erase(it);
      continue;
    }
    const cache_entry& e = entry->second;
    bool go = doomed(e);
    for (std::uint64_t input : e.inputs) go = go || dropped.count(input) > 0;
    if (!go) {
      ++it;
      continue;
    }
    dropped.insert(e.serial);
    released.insert(released.end(), e.leases.begin(), e.leases.end());
    entries_.erase(entry);
    it = by_serial_.erase(it);
  }
  return released;
}

std::vector<ipc::buffer_descriptor> execution_cache::leases() const {
  std::vector<ipc::buffer_descriptor> all;
  for (const auto& [text, e] : entries_) all.insert(all.end(), e.leases.begin(), e.leases.end());
  return all;
}

}  // namespace orch::executor
