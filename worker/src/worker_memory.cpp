// Worker memory (docs/memory-semantics.md): set up from the handshake (shared segments, the budget
// slot, the memory manager and its store), the pinned grants, models by key through the store,
// and the published stats. The plugins are opened in worker_plugins.cpp, the releases are in
// worker_releases.cpp, the models' stores in pager_model_store.cpp and ledger_model_store.cpp.
#include "worker_memory.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <future>

#include <spdlog/spdlog.h>

#include "orch/plugins/backend_pin_registrar.hpp"
#include "orch/plugins/errc.hpp"
#include "worker_errc.hpp"

namespace orch::worker {
namespace {

std::optional<std::string> process_env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

}  // namespace

result<std::unique_ptr<worker_memory>> worker_memory::setup(const ipc::handshake_settings& s,
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
    m->registrar_ = std::make_unique<plugins::backend_pin_registrar>(
        m->backend_->api(), m->backend_->device(), m->backend_->backend());
    m->pool_pinned_ = m->backend_->api().host_register != nullptr;
  } else {
    m->registrar_ = std::make_unique<ipc::noop_pin_registrar>();
  }
  m->segments_ = std::make_unique<ipc::segment_table>(*m->registrar_);
  if (pool_fds.size() != s.pool_segments.size()) {
    return error{worker_errc::bad_handshake,
                 "the host sent " + std::to_string(pool_fds.size()) + " pool fds but announced " +
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

  // The worker follows the host through ORCH_WORKER_PAGER (docs/memory-semantics.md).
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
      return error{worker_errc::budget_exceeded, "the host did not answer a pinned_grant request"};
    }
    return done.get();
  });
}

worker_memory::~worker_memory() {
  // The allocator may hold the pager's memory; the store closes the pager or the ledger; only
  // then are the plugins shut down and unloaded.
  if (allocator_ != nullptr) allocator_api_->close(allocator_);
  models_.reset();
  allocator_lib_.reset();
  ledger_lib_.reset();
  pager_lib_.reset();
  if (budget_ && budget_->reserved() > 0) budget_->release(budget_->reserved());
}

result<model_region*> worker_memory::region(const std::string& key, std::uint64_t bytes,
                                            bool& created) {
  created = false;
  if (!models_) {
    return error{plugins::plugin_errc::unsupported, "this worker runs without a pager or a ledger"};
  }
  return models_->region(key, bytes, created);
}

orch_status worker_memory::fault(model_region* r, std::uint64_t offset, std::uint64_t size) {
  return models_ ? models_->fault(*r, offset, size) : ORCH_UNSUPPORTED;
}

orch_status worker_memory::unpin(model_region* r, std::uint64_t offset, std::uint64_t size) {
  return models_ ? models_->unpin(*r, offset, size) : ORCH_UNSUPPORTED;
}

nlohmann::json worker_memory::describe_models() const {
  return models_ ? models_->describe_models() : nlohmann::json::array();
}

void worker_memory::publish(std::uint64_t epoch, std::uint64_t calls) noexcept {
  ipc::stats_snapshot s{};
  s.memory_manager = is_pager() ? ipc::memory_manager_kind::pager : ipc::memory_manager_kind::ledger;
  ipc::set_text(s.memory_manager_reason, manager_.reason);
  report_plugins(s);
  if (models_) {
    models_->publish(s);
  } else if (backend_) {
    std::uint64_t free_bytes = 0, total = 0;
    if (backend_->api().mem_get_info(backend_->device(), &free_bytes, &total) == ORCH_OK) {
      s.device_total_bytes = total;
      s.device_free_bytes = free_bytes;
    }
  }
  if (allocator_ != nullptr) {
    orch_cast_stats c{};
    c.struct_size = sizeof(c);
    if (allocator_api_->cast_stats(allocator_, &c) == ORCH_OK) {
      s.cast_buffer_bytes = c.committed + c.retired;
      s.cast_buffer_high_water = c.high_water;
      s.cast_buffer_largest = c.largest_buffer;
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

}  // namespace orch::worker
