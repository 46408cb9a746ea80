// Worker releases (docs/memory-semantics.md): cast buffers, node boundary, prompt epoch, and the
// free and evict requests answered with receipts measured on the device.
#include "worker_memory.hpp"

#include <time.h>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "orch/plugins/names.hpp"

namespace orch::worker {
namespace {

// The last release is stamped with wall-clock time, comparable across processes (the table).
std::uint64_t realtime_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

}  // namespace

orch_status worker_memory::cast_buffer(std::uint32_t stream, std::uint64_t size,
                                       std::uint64_t* address) {
  if (allocator_ == nullptr) return ORCH_UNSUPPORTED;
  return allocator_api_->cast_buffer(allocator_, stream, size, address);
}

std::uint64_t worker_memory::reset_cast_buffers() noexcept {
  if (allocator_ == nullptr) return 0;
  orch_cast_stats c{};
  c.struct_size = sizeof(c);
  const std::uint64_t held =
      allocator_api_->cast_stats(allocator_, &c) == ORCH_OK ? c.committed + c.retired : 0;
  allocator_api_->reset_cast_buffers(allocator_);
  return held;
}

void worker_memory::release_node_boundary() noexcept {
  const std::size_t pins = models_ ? models_->release_node_boundary() : 0;
  const std::uint64_t cast = reset_cast_buffers();
  if (cast > 0 || pins > 0) {
    spdlog::info("node boundary: released {} cast-buffer bytes and {} pins left by the node", cast,
                 pins);
  }
  ++boundary_releases_;
  last_boundary_ns_ = realtime_ns();
}

void worker_memory::cast_epoch_boundary(std::optional<std::uint64_t> epoch) noexcept {
  const bool changed = !epoch || !cast_epoch_seen_ || cast_epoch_ != epoch;
  cast_epoch_seen_ = true;
  cast_epoch_ = epoch;
  if (!changed) return;
  reset_cast_buffers();
  ++boundary_releases_;
  last_boundary_ns_ = realtime_ns();
}

release_receipt worker_memory::free(bool unload_models, bool drop_caches) noexcept {
  release_receipt receipt;
  const std::uint64_t before = resident_bytes();
  if (unload_models && models_) models_->unload_all();
  const std::uint64_t cast = drop_caches ? reset_cast_buffers() : 0;
  receipt.resident = resident_bytes();
  receipt.freed = (before > receipt.resident ? before - receipt.resident : 0) + cast;
  return receipt;
}

release_receipt worker_memory::evict(std::uint64_t bytes) noexcept {
  release_receipt receipt;
  const std::uint64_t before = resident_bytes();
  if (models_) models_->evict(bytes);
  receipt.resident = resident_bytes();
  receipt.freed = before > receipt.resident ? before - receipt.resident : 0;
  return receipt;
}

}  // namespace orch::worker
