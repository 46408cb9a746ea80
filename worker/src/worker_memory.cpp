// A worker's memory (DESIGN.md §4.6): the host's settings, the shared segments and the budget
// slot, the plugins at the host's level, the applied-settings hash and the published stats. Models
// are in worker_models.cpp, releases in worker_releases.cpp.
#include "worker_memory.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <future>

#include <spdlog/spdlog.h>

#include "orch/ipc/backend_pin_registrar.hpp"
#include "orch/plugins/names.hpp"

namespace orch::worker {
namespace {

template <typename T>
bool read(const nlohmann::json& j, const char* key, T& out) {
  auto it = j.find(key);
  if (it == j.end()) return false;
  try {
    out = it->get<T>();
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  return true;
}

void report(ipc::plugin_report& r, const plugins::plugin_library* lib, std::uint32_t level) {
  if (lib == nullptr) {
    r = ipc::plugin_report{};
    return;
  }
  ipc::set_text(r.name, lib->table().name ? lib->table().name : "");
  ipc::set_text(r.version, lib->table().version ? lib->table().version : "");
  r.level = level;
  r.min_level = lib->table().min_level;
  r.max_level = lib->table().max_level;
  r.reserved = 0;
}

std::optional<std::string> process_env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

// Loads and initialises a plugin of the expected kind table; the error names the file.
template <typename Api>
result<std::unique_ptr<plugins::plugin_library>> open_plugin(const std::string& path,
                                                             const Api* orch_plugin_table::*api,
                                                             const Api*& out,
                                                             const char* what) {
  // Debug: every worker loads its plugins, and `run`'s default output is for the run itself.
  auto lib = plugins::plugin_library::open(path, /*announce=*/false);
  if (!lib) return lib.err();
  if (auto st = (*lib)->init(); !st) return st.err();
  out = (*lib)->table().*api;
  if (out == nullptr) return error{"invalid_plugin", path + " is not " + what};
  return std::move(*lib);
}

}  // namespace

result<host_settings> host_settings::from_json(const nlohmann::json& j) {
  host_settings s;
  auto& m = s.memory;
  const bool ok =
      read(j, "slot", s.slot) && read(j, "device", s.device) && read(j, "ordinal", s.ordinal) &&
      read(j, "backend_plugin", s.backend_plugin) && read(j, "host_manager", s.host_manager) &&
      read(j, "level", s.level) && read(j, "pager_plugin", s.pager_plugin) &&
      read(j, "ledger_plugin", s.ledger_plugin) &&
      read(j, "allocator_plugin", s.allocator_plugin) &&
      read(j, "no_pager_reason", s.no_pager_reason) && read(j, "streams", m.streams) &&
      read(j, "page_size", m.page_size) && read(j, "reserve_vram", m.reserve_vram) &&
      read(j, "simple_headroom", m.simple_headroom) &&
      read(j, "pressure_source", m.pressure_source) &&
      read(j, "pinned_memory", m.pinned_memory) && read(j, "heartbeat_ms", s.heartbeat_ms);
  if (!ok) return error{"bad_handshake", "the host's settings lack a field or have a wrong type"};
  auto segments = j.find("pool_segments");
  if (segments == j.end() || !segments->is_array()) {
    return error{"bad_handshake", "the host's settings lack pool_segments"};
  }
  for (const auto& seg : *segments) {
    pool_segment_info info;
    if (!seg.is_object() || !read(seg, "segment", info.segment) ||
        !read(seg, "total_size", info.total_size)) {
      return error{"bad_handshake", "a pool_segments entry lacks segment or total_size"};
    }
    s.pool_segments.push_back(info);
  }
  return s;
}

result<std::unique_ptr<worker_memory>> worker_memory::setup(const host_settings& s,
                                                            ipc::unique_fd control_fd,
                                                            ipc::unique_fd slot_fd,
                                                            std::vector<ipc::unique_fd> pool_fds,
                                                            ipc::unique_fd sim_fd) {
  std::unique_ptr<worker_memory> m(new worker_memory());
  m->settings_ = s;
  m->sim_fd_ = std::move(sim_fd);
  // This process's device, through the same backend plugin as the host's: the pool is
  // registered with it (backend_pin_registrar.hpp) and ledger models live on it.
  if (!s.backend_plugin.empty()) {
    auto dev = plugins::backend_device::open(s.backend_plugin, s.ordinal,
                                             m->sim_fd_.valid() ? m->sim_fd_.get() : -1);
    if (!dev) return dev.err();
    m->backend_ = std::move(*dev);
  }
  if (m->backend_ && s.memory.pinned_memory) {
    m->registrar_ = std::make_unique<ipc::backend_pin_registrar>(
        m->backend_->api(), m->backend_->device(), m->backend_->backend());
    m->pool_pinned_ = m->backend_->api().host_register != nullptr;
  } else {
    m->registrar_ = std::make_unique<ipc::noop_pin_registrar>();
  }
  m->segments_ = std::make_unique<ipc::segment_table>(*m->registrar_);
  if (pool_fds.size() != s.pool_segments.size()) {
    return error{"bad_handshake", "the host sent " + std::to_string(pool_fds.size()) +
                                      " pool fds but announced " +
                                      std::to_string(s.pool_segments.size()) + " segments"};
  }
  for (std::size_t i = 0; i < pool_fds.size(); ++i) {
    auto id = m->segments_->attach(std::move(pool_fds[i]), s.pool_segments[i].segment,
                                   s.pool_segments[i].total_size);
    if (!id) return id.err();
  }
  // Our slot is ours alone; the control segment (grants, the other slots' owners) is read-only.
  auto control = ipc::control_segment::attach(std::move(control_fd), std::move(slot_fd), s.slot);
  if (!control) return control.err();
  m->control_.emplace(std::move(*control));
  m->budget_ = std::make_unique<ipc::budget_account>(*m->control_, s.slot);

  // The worker follows the host through ORCH_WORKER_PAGER (DESIGN.md §4.6).
  plugins::worker_manager_inputs in;
  in.signal = plugins::read_pager_signal(process_env);
  in.gpu_device = s.device != "cpu";
  m->manager_ = plugins::resolve_worker_manager(in);
  if (m->is_pager() && s.pager_plugin.empty()) {
    m->manager_ = {plugins::memory_manager::ledger,
                   s.no_pager_reason.empty() ? "no pager plugin" : s.no_pager_reason};
  }
  if (m->is_pager()) {
    if (auto st = m->open_pager(); !st) {
      // Deinitialised first, so the failed plugin leaves nothing behind, then the ledger.
      m->close_pager();
      in.init_error = st.err().message;
      m->manager_ = plugins::resolve_worker_manager(in);
      spdlog::warn("pager plugin {} failed to start ({}); this worker runs the ledger",
                   s.pager_plugin, st.err().message);
    }
  }
  if (!m->is_pager()) {
    if (auto st = m->open_ledger(); !st) {
      spdlog::warn("no ledger for this worker's models ({}): model nodes will be refused",
                   st.err().message);
    }
  }
  if (auto st = m->open_allocator(); !st) return st.err();
  m->level_ = m->is_pager() ? s.level : 0;
  m->settings_hash_ =
      plugins::applied_settings_hash(m->applied_settings(), m->manager_.manager, m->level_);
  spdlog::info("memory manager: {} ({})", plugins::to_string(m->manager_.manager),
               m->manager_.reason);
  return m;
}

void worker_memory::ask_grants_over(std::shared_ptr<ipc::channel> channel) {
  budget_->set_grant_source([channel = std::move(channel)](std::uint64_t shortfall) -> status {
    auto answer = std::make_shared<std::promise<status>>();
    auto done = answer->get_future();
    channel->request(ipc::message_type::pinned_grant, {{"bytes", shortfall}},
                     std::chrono::seconds(10), [answer](result<ipc::message> r) {
                       answer->set_value(r ? ok_status() : status(r.err()));
                     });
    if (done.wait_for(std::chrono::seconds(12)) != std::future_status::ready) {
      return error{"budget_exceeded", "the host did not answer a pinned_grant request"};
    }
    return done.get();
  });
}

plugins::host_memory_settings worker_memory::applied_settings() const {
  // Read back from the plugins and the pool where they can tell, not copied from what was sent:
  // a setting a plugin dropped or changed shows as a mismatch on the host's side. The pager has
  // no getters for page size, extra headroom and pressure source; those are as sent, given to
  // device_open, which refuses what it cannot take.
  plugins::host_memory_settings applied = settings_.memory;
  applied.streams = 0;
  if (allocator_ != nullptr) {
    orch_cast_stats cs{};
    cs.struct_size = sizeof(cs);
    if (allocator_api_->cast_stats(allocator_, &cs) == ORCH_OK) applied.streams = cs.streams;
  }
  applied.simple_headroom = 0;
  if (is_pager() && level_ >= 3 && pager_api_->get_simple_headroom != nullptr) {
    std::uint64_t headroom = 0;
    if (pager_api_->get_simple_headroom(&headroom) == ORCH_OK) applied.simple_headroom = headroom;
  }
  applied.pinned_memory = pool_pinned_;
  return applied;
}

status worker_memory::open_pager() {
  const auto& s = settings_;
  auto lib = open_plugin(s.pager_plugin, &orch_plugin_table::pager_api, pager_api_,
                         "a pager plugin");
  if (!lib) return lib.err();
  pager_lib_ = std::move(*lib);
  orch_pager_config pc{};
  pc.struct_size = sizeof(pc);
  pc.level = s.level;
  pc.ordinal = s.ordinal;
  pc.sim_fd = sim_fd_.valid() ? sim_fd_.get() : -1;
  pc.page_size = s.memory.page_size;
  pc.poll_interval_ms = -1;
  pc.poll_floor = -1;
  // Only what the level can express (the adapter dropped the rest, with the host's log lines).
  if (s.level >= 3) pc.extra_headroom = s.memory.reserve_vram;
  if (s.level >= 4) pc.pressure_source = s.memory.pressure_source;
  if (const orch_status st = pager_api_->device_open(&pc, &pager_); st != ORCH_OK) {
    pager_ = nullptr;
    return error{"pager_open_failed",
                 std::string("pager device_open answered ") + plugins::status_name(st)};
  }
  if (s.level >= 3 && pager_api_->set_simple_headroom != nullptr) {
    if (const orch_status st = pager_api_->set_simple_headroom(s.memory.simple_headroom);
        st != ORCH_OK) {
      return error{"pager_open_failed",
                   std::string("set_simple_headroom answered ") + plugins::status_name(st)};
    }
  }
  return ok_status();
}

void worker_memory::close_pager() noexcept {
  if (pager_ != nullptr) pager_api_->device_close(pager_);
  pager_ = nullptr;
  pager_api_ = nullptr;
  pager_lib_.reset();  // shut down and unloaded
}

status worker_memory::open_ledger() {
  if (settings_.ledger_plugin.empty()) return error{"not_found", "no ledger plugin for this backend"};
  if (!backend_) return error{"not_found", "no backend device for the ledger's models"};
  std::uint64_t total = 0;
  if (backend_->api().device_total_mem(backend_->device(), &total) != ORCH_OK) {
    return error{"device_error", "the backend cannot tell the device's total memory"};
  }
  auto lib = open_plugin(settings_.ledger_plugin, &orch_plugin_table::ledger_api, ledger_api_,
                         "a ledger plugin");
  if (!lib) return lib.err();
  ledger_lib_ = std::move(*lib);
  orch_ledger_config lc{};
  lc.struct_size = sizeof(lc);
  const std::uint64_t reserve = settings_.memory.reserve_vram;
  lc.budget = total > reserve ? total - reserve : 0;
  ledger_budget_ = lc.budget;
  if (const orch_status st = ledger_api_->open(&lc, &ledger_); st != ORCH_OK) {
    ledger_ = nullptr;
    return error{"ledger_open_failed",
                 std::string("ledger open answered ") + plugins::status_name(st)};
  }
  return ok_status();
}

status worker_memory::open_allocator() {
  const auto& s = settings_;
  if (s.allocator_plugin.empty()) return ok_status();
  // Without a pager the allocator takes memory from this process's backend device directly.
  if (!is_pager() && !backend_ && s.memory.streams > 0) return ok_status();
  auto lib = open_plugin(s.allocator_plugin, &orch_plugin_table::allocator_api, allocator_api_,
                         "an allocator plugin");
  if (!lib) return lib.err();
  allocator_lib_ = std::move(*lib);
  orch_allocator_config ac{};
  ac.struct_size = sizeof(ac);
  ac.level = std::max<std::uint32_t>(s.level, allocator_lib_->table().min_level);
  ac.ordinal = s.ordinal;
  ac.streams = s.memory.streams;
  ac.reserve_size = std::uint64_t{1} << 30;  // VA only; ample for the sim device
  if (is_pager()) {
    ac.pager_api = pager_api_;
    ac.pager = pager_;
  } else if (backend_) {
    ac.backend_api = &backend_->api();
    ac.device = backend_->device();
  }
  if (const orch_status st = allocator_api_->open(&ac, &allocator_); st != ORCH_OK) {
    allocator_ = nullptr;
    return error{"allocator_open_failed",
                 std::string("allocator open answered ") + plugins::status_name(st)};
  }
  return ok_status();
}

worker_memory::~worker_memory() {
  if (allocator_ != nullptr) allocator_api_->close(allocator_);
  for (auto& [key, r] : regions_) {
    if (r->pager_region != nullptr) pager_api_->region_destroy(r->pager_region);
    if (r->held > 0) backend_->api().phys_release(backend_->device(), r->handle);
  }
  regions_.clear();
  if (ledger_ != nullptr) ledger_api_->close(ledger_);
  close_pager();
  allocator_lib_.reset();
  ledger_lib_.reset();
  if (budget_ && budget_->reserved() > 0) budget_->release(budget_->reserved());
}

void worker_memory::publish(std::uint64_t epoch, std::uint64_t calls) noexcept {
  ipc::stats_snapshot s{};
  s.memory_manager = is_pager() ? ipc::memory_manager_kind::pager : ipc::memory_manager_kind::ledger;
  ipc::set_text(s.memory_manager_reason, manager_.reason);
  report(s.plugins[static_cast<int>(ipc::plugin_slot::pager)],
         pager_lib_ ? pager_lib_.get() : ledger_lib_.get(), level_);
  report(s.plugins[static_cast<int>(ipc::plugin_slot::allocator)], allocator_lib_.get(), level_);
  report(s.plugins[static_cast<int>(ipc::plugin_slot::backend)],
         backend_ ? &backend_->library() : nullptr, level_);
  if (pager_ != nullptr) {
    orch_pager_usage u{};
    u.struct_size = sizeof(u);
    if (pager_api_->usage(pager_, &u) == ORCH_OK) {
      s.device_total_bytes = u.capacity;
      s.device_free_bytes = u.last_polled_free;
      s.pager_resident_bytes = u.page_bytes;
    }
    std::uint64_t pinned = 0;
    if (pager_api_->pinned_bytes(pager_, &pinned) == ORCH_OK) s.device_pinned_bytes = pinned;
  } else if (backend_) {
    std::uint64_t free_bytes = 0, total = 0;
    if (backend_->api().mem_get_info(backend_->device(), &free_bytes, &total) == ORCH_OK) {
      s.device_total_bytes = total;
      s.device_free_bytes = free_bytes;
    }
    s.ledger_loaded_bytes = resident_bytes();
  }
  if (allocator_ != nullptr) {
    orch_cast_stats c{};
    c.struct_size = sizeof(c);
    if (allocator_api_->cast_stats(allocator_, &c) == ORCH_OK) {
      s.cast_buffer_bytes = c.committed + c.retired;
      s.cast_buffer_high_water = c.high_water;
    }
  }
  s.pinned_bytes = budget_->reserved();
  s.current_epoch = epoch;
  s.call_count = calls;
  s.last_boundary_release_ns = last_boundary_ns_;
  s.boundary_releases = boundary_releases_;
  s.settings_hash = settings_hash_;
  block().publish(s);
}

nlohmann::json worker_memory::describe_plugins() const {
  auto one = [&](const plugins::plugin_library* lib) -> nlohmann::json {
    if (lib == nullptr) return nullptr;
    return {{"name", lib->table().name}, {"version", lib->table().version}, {"level", level_}};
  };
  return {{"manager", plugins::to_string(manager_.manager)},
          {"reason", manager_.reason},
          {"settings_hash", settings_hash_},
          {"pager", one(pager_lib_.get())},
          {"ledger", one(ledger_lib_.get())},
          {"allocator", one(allocator_lib_.get())}};
}

}  // namespace orch::worker
