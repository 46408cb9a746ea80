// The pager's model store (model_store.hpp): a pager region per model, faulted page by page. The
// pins a node takes are remembered, so the node boundary can unpin what the node left pinned
// (docs/memory-semantics.md).
#include <algorithm>
#include <vector>

#include "model_store.hpp"
#include "orch/plugins/status_error.hpp"

namespace orch::worker {
namespace {

class pager_model_store final : public model_store {
 public:
  pager_model_store(const orch_pager_api& api, orch_pager* pager) : api_(api), pager_(pager) {}
  ~pager_model_store() override {
    for (auto& [key, r] : regions_) api_.region_destroy(r->pager_region);
    regions_.clear();
    api_.device_close(pager_);
  }

  orch_status fault(model_region& r, std::uint64_t offset, std::uint64_t size) override {
    const orch_status st =
        api_.region_fault(r.pager_region, offset, size, nullptr, 0, nullptr, nullptr);
    if (st == ORCH_OK) pins_.push_back({&r, offset, size});
    return st;
  }

  orch_status unpin(model_region& r, std::uint64_t offset, std::uint64_t size) override {
    auto it = std::find_if(pins_.begin(), pins_.end(), [&](const pin& p) {
      return p.region == &r && p.offset == offset && p.size == size;
    });
    if (it == pins_.end()) return ORCH_INVALID;  // never faulted (or already unpinned)
    pins_.erase(it);
    return api_.region_unpin(r.pager_region, offset, size);
  }

  std::size_t release_node_boundary() noexcept override {
    const std::size_t pins = pins_.size();
    for (const auto& p : pins_) api_.region_unpin(p.region->pager_region, p.offset, p.size);
    pins_.clear();
    if (api_.reset_watermark_limits != nullptr) api_.reset_watermark_limits(pager_);
    return pins;
  }

  void unload_all() noexcept override {
    std::uint64_t freed = 0;
    api_.reclaim(pager_, UINT64_MAX, 0, &freed);
  }

  void evict(std::uint64_t bytes) noexcept override {
    std::uint64_t freed = 0;
    api_.reclaim(pager_, bytes, 0, &freed);
  }

  std::uint64_t resident_bytes() const noexcept override {
    orch_pager_usage u{};
    u.struct_size = sizeof(u);
    return api_.usage(pager_, &u) == ORCH_OK ? u.page_bytes : 0;
  }

  void publish(ipc::stats_snapshot& s) const noexcept override {
    orch_pager_usage u{};
    u.struct_size = sizeof(u);
    if (api_.usage(pager_, &u) == ORCH_OK) {
      s.device_total_bytes = u.capacity;
      s.device_free_bytes = u.last_polled_free;
      s.pager_resident_bytes = u.page_bytes;
    }
    std::uint64_t pinned = 0;
    if (api_.pinned_bytes(pager_, &pinned) == ORCH_OK) s.device_pinned_bytes = pinned;
  }

 protected:
  result<model_region*> create(const std::string& key, std::uint64_t bytes) override {
    auto r = std::make_unique<model_region>();
    r->key = key;
    r->size = bytes;
    const orch_status st = api_.region_create(pager_, bytes, &r->pager_region, nullptr);
    if (st != ORCH_OK) return plugins::status_error(st, "the pager's region_create");
    return regions_.emplace(key, std::move(r)).first->second.get();
  }

  // ComfyUI's dynamic-VRAM load prioritizes the model's VBAR (reference comfyui-memory.md, the
  // ModelPatcherDynamic load; aimdo.md: prioritize is a page's only way back above the
  // watermark). Without it a model the host evicted faults out of memory forever after.
  void reused(model_region& r) noexcept override {
    if (api_.region_prioritize != nullptr) api_.region_prioritize(r.pager_region);
  }

  std::uint64_t resident_bytes(const model_region& r) const noexcept override {
    std::uint64_t resident = 0;
    api_.region_resident_bytes(r.pager_region, &resident);
    return resident;
  }

 private:
  struct pin {
    model_region* region;
    std::uint64_t offset;
    std::uint64_t size;
  };
  const orch_pager_api& api_;
  orch_pager* pager_;
  std::vector<pin> pins_;  // faulted by the node now running and not yet unpinned
};

}  // namespace

std::unique_ptr<model_store> make_pager_store(const orch_pager_api& api, orch_pager* pager) {
  return std::make_unique<pager_model_store>(api, pager);
}

}  // namespace orch::worker
