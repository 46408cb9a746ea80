#include "supervisor_rig.hpp"

#include "orch/manifests/diagnostic.hpp"

namespace orch::runtime_testing {

using nlohmann::json;

fake_worker_script good_worker() {
  fake_worker_script s;
  s.nodes = json::array({{{"class_type", "Echo"},
                          {"category", "testing"},
                          {"inputs", json::array()},
                          {"outputs", json::array({"STRING"})}}});
  s.on_call = [](const json& body) {
    fake_call_answer a;
    a.outputs = json::array({body["node"]});
    return a;
  };
  return s;
}

void supervisor_test::start_supervisor(const std::string& workers,
                                       fake_launcher::script_source scripts) {
  // A cpu host (no device plugin) with a small pool: what host_memory needs, and nothing more.
  const std::string text = "[host]\ndevice = \"cpu\"\n\n[shm]\npinned_pool_size = \"4MiB\"\n\n"
                           "[workers]\n" + workers;
  manifests::diagnostics diags;
  auto d = manifests::parse_deployment_text(text, "/nonexistent/deployment.toml", diags);
  std::string problems;
  for (const auto& diag : diags.items()) problems += diag.format() + "\n";
  ASSERT_TRUE(d.has_value()) << problems;
  auto memory = runtime::host_memory::create(*d, 8);
  ASSERT_TRUE(memory.ok()) << memory.err().message;
  memory_ = std::move(*memory);
  launcher_ = std::make_shared<fake_launcher>(std::move(scripts));
  runtime::supervisor_options o;
  o.worker_executable = "/nonexistent/comfy-orch-worker";  // never executed: the launcher fakes it
  o.timing = d->workers;
  o.launcher = launcher_;
  io_ = std::make_unique<boost::asio::io_context>();
  supervisor_ = std::make_unique<runtime::supervisor>(*io_, *memory_, std::move(o));
  supervisor_->on_state = [this](const runtime::worker_info& w) {
    std::lock_guard lock(changes_mutex_);
    changes_.push_back({w.env, w.state, w.generation});
  };
  io_thread_ = std::thread([io = io_.get()] {
    auto guard = boost::asio::make_work_guard(*io);
    io->run();
  });
}

void supervisor_test::TearDown() {
  if (io_thread_.joinable()) {
    // Destroyed on its own thread, as host_runtime does: its destructor reaps every worker.
    on_io([this] {
      supervisor_.reset();
      return 0;
    });
    io_->stop();
    io_thread_.join();
  }
  io_.reset();
  if (launcher_) {
    EXPECT_EQ(launcher_->running(), 0u) << "a fake worker was never reaped";
  }
  launcher_.reset();
  memory_.reset();
  leak_checked_test::TearDown();
}

void supervisor_test::start_env(const std::string& env, std::chrono::milliseconds call_timeout) {
  runtime::worker_spec spec;
  spec.env = env;
  spec.library = "/nonexistent/libpack_" + env + ".so";
  spec.call_timeout = call_timeout;
  on_io([&] {
    supervisor_->start(spec);
    return 0;
  });
}

bool supervisor_test::eventually_in(const std::string& env, runtime::worker_state state,
                                    std::uint32_t generation) {
  return eventually([&] {
    const auto* w = supervisor_->find(env);
    return w != nullptr && w->state == state && w->generation == generation;
  });
}

runtime::worker_info supervisor_test::info(const std::string& env) {
  return on_io([&] {
    const auto* w = supervisor_->find(env);
    return w == nullptr ? runtime::worker_info{} : *w;
  });
}

std::future<result<json>> supervisor_test::call(const std::string& env, const std::string& node) {
  auto done = std::make_shared<std::promise<result<json>>>();
  auto future = done->get_future();
  json body = {{"node", node}, {"class_type", "Echo"}, {"inputs", json::object()}};
  on_io([&] {
    supervisor_->call(env, std::move(body),
                      [done](result<json> r) { done->set_value(std::move(r)); });
    return 0;
  });
  return future;
}

std::vector<state_change> supervisor_test::state_changes() const {
  std::lock_guard lock(changes_mutex_);
  return changes_;
}

}  // namespace orch::runtime_testing
