// Entry point of the pager plugins: the C ABI over pager_policy, with the protocol-level rules of
// levels.h enforced at the boundary. One source builds every variant: the backend comes from
// ORCH_PLUGIN_BACKEND_*, the level range from ORCH_PAGER_MIN_LEVEL / ORCH_PAGER_MAX_LEVEL (the
// level-restricted sim variants exist so the runtime can test injection, docs/plugin-abi.md).
#include "../backends/backends.hpp"
#include "../common/handle_registry.hpp"
#include "../common/host_link.hpp"
#include "../common/plugin_entry.hpp"
#include "pager_device.hpp"
#include "reader_grace.hpp"
#include "region_table.hpp"

struct orch_pager {};   // never instantiated: handles are pager_device pointers
struct orch_region {};  // ... and region_table handles (an index and a generation)

namespace {

using namespace orch::plugin_detail;

#if defined(ORCH_PLUGIN_BACKEND_SIM)
constexpr orch_backend_kind plugin_backend = ORCH_BACKEND_SIM;
const orch_backend_api* backend_api() { return sim_backend_api(); }
const char* driver_summary() { return nullptr; }
#elif defined(ORCH_PLUGIN_BACKEND_CUDA)
constexpr orch_backend_kind plugin_backend = ORCH_BACKEND_CUDA;
const orch_backend_api* backend_api() { return cuda_backend_api(); }
const char* driver_summary() { return cuda_driver_summary(); }
#elif defined(ORCH_PLUGIN_BACKEND_HIP)
constexpr orch_backend_kind plugin_backend = ORCH_BACKEND_HIP;
const orch_backend_api* backend_api() { return hip_backend_api(); }
const char* driver_summary() { return hip_runtime_summary(); }
#else
#error "define one ORCH_PLUGIN_BACKEND_* (sim, cuda or hip)"
#endif

constexpr uint32_t min_level = ORCH_PAGER_MIN_LEVEL;
constexpr uint32_t max_level = ORCH_PAGER_MAX_LEVEL;
static_assert(min_level >= ORCH_LEVEL_MIN && max_level <= ORCH_LEVEL_MAX && min_level <= max_level);

host_link g_host{ORCH_PAGER_NAME};
lifecycle g_life;
// Open pagers: every entry point checks its handle here first, so a handle used after
// device_close or shutdown is refused instead of dereferenced. Regions are checked in the region
// table (region_table.hpp), which the lock-free hit path can read; it changes only under this
// registry's exclusive lock, so the locked entry points read it under the shared one.
handle_registry g_handles;
constexpr uint32_t pager_handle = 1;

pager_device* dev(orch_pager* p) { return reinterpret_cast<pager_device*>(p); }
uint64_t region_id(orch_region* r) { return reinterpret_cast<uintptr_t>(r); }

orch_status plugin_init(const orch_host_services* host) {
  return init_plugin(g_life, g_host, host, [] {
    simple_headroom().store(default_headroom);
    init_reader_grace();
  });
}

void plugin_shutdown() {
  if (!g_life.begin_shutdown()) return;
  // Calls already inside hold the registry shared: this waits for them; later ones see "down".
  auto lock = g_handles.exclusive();
  g_handles.for_each_locked(pager_handle, [](const void* d) {
    static_cast<pager_device*>(const_cast<void*>(d))->unpublish_regions();
  });
  wait_for_readers();  // hit-path calls still inside (reader_grace.hpp)
  g_handles.for_each_locked(pager_handle,
                            [](const void* d) { delete static_cast<const pager_device*>(d); });
  g_handles.clear_locked();
  simple_headroom().store(default_headroom);
  g_host.detach();
}

// What each level lets a caller pass at open (levels.h). Needs the registry held.
orch_status check_level(const orch_pager_config& c) {
  if (c.level < min_level || c.level > max_level) {
    g_host.log(ORCH_LOG_WARN, "device_open: caller speaks L%u, this plugin speaks L%u-L%u",
               c.level, min_level, max_level);
    return ORCH_UNSUPPORTED;
  }
  if (c.level < ORCH_LEVEL_MULTI_DEVICE && (c.ordinal != 0 || g_handles.any_locked(pager_handle)))
    return ORCH_UNSUPPORTED;
  if (c.level < ORCH_LEVEL_HEADROOM && c.extra_headroom != 0) return ORCH_UNSUPPORTED;
  if (c.level < ORCH_LEVEL_PRESSURE && c.pressure_source != ORCH_PRESSURE_DEFAULT)
    return ORCH_UNSUPPORTED;
  return ORCH_OK;
}

orch_status device_open_unguarded(const orch_pager_config* config, orch_pager** out) {
  // The whole of ABI 1.0's struct (it ends with reserved0); a field appended later is read only
  // after ORCH_HAS_FIELD.
  if (config == nullptr || out == nullptr || !ORCH_HAS_FIELD(config, reserved0) ||
      config->pressure_source > ORCH_PRESSURE_NONE)
    return ORCH_INVALID;
  auto lock = g_handles.exclusive();
  if (!g_life.up()) return ORCH_NOT_INITIALISED;
  if (const orch_status st = check_level(*config); st != ORCH_OK) return st;
  pager_options o;
  o.ordinal = config->ordinal;
  o.level = config->level;
  o.page_size = config->page_size;
  o.extra_headroom = config->extra_headroom;
  o.budget_cap = config->budget_cap;
  if (config->poll_interval_ms >= 0)
    o.poll_interval_ns = static_cast<uint64_t>(config->poll_interval_ms) * 1000000ull;
  if (config->poll_floor >= 0) o.poll_floor = config->poll_floor;
  o.pressure_source = config->pressure_source;
  orch_device_config dc{sizeof(orch_device_config), config->ordinal, config->sim_fd, 0};
  pager_device* d = nullptr;
  if (const orch_status st = pager_device::open(backend_api(), dc, o, &g_host, &d); st != ORCH_OK) {
    // Why the device could not be opened, when it is the driver (docs/gpu.md, "Driver versions").
    if (const char* why = driver_summary(); why != nullptr && st == ORCH_DEVICE_ERROR)
      g_host.log(ORCH_LOG_WARN, "device %d: %s", config->ordinal, why);
    return st;
  }
  try {
    g_handles.add_locked(d, pager_handle);
  } catch (...) {
    delete d;
    throw;
  }
  *out = reinterpret_cast<orch_pager*>(d);
  return ORCH_OK;
}

orch_status device_open(const orch_pager_config* config, orch_pager** out) {
  if (!g_life.up()) return ORCH_NOT_INITIALISED;
  return guarded([&] { return device_open_unguarded(config, out); });
}

void device_close(orch_pager* p) {
  auto lock = g_handles.exclusive();
  if (!g_life.up() || !g_handles.contains_locked(p, pager_handle)) return;
  dev(p)->unpublish_regions();  // its regions die with it
  g_handles.remove_locked(p);
  wait_for_readers();
  delete dev(p);
}

// The process-wide calls carry no device, so their level is the lowest level any open pager was
// opened at: a process that opened a device at L2 has said it speaks L2, and levels.h forbids
// the L3/L4 calls to it. With no pager open the caller has promised nothing yet; they are allowed.
bool every_open_pager_speaks(uint32_t level) {
  bool ok = true;
  g_handles.for_each_locked(pager_handle, [&](const void* d) {
    if (static_cast<const pager_device*>(d)->level() < level) ok = false;
  });
  return ok;
}

orch_status set_simple_headroom(uint64_t bytes) {
  const auto lock = g_handles.shared();
  if (!g_life.up()) return ORCH_NOT_INITIALISED;
  if (!every_open_pager_speaks(ORCH_LEVEL_HEADROOM)) return ORCH_UNSUPPORTED;
  simple_headroom().store(bytes);
  return ORCH_OK;
}

orch_status get_simple_headroom(uint64_t* bytes) {
  const auto lock = g_handles.shared();
  if (!g_life.up()) return ORCH_NOT_INITIALISED;
  if (!every_open_pager_speaks(ORCH_LEVEL_HEADROOM)) return ORCH_UNSUPPORTED;
  if (bytes == nullptr) return ORCH_INVALID;
  *bytes = simple_headroom().load();
  return ORCH_OK;
}

orch_status set_log_callback(orch_pager_log_fn fn, void* ctx) {
  const auto lock = g_handles.shared();
  if (!g_life.up()) return ORCH_NOT_INITIALISED;
  if (!every_open_pager_speaks(ORCH_LEVEL_PRESSURE)) return ORCH_UNSUPPORTED;
  g_host.redirect(fn, ctx);
  return ORCH_OK;
}

// Runs call(device) when p is a live pager of a live plugin; the status of the check otherwise.
template <typename F>
orch_status with_pager(orch_pager* p, F&& call) {
  const handle_registry::use use(g_handles, g_life, p, pager_handle);
  if (!use) return use.status();
  return guarded([&] { return call(*dev(p)); });
}

template <typename F>
orch_status with_region(orch_region* r, F&& call) {
  const auto lock = g_handles.shared();
  if (!g_life.up()) return ORCH_NOT_INITIALISED;
  pager_region* x = find_region(region_id(r));
  if (x == nullptr) return ORCH_INVALID;
  return guarded([&] { return call(x->owner(), x); });
}

orch_status set_budget_cap(orch_pager* p, uint64_t bytes) {
  return with_pager(p, [&](pager_device& d) { return d.set_budget_cap(bytes); });
}

orch_status set_pressure_source(orch_pager* p, uint32_t source) {
  return with_pager(p, [&](pager_device& d) {
    return d.level() < ORCH_LEVEL_PRESSURE ? ORCH_UNSUPPORTED : d.set_pressure_source(source);
  });
}

orch_status region_create(orch_pager* p, uint64_t bytes, orch_region** r, uint64_t* clamped) {
  if (!g_life.up()) return ORCH_NOT_INITIALISED;
  if (r == nullptr) return ORCH_INVALID;
  return guarded([&] {
    // Exclusive: the new region is registered before anyone can see it.
    auto lock = g_handles.exclusive();
    if (!g_life.up()) return ORCH_NOT_INITIALISED;
    if (!g_handles.contains_locked(p, pager_handle)) return ORCH_INVALID;
    pager_region* out = nullptr;
    const orch_status st = dev(p)->create_region(bytes, &out, clamped);
    if (st != ORCH_OK) return st;
    const uint64_t handle = publish_region(out);
    if (handle == 0) {
      dev(p)->destroy_region(out);  // never published: no reader can hold it
      return ORCH_NO_SLOT;          // every handle of the region table is in use
    }
    *r = reinterpret_cast<orch_region*>(static_cast<uintptr_t>(handle));
    return ORCH_OK;
  });
}

void region_destroy(orch_region* r) {
  auto lock = g_handles.exclusive();
  if (!g_life.up()) return;
  pager_region* x = find_region(region_id(r));
  if (x == nullptr) return;
  unpublish_region(region_id(r));
  wait_for_readers();  // a hit-path call that found it before has finished with it
  x->owner().destroy_region(x);
}

orch_status region_info(orch_region* r, orch_region_info* info) {
  return with_region(r, [&](pager_device& d, pager_region* x) { return d.region_info(x, info); });
}
orch_status region_prioritize(orch_region* r) {
  return with_region(r, [&](pager_device& d, pager_region* x) { return d.prioritize(x, true); });
}
orch_status region_deprioritize(orch_region* r) {
  return with_region(r, [&](pager_device& d, pager_region* x) { return d.prioritize(x, false); });
}
// fault and unpin try the lock-free hit path first (pager_fast_path.cpp); whatever it leaves
// goes through the registry and the pager mutex as every other call does.
orch_status region_fault(orch_region* r, uint64_t offset, uint64_t size, uint64_t* sig,
                         size_t sig_cap, size_t* sig_len, uint64_t* newly_mapped) {
  {
    const reader_section section;
    if (section)
      if (pager_region* x = find_region(region_id(r));
          x != nullptr &&
          x->owner().fault_hit(section.slot().hit_pins, *x, offset, size, sig, sig_cap,
                               sig_len, newly_mapped))
        return ORCH_OK;
  }
  return with_region(r, [&](pager_device& d, pager_region* x) {
    return d.fault(x, offset, size, sig, sig_cap, sig_len, newly_mapped);
  });
}
orch_status region_unpin(orch_region* r, uint64_t offset, uint64_t size) {
  auto result = pager_device::unpin_result::locked;
  {
    const reader_section section;
    if (section)
      if (pager_region* x = find_region(region_id(r)); x != nullptr)
        result = x->owner().unpin_hit(section.slot().hit_pins, *x, offset, size);
  }
  if (result == pager_device::unpin_result::done) return ORCH_OK;
  if (result == pager_device::unpin_result::release_above_watermark)
    return with_region(r, [&](pager_device& d, pager_region* x) {
      return d.release_above_watermark(x, offset, size);
    });
  return with_region(r,
                     [&](pager_device& d, pager_region* x) { return d.unpin(x, offset, size); });
}
orch_status region_set_watermark(orch_region* r, uint64_t bytes) {
  return with_region(r,
                     [&](pager_device& d, pager_region* x) { return d.set_watermark(x, bytes); });
}
orch_status region_set_watermark_limit(orch_region* r, uint64_t bytes) {
  return with_region(
      r, [&](pager_device& d, pager_region* x) { return d.set_watermark_limit(x, bytes); });
}
orch_status region_evict(orch_region* r, uint64_t bytes, uint64_t* freed) {
  return with_region(r,
                     [&](pager_device& d, pager_region* x) { return d.evict(x, bytes, freed); });
}
orch_status region_residency(orch_region* r, uint8_t* flags, size_t cap, size_t* len) {
  return with_region(
      r, [&](pager_device& d, pager_region* x) { return d.residency(x, flags, cap, len); });
}
orch_status region_resident_bytes(orch_region* r, uint64_t* bytes) {
  return with_region(
      r, [&](pager_device& d, pager_region* x) { return d.region_resident_bytes(x, bytes); });
}

orch_status reset_watermark_limits(orch_pager* p) {
  return with_pager(p, [&](pager_device& d) { return d.reset_watermark_limits(); });
}
orch_status reclaim(orch_pager* p, uint64_t bytes, uint32_t flags, uint64_t* freed) {
  return with_pager(p, [&](pager_device& d) { return d.reclaim(bytes, flags, freed); });
}
orch_status resident_bytes(orch_pager* p, uint64_t* bytes) {
  return with_pager(p, [&](pager_device& d) { return d.resident_bytes(bytes); });
}
orch_status pinned_bytes(orch_pager* p, uint64_t* bytes) {
  return with_pager(p, [&](pager_device& d) { return d.pinned_bytes(bytes); });
}
orch_status budget_deficit(orch_pager* p, uint64_t request, int64_t* deficit) {
  return with_pager(p, [&](pager_device& d) { return d.budget_deficit(request, deficit); });
}
orch_status poll(orch_pager* p) {
  return with_pager(p, [&](pager_device& d) { return d.poll(); });
}
orch_status account_external(orch_pager* p, int64_t delta) {
  return with_pager(p, [&](pager_device& d) { return d.account_external(delta); });
}
orch_status usage(orch_pager* p, orch_pager_usage* u) {
  return with_pager(p, [&](pager_device& d) { return d.usage(u); });
}
orch_status stats(orch_pager* p, orch_pager_stats* s) {
  return with_pager(p, [&](pager_device& d) { return d.stats(s); });
}
// These two answer pointers: NULL for a pager that is not live (or a plugin that is down).
const orch_backend_api* pager_backend(orch_pager* p) {
  const handle_registry::use use(g_handles, g_life, p, pager_handle);
  return use ? dev(p)->backend() : nullptr;
}
orch_device* pager_device_of(orch_pager* p) {
  const handle_registry::use use(g_handles, g_life, p, pager_handle);
  return use ? dev(p)->device() : nullptr;
}

// Entries a level range cannot speak are NULL: "NULL means unsupported" (docs/plugin-abi.md).
constexpr bool speaks_l3 = max_level >= ORCH_LEVEL_HEADROOM;
constexpr bool speaks_l4 = max_level >= ORCH_LEVEL_PRESSURE;
constexpr orch_pager_api pager_api{
    .struct_size = sizeof(orch_pager_api),
    .reserved0 = 0,
    .device_open = device_open,
    .device_close = device_close,
    .set_simple_headroom = speaks_l3 ? set_simple_headroom : nullptr,
    .get_simple_headroom = speaks_l3 ? get_simple_headroom : nullptr,
    .set_budget_cap = set_budget_cap,
    .set_pressure_source = speaks_l4 ? set_pressure_source : nullptr,
    .set_log_callback = speaks_l4 ? set_log_callback : nullptr,
    .region_create = region_create,
    .region_destroy = region_destroy,
    .region_info = region_info,
    .region_prioritize = region_prioritize,
    .region_deprioritize = region_deprioritize,
    .region_fault = region_fault,
    .region_unpin = region_unpin,
    .region_set_watermark = region_set_watermark,
    .region_set_watermark_limit = region_set_watermark_limit,
    .reset_watermark_limits = reset_watermark_limits,
    .region_evict = region_evict,
    .reclaim = reclaim,
    .region_residency = region_residency,
    .region_resident_bytes = region_resident_bytes,
    .resident_bytes = resident_bytes,
    .pinned_bytes = pinned_bytes,
    .budget_deficit = budget_deficit,
    .poll = poll,
    .account_external = account_external,
    .usage = usage,
    .stats = stats,
    .backend = pager_backend,
    .device = pager_device_of};

constexpr orch_plugin_table table = make_plugin_table(
    {.kind = ORCH_KIND_PAGER,
     .name = ORCH_PAGER_NAME,
     .backend = plugin_backend,
     .min_level = min_level,
     .max_level = max_level,
     .capabilities = ORCH_CAP_SIGNATURES | ORCH_CAP_WATERMARK_LIMIT | ORCH_CAP_SET_WATERMARK |
                     ORCH_CAP_RESIDENCY | ORCH_CAP_BUDGET_CAP |
                     (speaks_l4 ? ORCH_CAP_PRESSURE_SOURCE : 0)},
    {.init = plugin_init, .shutdown = plugin_shutdown, .pager_api = &pager_api});

}  // namespace

ORCH_PLUGIN_QUERY(table)
