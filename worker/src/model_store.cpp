#include "model_store.hpp"

namespace orch::worker {

result<model_region*> model_store::region(const std::string& key, std::uint64_t bytes,
                                          bool& created) {
  created = false;
  if (auto it = regions_.find(key); it != regions_.end()) {
    reused(*it->second);
    return it->second.get();
  }
  auto r = create(key, bytes);
  if (r) created = true;
  return r;
}

nlohmann::json model_store::describe_models() const {
  auto out = nlohmann::json::array();
  for (const auto& [key, r] : regions_) {
    out.push_back({{"key", key}, {"size", r->size}, {"resident", resident_bytes(*r)}});
  }
  return out;
}

}  // namespace orch::worker
