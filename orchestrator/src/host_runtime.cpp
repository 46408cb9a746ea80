#include "orch/orchestrator/host_runtime.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <spdlog/spdlog.h>

#include "orch/orchestrator/worker_plugins.hpp"

namespace orch::orchestrator {

std::vector<node_class> classes_from_ready(const nlohmann::json& nodes, const std::string& env) {
  std::vector<node_class> out;
  if (!nodes.is_array()) return out;
  for (const auto& n : nodes) {
    node_class c;
    c.class_type = n.value("class_type", "");
    c.display_name = n.value("display_name", c.class_type);
    c.category = n.value("category", "");
    c.output_node = n.value("output_node", false);
    c.not_idempotent = n.value("not_idempotent", false);
    c.env = env;
    for (const auto& in : n.value("inputs", nlohmann::json::array())) {
      node_input i;
      i.name = in.value("name", "");
      i.type = in.value("type", "");
      i.required = in.value("required", true);
      if (in.contains("default")) i.default_value = in["default"];
      if (in.contains("min")) i.min = in["min"].get<double>();
      if (in.contains("max")) i.max = in["max"].get<double>();
      c.inputs.push_back(std::move(i));
    }
    for (const auto& o : n.value("outputs", nlohmann::json::array())) {
      c.outputs.push_back(o.get<std::string>());
    }
    if (!c.class_type.empty()) out.push_back(std::move(c));
  }
  return out;
}

result<std::unique_ptr<host_runtime>> host_runtime::start(const manifests::deployment& d,
                                                          const manifests::inventory& inv,
                                                          host_options options) {
  std::unique_ptr<host_runtime> h(new host_runtime());
  h->deployment_ = d;
  auto memory = host_memory::create(d, options.max_workers + 1);
  if (!memory) return memory.err();
  h->memory_ = std::move(*memory);

  supervisor_options so;
  so.worker_executable = options.worker_executable;
  so.timing = d.workers;
  so.plugins = choose_worker_plugins(d.host.device, d.plugin_paths);
  so.device = manifests::to_string(d.host.device.kind);
  so.ordinal = d.host.device.index;
  so.page_size = d.host.sim.page_size;
  so.streams = static_cast<std::uint32_t>(
      d.memory.async_offload_streams.value_or(d.host.device.is_gpu() ? 2 : 0));
  so.reserve_vram = d.memory.reserve_vram;
  so.pinned_memory = !d.memory.disable_pinned_memory;
  so.operator_env = current_environment();
  spdlog::info("workers: manager {} ({})", so.plugins.manager, so.plugins.reason);
  h->supervisor_ = std::make_unique<supervisor>(h->io_, *h->memory_, std::move(so));

  for (const auto& pack : inv.packs) {
    for (const auto& e : pack.envs) {
      const std::string& name = e.dir.env_name;
      if (!e.status.native) {
        h->skipped_.push_back({name, "Python pack: its env runs under the Python bridge, which "
                                     "this build does not have (" + e.status.detail + ")"});
        continue;
      }
      if (e.status.state != manifests::env_state::ok) {
        h->skipped_.push_back({name, "native library " + e.status.path.string() + " is " +
                                         manifests::to_string(e.status.state) + ": " +
                                         e.status.detail});
        continue;
      }
      worker_spec spec;
      spec.env = name;
      spec.library = e.status.path;
      spec.env_vars = e.manifest.env_vars;
      spec.call_timeout = d.workers.call_timeout;
      if (e.manifest.options.call_timeout_s) {
        spec.call_timeout = std::chrono::milliseconds(
            static_cast<std::int64_t>(*e.manifest.options.call_timeout_s * 1000));
      }
      h->supervisor_->start(std::move(spec));
    }
  }
  for (const auto& s : h->skipped_) spdlog::warn("env {} runs no worker: {}", s.env, s.reason);
  h->io_thread_ = std::thread([io = &h->io_] {
    auto guard = boost::asio::make_work_guard(*io);
    io->run();
  });
  return h;
}

bool host_runtime::wait_settled(std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  bool settled = false;
  while (!(settled = sync([this] { return supervisor_->settled(); })) &&
         std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  auto infos = sync([this] { return supervisor_->workers(); });
  catalogue_ = node_catalogue{};
  clashes_.clear();
  for (const auto& w : infos) {
    if (w.state != worker_state::ready) continue;
    for (auto& c : classes_from_ready(w.nodes, w.env)) {
      if (auto clash = catalogue_.add(std::move(c))) clashes_.push_back(*clash);
    }
  }
  return settled;
}

void host_runtime::shutdown(std::chrono::milliseconds grace) {
  if (stopped_) return;
  stopped_ = true;
  sync([&] { supervisor_->begin_shutdown(grace); });
  const auto end = std::chrono::steady_clock::now() + grace;
  while (!sync([this] { return supervisor_->shutdown_answered(); }) &&
         std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const auto left = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(
                                 end - std::chrono::steady_clock::now()),
                             std::chrono::milliseconds(0));
  sync([&] {
    supervisor_->finish_shutdown(left);
    supervisor_.reset();  // cancels its timers on the io thread
  });
  io_.stop();
  if (io_thread_.joinable()) io_thread_.join();
}

host_runtime::~host_runtime() {
  try {
    shutdown(std::chrono::milliseconds(0));
  } catch (...) {
    spdlog::error("host_runtime: shutdown threw");
  }
  if (io_thread_.joinable()) {
    io_.stop();
    io_thread_.join();
  }
}

}  // namespace orch::orchestrator
