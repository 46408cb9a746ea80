#include "orch/plugins/applied_settings.hpp"
#include "orch/plugin/levels.h"

namespace orch::plugins {

std::string applied_settings_text(const host_memory_settings& s, memory_manager manager,
                                  std::uint32_t level) {
  std::string t = "streams=" + std::to_string(s.streams) +
                  ";pinned=" + (s.pinned_memory ? "1" : "0");
  if (manager == memory_manager::ledger) return t + ";manager=ledger";
  t += ";level=" + std::to_string(level) + ";page_size=" + std::to_string(s.page_size);
  if (level >= ORCH_LEVEL_HEADROOM) {
    t += ";extra_headroom=" + std::to_string(s.reserve_vram) +
         ";simple_headroom=" + std::to_string(s.simple_headroom);
  }
  if (level >= ORCH_LEVEL_PRESSURE) t += ";pressure_source=" + std::to_string(s.pressure_source);
  return t;
}

std::uint64_t applied_settings_hash(const host_memory_settings& s, memory_manager manager,
                                    std::uint32_t level) {
  std::uint64_t h = 14695981039346656037ull;
  for (const unsigned char c : applied_settings_text(s, manager, level)) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h == 0 ? 1 : h;
}

}  // namespace orch::plugins
