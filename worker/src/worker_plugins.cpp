// Worker memory plugins (docs/memory-semantics.md): the pager, ledger and allocator opened at the
// host's protocol level with the handshake's settings, the settings read back from them for the
// applied-settings hash, and what they are, for the ready message and the stats.
#include <algorithm>

#include "model_store.hpp"
#include "orch/ipc/cgroup_probe.hpp"
#include "orch/ipc/pinned_budget.hpp"
#include "orch/plugin/levels.h"
#include "orch/plugins/errc.hpp"
#include "orch/plugins/names.hpp"
#include "worker_errc.hpp"
#include "worker_memory.hpp"

namespace orch::worker {
namespace {

// Loads and initialises a plugin of the expected kind table; the error names the file.
template <typename Api>
result<std::unique_ptr<plugins::plugin_library>> open_plugin(const std::string& path,
                                                             const Api* orch_plugin_table::*api,
                                                             const Api*& out, const char* what) {
  // Debug: every worker loads its plugins, and `run`'s default output is for the run itself.
  auto lib = plugins::plugin_library::open(path, /*announce=*/false);
  if (!lib) return lib.err();
  if (auto st = (*lib)->init(); !st) return st.err();
  out = (*lib)->table().*api;
  if (out == nullptr) return error{worker_errc::invalid_plugin, path + " is not " + what};
  return std::move(*lib);
}

void report_plugin(ipc::plugin_report& r, const plugins::plugin_library* lib,
                   std::uint32_t level) noexcept {
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

status worker_memory::open_pager() {
  const auto& s = settings_;
  auto lib =
      open_plugin(s.pager_plugin, &orch_plugin_table::pager_api, pager_api_, "a pager plugin");
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
  if (s.level >= ORCH_LEVEL_HEADROOM) pc.extra_headroom = s.memory.reserve_vram;
  if (s.level >= ORCH_LEVEL_PRESSURE) pc.pressure_source = s.memory.pressure_source;
  if (const orch_status st = pager_api_->device_open(&pc, &pager_); st != ORCH_OK) {
    pager_ = nullptr;
    return error{worker_errc::pager_open_failed,
                 std::string("pager device_open answered ") + plugins::status_name(st)};
  }
  models_ = make_pager_store(*pager_api_, pager_);  // closes the device when it goes
  if (s.level >= ORCH_LEVEL_HEADROOM && pager_api_->set_simple_headroom != nullptr) {
    if (const orch_status st = pager_api_->set_simple_headroom(s.memory.simple_headroom);
        st != ORCH_OK) {
      return error{worker_errc::pager_open_failed,
                   std::string("set_simple_headroom answered ") + plugins::status_name(st)};
    }
  }
  return ok_status();
}

void worker_memory::close_pager() noexcept {
  models_.reset();  // the pager's store closes its device
  pager_ = nullptr;
  pager_api_ = nullptr;
  pager_lib_.reset();  // shut down and unloaded
}

status worker_memory::open_ledger() {
  if (settings_.ledger_plugin.empty())
    return error{worker_errc::not_found, "no ledger plugin for this backend"};
  if (!backend_) return error{worker_errc::not_found, "no backend device for the ledger's models"};
  std::uint64_t total = 0;
  if (backend_->api().device_total_mem(backend_->device(), &total) != ORCH_OK) {
    return error{plugins::plugin_errc::device_error,
                 "the backend cannot tell the device's total memory"};
  }
  auto lib = open_plugin(settings_.ledger_plugin, &orch_plugin_table::ledger_api, ledger_api_,
                         "a ledger plugin");
  if (!lib) return lib.err();
  ledger_lib_ = std::move(*lib);
  orch_ledger_config lc{};
  lc.struct_size = sizeof(lc);
  const std::uint64_t reserve = settings_.memory.reserve_vram;
  lc.budget = total > reserve ? total - reserve : 0;
  orch_ledger* ledger = nullptr;
  if (const orch_status st = ledger_api_->open(&lc, &ledger); st != ORCH_OK) {
    return error{worker_errc::ledger_open_failed,
                 std::string("ledger open answered ") + plugins::status_name(st)};
  }
  models_ = make_ledger_store(*ledger_api_, ledger, lc.budget, *backend_, reserve);
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
    return error{worker_errc::allocator_open_failed,
                 std::string("allocator open answered ") + plugins::status_name(st)};
  }
  return ok_status();
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
  if (is_pager() && level_ >= ORCH_LEVEL_HEADROOM && pager_api_->get_simple_headroom != nullptr) {
    std::uint64_t headroom = 0;
    if (pager_api_->get_simple_headroom(&headroom) == ORCH_OK) applied.simple_headroom = headroom;
  }
  applied.pinned_memory = pool_pinned_;
  return applied;
}

void worker_memory::report_plugins(ipc::stats_snapshot& s) const noexcept {
  report_plugin(s.plugins[static_cast<int>(ipc::plugin_slot::pager)],
                pager_lib_ ? pager_lib_.get() : ledger_lib_.get(), level_);
  report_plugin(s.plugins[static_cast<int>(ipc::plugin_slot::allocator)], allocator_lib_.get(),
                level_);
  report_plugin(s.plugins[static_cast<int>(ipc::plugin_slot::backend)],
                backend_ ? &backend_->library() : nullptr, level_);
}

nlohmann::json worker_memory::describe_plugins() const {
  auto one = [&](const plugins::plugin_library* lib) -> nlohmann::json {
    if (lib == nullptr) return nullptr;
    return {{"name", lib->table().name}, {"version", lib->table().version}, {"level", level_}};
  };
  return {{"manager", plugins::to_string(manager_.manager)},
          {"reason", manager_.reason},
          {"settings_hash", settings_hash_},
          // What the hash is of, so a mismatch can be shown field by field (docs/cli.md).
          {"applied_settings",
           plugins::applied_settings_text(applied_settings(), manager_.manager, level_)},
          {"pager", one(pager_lib_.get())},
          {"ledger", one(ledger_lib_.get())},
          {"allocator", one(allocator_lib_.get())},
          {"memory_view", memory_view()}};
}

nlohmann::json worker_memory::memory_view() const {
  // The budget this worker draws on, and what it would have derived on its own from the RAM and
  // cgroup it sees (as each comfy-env worker does): `diverge` compares both with the host's.
  nlohmann::json view = {{"budget_bytes", budget_ ? budget_->budget() : 0},
                         {"physical_ram_bytes", nullptr},
                         {"cgroup_limit_bytes", nullptr},
                         {"own_budget_bytes", nullptr}};
  if (auto readings = ipc::probe_memory_readings()) {
    view["physical_ram_bytes"] = readings->physical_ram;
    if (readings->cgroup_limit) view["cgroup_limit_bytes"] = *readings->cgroup_limit;
    view["own_budget_bytes"] = ipc::compute_pinned_budget(*readings).bytes;
  }
  return view;
}

}  // namespace orch::worker
