#include "orch/ipc/handshake.hpp"

#include "orch/ipc/errc.hpp"

namespace orch::ipc {
namespace {

using nlohmann::json;

// Reads `key` into `out` when it holds exactly that kind of value (no throw, no conversion from
// another kind); false names the field in `missing`.
template <typename T>
bool read(const json& j, const char* key, T& out, std::string& missing) {
  auto it = j.find(key);
  bool ok = it != j.end();
  if (ok) {
    if constexpr (std::is_same_v<T, bool>) {
      ok = it->is_boolean();
    } else if constexpr (std::is_same_v<T, std::string>) {
      ok = it->is_string();
    } else if constexpr (std::is_signed_v<T>) {
      ok = it->is_number_integer();
    } else {
      ok = it->is_number_unsigned();
    }
  }
  if (ok) {
    try {
      out = it->get<T>();
    } catch (const json::exception&) {
      ok = false;
    }
  }
  if (!ok && missing.empty()) missing = key;
  return ok;
}

}  // namespace

json to_json(const handshake_settings& s) {
  json segments = json::array();
  for (const auto& seg : s.pool_segments) {
    segments.push_back({{"segment", seg.segment}, {"total_size", seg.total_size}});
  }
  const auto& m = s.memory;
  return {{"slot", s.slot},
          {"generation", s.generation},
          {"pool_segments", std::move(segments)},
          {"device", s.device},
          {"ordinal", s.ordinal},
          {"backend_plugin", s.backend_plugin},
          {"host_manager", s.host_manager},
          {"level", s.level},
          {"pager_plugin", s.pager_plugin},
          {"ledger_plugin", s.ledger_plugin},
          {"allocator_plugin", s.allocator_plugin},
          {"no_pager_reason", s.no_pager_reason},
          {"streams", m.streams},
          {"page_size", m.page_size},
          {"reserve_vram", m.reserve_vram},
          {"simple_headroom", m.simple_headroom},
          {"pressure_source", m.pressure_source},
          {"pinned_memory", m.pinned_memory},
          {"heartbeat_ms", s.heartbeat_ms}};
}

result<handshake_settings> handshake_from_json(const json& j) {
  handshake_settings s;
  auto& m = s.memory;
  std::string bad;
  if (!j.is_object())
    return error{handshake_errc::bad_handshake, "the host's settings are not a map"};
  const bool ok =
      read(j, "slot", s.slot, bad) & read(j, "device", s.device, bad) &
      read(j, "ordinal", s.ordinal, bad) & read(j, "backend_plugin", s.backend_plugin, bad) &
      read(j, "host_manager", s.host_manager, bad) & read(j, "level", s.level, bad) &
      read(j, "pager_plugin", s.pager_plugin, bad) &
      read(j, "ledger_plugin", s.ledger_plugin, bad) &
      read(j, "allocator_plugin", s.allocator_plugin, bad) &
      read(j, "no_pager_reason", s.no_pager_reason, bad) & read(j, "streams", m.streams, bad) &
      read(j, "page_size", m.page_size, bad) & read(j, "reserve_vram", m.reserve_vram, bad) &
      read(j, "simple_headroom", m.simple_headroom, bad) &
      read(j, "pressure_source", m.pressure_source, bad) &
      read(j, "pinned_memory", m.pinned_memory, bad) & read(j, "heartbeat_ms", s.heartbeat_ms, bad);
  if (!ok) {
    return error{handshake_errc::bad_handshake,
                 "the host's settings lack the field \"" + bad + "\" or give it another type"};
  }
  // Older hosts did not send it: absent reads as the first start.
  if (j.contains("generation") && !read(j, "generation", s.generation, bad)) {
    return error{handshake_errc::bad_handshake, "the host's settings give generation another type"};
  }
  auto segments = j.find("pool_segments");
  if (segments == j.end() || !segments->is_array()) {
    return error{handshake_errc::bad_handshake, "the host's settings lack pool_segments"};
  }
  for (const auto& seg : *segments) {
    pool_segment_info info;
    if (!seg.is_object() || !read(seg, "segment", info.segment, bad) ||
        !read(seg, "total_size", info.total_size, bad)) {
      return error{handshake_errc::bad_handshake,
                   "a pool_segments entry lacks segment or total_size"};
    }
    s.pool_segments.push_back(info);
  }
  return s;
}

}  // namespace orch::ipc
