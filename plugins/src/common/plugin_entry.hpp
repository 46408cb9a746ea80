// The entry boilerplate every plugin kind shares (pager, ledger, allocator, backend;
// docs/plugin-abi.md, "Entry point and table"): the table's frozen prefix, the idempotent init,
// and orch_plugin_query, which reads the major the host asks for and serves major 1 only.
#pragma once

#include <cstdint>

#include "host_link.hpp"
#include "orch/plugin/plugin.h"

namespace orch::plugin_detail {

// What a plugin says about itself in the frozen prefix of its table (docs/plugin-abi.md).
struct plugin_identity {
  orch_plugin_kind kind;
  const char* name;
  orch_backend_kind backend;
  uint32_t min_level;
  uint32_t max_level;
  uint64_t capabilities;
};

// The entries after the prefix. A kind table a plugin does not provide stays NULL.
struct plugin_entries {
  orch_status (*init)(const orch_host_services_v1* host);
  void (*shutdown)();
  const orch_backend_api_v1* backend_api = nullptr;
  const orch_pager_api_v1* pager_api = nullptr;
  const orch_ledger_api_v1* ledger_api = nullptr;
  const orch_allocator_api_v1* allocator_api = nullptr;
  const void* extension = nullptr;
};

constexpr orch_plugin_table_v1 make_plugin_table(const plugin_identity& id,
                                                 const plugin_entries& e) noexcept {
  return {.struct_size = sizeof(orch_plugin_table_v1),
          .abi_major = ORCH_PLUGIN_ABI_MAJOR,
          .abi_minor = ORCH_PLUGIN_ABI_MINOR,
          .kind = id.kind,
          .reserved0 = 0,
          .name = id.name,
          .version = ORCH_PLUGIN_VERSION,
          .backend = id.backend,
          .min_level = id.min_level,
          .max_level = id.max_level,
          .reserved1 = 0,
          .capabilities = id.capabilities,
          .init = e.init,
          .shutdown = e.shutdown,
          .backend_api = e.backend_api,
          .pager_api = e.pager_api,
          .ledger_api = e.ledger_api,
          .allocator_api = e.allocator_api,
          .extension = e.extension};
}

// The init of every plugin: idempotent (a second call answers ORCH_ALREADY_INITIALISED and runs
// nothing), the host's services attached, then the plugin's own start-up steps, which cannot fail.
template <typename Start>
orch_status init_plugin(lifecycle& life, host_link& link, const orch_host_services_v1* host,
                        Start&& start) noexcept {
  if (const orch_status st = life.begin_init(); st != ORCH_OK) return st;
  link.attach(host);
  start();
  life.finish_init(true);
  return ORCH_OK;
}

inline orch_status init_plugin(lifecycle& life, host_link& link,
                               const orch_host_services_v1* host) noexcept {
  return init_plugin(life, link, host, [] {});
}

// The body of orch_plugin_query. This plugin serves major 1 only: a host of a later major asks
// with its own major first, gets NULL, and asks again with 1 to adapt the v1 table
// (docs/plugin-abi.md, "Versions"). Any minor of major 1 reads the same table: what was appended
// since the host's minor, it reads only after ORCH_HAS_FIELD.
static_assert(ORCH_PLUGIN_ABI_MAJOR == 1u,
              "the plugins fill orch_plugin_table_v1: a new major needs its own tables");
inline const orch_plugin_table_v1* serve_query(uint32_t host_abi_major,
                                               const orch_plugin_table_v1& table) noexcept {
  return host_abi_major == ORCH_PLUGIN_ABI_MAJOR ? &table : nullptr;
}

}  // namespace orch::plugin_detail

// Defines the exported entry point over `table_expr`, an expression naming the plugin's static
// table (plugins/exports/plugin.map exports it and nothing else).
#define ORCH_PLUGIN_QUERY(table_expr)                                                          \
  extern "C" ORCH_PLUGIN_EXPORT const orch_plugin_table_v1* orch_plugin_query(               \
      uint32_t host_abi_major, uint32_t /*host_abi_minor*/) {                                  \
    return ::orch::plugin_detail::serve_query(host_abi_major, table_expr);                     \
  }
