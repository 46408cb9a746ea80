#include "orch/runtime/host_runtime.hpp"

#include <algorithm>
#include <mutex>
#include <optional>
#include <set>

#include <boost/asio/executor_work_guard.hpp>
#include <spdlog/spdlog.h>

#include "orch/ipc/message.hpp"
#include "orch/support/json_fields.hpp"
#include "orch/support/untrusted_text.hpp"

namespace orch::runtime {

std::vector<node_class> classes_from_ready(const nlohmann::json& nodes, const std::string& env) {
  // A worker's ready message is a pack's text: each field is read by its type (another type reads
  // as absent, never as a throw on the host) and each name is made printable, since names reach
  // the terminal in refusals and tables (untrusted_text.hpp).
  const auto name = [](const nlohmann::json& j, const char* key) {
    return printable(text_field(j, key));
  };
  const auto flag = [](const nlohmann::json& j, const char* key, bool fallback) {
    auto it = j.find(key);
    return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
  };
  const auto number = [](const nlohmann::json& j, const char* key) -> std::optional<double> {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number()) return std::nullopt;
    return it->get<double>();
  };
  const auto list = [](const nlohmann::json& j, const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_array() ? *it : nlohmann::json::array();
  };
  std::vector<node_class> out;
  if (!nodes.is_array()) return out;
  for (const auto& n : nodes) {
    if (!n.is_object()) continue;
    node_class c;
    c.class_type = name(n, "class_type");
    c.display_name = n.contains("display_name") ? name(n, "display_name") : c.class_type;
    c.category = name(n, "category");
    c.output_node = flag(n, "output_node", false);
    c.not_idempotent = flag(n, "not_idempotent", false);
    if (auto it = n.find("hidden"); it != n.end() && it->is_object()) {
      for (const auto& kind : *it) {
        if (kind.is_string()) c.hidden.insert(kind.get<std::string>());
      }
    }
    c.input_is_list = flag(n, "input_is_list", false);
    for (const auto& is_list : list(n, "output_is_list")) {
      c.output_is_list.push_back(is_list.is_boolean() && is_list.get<bool>());
    }
    c.validate_inputs.present = flag(n, "has_validate_inputs", false);
    if (auto it = n.find("validate_inputs");
        c.validate_inputs.present && it != n.end() && it->is_object()) {
      c.validate_inputs.declared = true;
      for (const auto& input : list(*it, "inputs")) {
        if (input.is_string()) c.validate_inputs.inputs.insert(input.get<std::string>());
      }
      c.validate_inputs.all_inputs = flag(*it, "all_inputs", false);
      c.validate_inputs.input_types = flag(*it, "input_types", false);
    }
    c.is_changed = flag(n, "has_is_changed", false);
    // A Python worker's /object_info entry, as text: its key order is the pack's. Untrusted, so
    // what nests deeper than a message body may is left out rather than kept.
    if (auto it = n.find("node_info_text"); it != n.end() && it->is_string()) {
      const auto shallow = [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
        return depth <= static_cast<int>(ipc::max_body_depth);
      };
      auto info = nlohmann::json::parse(it->get<std::string>(), shallow, false);
      if (info.is_object()) c.node_info = std::move(info);
    }
    if (auto it = n.find("orch_route"); it != n.end() && it->is_object()) {
      // Printable text only: a route's method and path reach the log and ComfyUI's router.
      c.route = {{"method", name(*it, "method")}, {"path", name(*it, "path")},
                 {"module", name(*it, "module")}, {"handler", name(*it, "handler")}};
      // Served by its worker over HTTP (an aiohttp route), not called as a node.
      if (flag(*it, "aiohttp", false)) c.route["aiohttp"] = true;
    }
    c.internal = flag(n, "orch_internal", false);
    c.env = env;
    for (const auto& in : list(n, "inputs")) {
      if (!in.is_object()) continue;
      node_input i;
      i.name = name(in, "name");
      i.type = name(in, "type");
      i.required = flag(in, "required", true);
      if (in.contains("default")) i.default_value = in["default"];
      i.min = number(in, "min");
      i.max = number(in, "max");
      for (const auto& choice : list(in, "options")) {
        if (choice.is_string()) i.options.push_back(choice.get<std::string>());
      }
      c.inputs.push_back(std::move(i));
    }
    for (const auto& o : list(n, "outputs")) {
      c.outputs.push_back(o.is_string() ? printable(o.get_ref<const std::string&>()) : "?");
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
  // A control slot per worker (the host holds one too): never fewer than the deployment's envs,
  // so a large deployment is not cut at max_workers.
  const auto workers = std::max<std::size_t>(options.max_workers, inv.env_count());
  auto memory = host_memory::create(d, static_cast<std::uint32_t>(workers + 1));
  if (!memory) return memory.err();
  h->memory_ = std::move(*memory);

  h->plan_ = std::make_unique<memory_plan>(memory_plan::make(d, h->memory_->backend(), options.worker_executable));
  spdlog::info("{}", plugins::manager_log_line(h->plan_->host_manager()));

  supervisor_options so;
  so.worker_executable = options.worker_executable;
  so.worker_library = options.worker_library;
  so.python_package_root = options.python_package_root;
  so.timing = d.workers;
  so.launcher = options.launcher;
  so.host_manager = h->plan_->host_manager();
  const process::environment operator_env = process::current_environment();
  so.operator_env = operator_env;
  so.debug_worker = debug_worker_enabled([&](const char* name) -> std::optional<std::string> {
    auto it = so.operator_env.find(name);
    if (it == so.operator_env.end()) return std::nullopt;
    return it->second;
  });
  h->supervisor_ = std::make_unique<supervisor>(h->io_, *h->memory_, std::move(so));
  h->supervisor_->on_models = [host = h.get()](const std::string& env, const nlohmann::json& models,
                                               std::uint64_t seq) {
    host->update_stand_ins(env, models, seq);
  };

  auto planned = plan_workers(d, inv, *h->plan_, h->memory_->backend_plugin(),
                              !options.worker_library.empty(), operator_env);
  h->skipped_ = std::move(planned.skipped);
  std::vector<worker_spec>& specs = planned.specs;
  for (const auto& spec : specs) h->env_devices_[spec.env] = spec.device;
  // Every plan first (a pack's plugin probe may take up to the handshake timeout), then every
  // spawn: no worker's handshake deadline runs while the host is still probing.
  for (auto& spec : specs) h->supervisor_->start(std::move(spec));
  for (const auto& s : h->skipped_) spdlog::warn("env {} runs no worker: {}", s.env, s.reason);
  h->io_thread_ = std::thread([io = &h->io_, id = &h->io_thread_id_] {
    id->store(std::this_thread::get_id());
    auto guard = boost::asio::make_work_guard(*io);
    io->run();
  });
  return h;
}

bool host_runtime::wait_settled(std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  bool settled = false;
  while (!(settled = on_io_thread([this] { return supervisor_->settled(); })) &&
         std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  auto infos = on_io_thread([this] { return supervisor_->workers(); });
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

std::size_t host_runtime::kill_busy_workers(const std::string& why) {
  if (stopped_ || !io_thread_.joinable()) return 0;
  return on_io_thread([&] { return supervisor_->kill_busy(why); });
}

void host_runtime::shutdown(std::chrono::milliseconds grace) {
  if (stopped_) return;
  stopped_ = true;
  // A start that failed part-way never started the io thread: nothing would run a posted
  // task, and on_io_thread() would wait forever. Whatever was built so far is torn down here
  // instead.
  if (!io_thread_.joinable()) {
    supervisor_.reset();
    return;
  }
  on_io_thread([&] { supervisor_->begin_shutdown(grace); });
  const auto end = std::chrono::steady_clock::now() + grace;
  while (!on_io_thread([this] { return supervisor_->shutdown_answered(); }) &&
         std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const auto left = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(
                                 end - std::chrono::steady_clock::now()),
                             std::chrono::milliseconds(0));
  on_io_thread([&] {
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

}  // namespace orch::runtime
