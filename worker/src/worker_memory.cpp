#include "worker_memory.hpp"

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

}  // namespace

result<host_settings> host_settings::from_json(const nlohmann::json& j) {
  host_settings s;
  const bool ok =
      read(j, "slot", s.slot) && read(j, "device", s.device) && read(j, "level", s.level) &&
      read(j, "ordinal", s.ordinal) && read(j, "backend_plugin", s.backend_plugin) &&
      read(j, "pager_plugin", s.pager_plugin) && read(j, "allocator_plugin", s.allocator_plugin) &&
      read(j, "manager_reason", s.manager_reason) && read(j, "streams", s.streams) &&
      read(j, "page_size", s.page_size) && read(j, "reserve_vram", s.reserve_vram) &&
      read(j, "pinned_memory", s.pinned_memory) && read(j, "heartbeat_ms", s.heartbeat_ms);
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
                                                            std::vector<ipc::unique_fd> pool_fds,
                                                            ipc::unique_fd sim_fd) {
  std::unique_ptr<worker_memory> m(new worker_memory());
  m->settings_ = s;
  m->sim_fd_ = std::move(sim_fd);
  // The pool is registered with this process's device through the same backend plugin as the
  // host's (backend_pin_registrar.hpp); the host sends no plugin when pinning is off.
  if (!s.backend_plugin.empty()) {
    auto dev = plugins::backend_device::open(s.backend_plugin, s.ordinal,
                                             m->sim_fd_.valid() ? m->sim_fd_.get() : -1);
    if (!dev) return dev.err();
    m->backend_ = std::move(*dev);
    m->registrar_ = std::make_unique<ipc::backend_pin_registrar>(*m->backend_);
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
  auto control = ipc::control_segment::attach(std::move(control_fd));
  if (!control) return control.err();
  m->control_.emplace(std::move(*control));
  if (s.slot >= m->control_->slot_count()) {
    return error{"bad_handshake", "the host gave slot " + std::to_string(s.slot) +
                                      " of a control segment with " +
                                      std::to_string(m->control_->slot_count())};
  }
  m->budget_ = std::make_unique<ipc::budget_account>(*m->control_, s.slot);

  if (!s.pager_plugin.empty()) {
    auto lib = plugins::plugin_library::open(s.pager_plugin);
    if (!lib) return lib.err();
    if (auto st = (*lib)->init(); !st) return st.err();
    m->pager_lib_ = std::move(*lib);
    m->pager_api_ = m->pager_lib_->table().pager_api;
    if (m->pager_api_ == nullptr) {
      return error{"invalid_plugin", s.pager_plugin + " is not a pager plugin"};
    }
    orch_pager_config pc{};
    pc.struct_size = sizeof(pc);
    pc.level = s.level;
    pc.ordinal = s.ordinal;
    pc.sim_fd = m->sim_fd_.valid() ? m->sim_fd_.get() : -1;
    pc.page_size = s.page_size;
    pc.poll_interval_ms = -1;
    pc.poll_floor = -1;
    if (const orch_status st = m->pager_api_->device_open(&pc, &m->pager_); st != ORCH_OK) {
      return error{"pager_open_failed",
                   std::string("pager device_open answered ") + plugins::status_name(st)};
    }
  }
  if (!s.allocator_plugin.empty() && m->pager_ != nullptr) {
    auto lib = plugins::plugin_library::open(s.allocator_plugin);
    if (!lib) return lib.err();
    if (auto st = (*lib)->init(); !st) return st.err();
    m->allocator_lib_ = std::move(*lib);
    m->allocator_api_ = m->allocator_lib_->table().allocator_api;
    if (m->allocator_api_ == nullptr) {
      return error{"invalid_plugin", s.allocator_plugin + " is not an allocator plugin"};
    }
    orch_allocator_config ac{};
    ac.struct_size = sizeof(ac);
    ac.level = s.level;
    ac.ordinal = s.ordinal;
    ac.streams = s.streams;
    ac.reserve_size = std::uint64_t{1} << 30;  // ample for the sim device; VA only
    ac.pager_api = m->pager_api_;
    ac.pager = m->pager_;
    if (const orch_status st = m->allocator_api_->open(&ac, &m->allocator_); st != ORCH_OK) {
      return error{"allocator_open_failed",
                   std::string("allocator open answered ") + plugins::status_name(st)};
    }
  }
  return m;
}

worker_memory::~worker_memory() {
  if (allocator_ != nullptr) allocator_api_->close(allocator_);
  for (auto& [key, r] : regions_) pager_api_->region_destroy(r);
  if (pager_ != nullptr) pager_api_->device_close(pager_);
  allocator_lib_.reset();
  pager_lib_.reset();
  if (budget_ && budget_->reserved() > 0) budget_->release(budget_->reserved());
}

result<orch_region*> worker_memory::region(const std::string& key, std::uint64_t bytes,
                                           bool& created) {
  created = false;
  if (pager_ == nullptr) return error{"unsupported", "this worker runs without a pager"};
  if (auto it = regions_.find(key); it != regions_.end()) return it->second;
  orch_region* r = nullptr;
  const orch_status st = pager_api_->region_create(pager_, bytes, &r, nullptr);
  if (st != ORCH_OK) return error{plugins::status_name(st), "region_create failed"};
  regions_.emplace(key, r);
  created = true;
  return r;
}

orch_status worker_memory::fault(orch_region* r, std::uint64_t offset, std::uint64_t size) {
  if (pager_ == nullptr) return ORCH_UNSUPPORTED;
  return pager_api_->region_fault(r, offset, size, nullptr, 0, nullptr, nullptr);
}

orch_status worker_memory::unpin(orch_region* r, std::uint64_t offset, std::uint64_t size) {
  if (pager_ == nullptr) return ORCH_UNSUPPORTED;
  return pager_api_->region_unpin(r, offset, size);
}

orch_status worker_memory::cast_buffer(std::uint32_t stream, std::uint64_t size,
                                       std::uint64_t* address) {
  if (allocator_ == nullptr) return ORCH_UNSUPPORTED;
  return allocator_api_->cast_buffer(allocator_, stream, size, address);
}

void worker_memory::publish(std::uint64_t epoch, std::uint64_t calls) noexcept {
  ipc::stats_snapshot s{};
  s.memory_manager =
      pager_ != nullptr ? ipc::memory_manager_kind::pager : ipc::memory_manager_kind::unknown;
  ipc::set_text(s.memory_manager_reason, settings_.manager_reason);
  report(s.plugins[static_cast<int>(ipc::plugin_slot::pager)], pager_lib_.get(), settings_.level);
  report(s.plugins[static_cast<int>(ipc::plugin_slot::allocator)], allocator_lib_.get(),
         settings_.level);
  if (pager_ != nullptr) {
    orch_pager_usage u{};
    u.struct_size = sizeof(u);
    if (pager_api_->usage(pager_, &u) == ORCH_OK) {
      s.device_total_bytes = u.capacity;
      s.device_free_bytes = u.last_polled_free;
      s.pager_resident_bytes = u.page_bytes;
    }
  }
  if (allocator_ != nullptr) {
    orch_cast_stats c{};
    c.struct_size = sizeof(c);
    if (allocator_api_->cast_stats(allocator_, &c) == ORCH_OK) {
      s.cast_buffer_bytes = c.committed;
      s.cast_buffer_high_water = c.high_water;
    }
  }
  s.pinned_bytes = budget_->reserved();
  s.current_epoch = epoch;
  s.call_count = calls;
  block().publish(s);
}

nlohmann::json worker_memory::describe_plugins() const {
  auto one = [&](const plugins::plugin_library* lib) -> nlohmann::json {
    if (lib == nullptr) return nullptr;
    return {
        {"name", lib->table().name}, {"version", lib->table().version}, {"level", settings_.level}};
  };
  return {{"pager", one(pager_lib_.get())}, {"allocator", one(allocator_lib_.get())}};
}

}  // namespace orch::worker
