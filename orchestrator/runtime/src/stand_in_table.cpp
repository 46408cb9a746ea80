#include "orch/runtime/stand_in_table.hpp"

#include <algorithm>
#include <numeric>
#include <tuple>
#include <utility>

namespace orch::runtime {

void stand_in_table::load(model_entry entry) {
  remove(entry.id);
  entries_.insert(entries_.begin(), std::move(entry));
}

void stand_in_table::remove(const std::string& id) {
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                [&id](const model_entry& e) { return e.id == id; }),
                 entries_.end());
}

std::size_t stand_in_table::remove_env(const std::string& env) {
  const auto before = entries_.size();
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                [&env](const model_entry& e) { return e.env == env; }),
                 entries_.end());
  return before - entries_.size();
}

bool stand_in_table::apply_receipt(const std::string& id, std::uint64_t resident,
                                   std::uint64_t seq) {
  for (auto& e : entries_) {
    if (e.id != id) continue;
    if (seq <= e.receipt_seq) return false;
    e.receipt_seq = seq;
    e.resident = std::min(resident, e.size);
    return true;
  }
  return false;
}

bool stand_in_table::set_asked(const std::string& id, std::vector<std::string> asked) {
  for (auto& e : entries_) {
    if (e.id != id) continue;
    e.asked = std::move(asked);
    return true;
  }
  return false;
}

const model_entry* stand_in_table::find(const std::string& id) const {
  for (const auto& e : entries_) {
    if (e.id == id) return &e;
  }
  return nullptr;
}

std::vector<const model_entry*> stand_in_table::eviction_order() const {
  std::vector<std::size_t> index(entries_.size());
  std::iota(index.begin(), index.end(), std::size_t{0});
  auto key = [this](std::size_t i) {
    const auto& e = entries_[i];
    return std::make_tuple(-static_cast<long double>(e.offloaded()), e.refcount, e.size, i);
  };
  std::sort(index.begin(), index.end(),
            [&key](std::size_t a, std::size_t b) { return key(a) < key(b); });
  std::vector<const model_entry*> order;
  for (auto i : index) order.push_back(&entries_[i]);
  return order;
}

std::vector<eviction_step> stand_in_table::free_memory(std::uint64_t memory_required,
                                                       bool for_dynamic,
                                                       const free_reader& free_now,
                                                       const evictor& evict) {
  std::vector<std::string> order;
  for (const auto* e : eviction_order()) order.push_back(e->id);
  std::vector<eviction_step> steps;
  for (const auto& id : order) {
    auto it = std::find_if(entries_.begin(), entries_.end(),
                           [&id](const model_entry& e) { return e.id == id; });
    if (it == entries_.end() || it->resident == 0) continue;
    if (it->dynamic && for_dynamic) {
      // "don't actually unload dynamic models for the sake of other dynamic models"
      memory_required -= std::min(memory_required, it->resident);
      continue;
    }
    const std::uint64_t free = free_now();
    if (free >= memory_required) break;
    const std::uint64_t ask = memory_required - free;
    const std::uint64_t freed = std::min(evict(*it, ask), it->resident);
    it->resident -= freed;
    steps.push_back({it->id, it->env, ask, freed});
  }
  return steps;
}

}  // namespace orch::runtime
