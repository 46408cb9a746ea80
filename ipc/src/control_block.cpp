#include "orch/ipc/control_block.hpp"
#include "orch/ipc/errc.hpp"

#include <cstring>

namespace orch::ipc {

void control_block::publish(const stats_snapshot& snapshot) noexcept {
  std::uint64_t words[stats_words];
  std::memcpy(words, &snapshot, sizeof(snapshot));
  const std::uint64_t seq = stats_sequence.load(std::memory_order_relaxed);
  stats_sequence.store(seq + 1, std::memory_order_relaxed);  // odd: a publish is in progress
  std::atomic_thread_fence(std::memory_order_release);
  for (std::size_t i = 0; i < stats_words; ++i) stats[i].store(words[i], std::memory_order_relaxed);
  stats_sequence.store(seq + 2, std::memory_order_release);
}

result<stats_snapshot> control_block::read(unsigned max_tries) const noexcept {
  if (!valid_header())
    return error{budget_errc::bad_block, "control block has a wrong magic, version or size"};
  std::uint64_t words[stats_words];
  for (unsigned attempt = 0; attempt < max_tries; ++attempt) {
    const std::uint64_t before = stats_sequence.load(std::memory_order_acquire);
    if ((before & 1u) != 0) continue;
    for (std::size_t i = 0; i < stats_words; ++i)
      words[i] = stats[i].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (stats_sequence.load(std::memory_order_relaxed) == before) {
      stats_snapshot out;
      std::memcpy(&out, words, sizeof(out));
      return out;
    }
  }
  return error{budget_errc::writer_stalled,
               "control block stats stayed inconsistent; its writer may have "
               "died while publishing"};
}

void initialise_control_block(control_block& block) noexcept {
  block.magic = control_block_magic;
  block.version = control_block_version;
  block.reserved = 0;
  block.size = sizeof(control_block);
  for (auto& p : block.padding) p = 0;
  block.heartbeat.store(0, std::memory_order_relaxed);
  block.stats_sequence.store(0, std::memory_order_relaxed);
  for (auto& w : block.stats) w.store(0, std::memory_order_relaxed);
}

}  // namespace orch::ipc
