#include "executor_rig.hpp"

#include <stdlib.h>

#include <fstream>

#include "orch/executor/prompt.hpp"
#include "orch/executor/prompt_validation.hpp"
#include "orch/ipc/errc.hpp"
#include "orch/manifests/diagnostic.hpp"
#include "orch/manifests/inventory.hpp"

namespace orch::runtime_testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

json int_input(const std::string& name) {
  return {{"name", name}, {"type", "INT"}, {"required", true}};
}

json node_classes() {
  return json::array(
      {{{"class_type", "Number"},
        {"inputs", json::array({int_input("value")})},
        {"outputs", json::array({"INT"})}},
       {{"class_type", "Add"},
        {"inputs", json::array({int_input("a"), int_input("b")})},
        {"outputs", json::array({"INT"})}},
       {{"class_type", "Show"},
        {"output_node", true},
        {"inputs", json::array({int_input("value")})},
        {"outputs", json::array()}},
       {{"class_type", "Wait"},
        {"inputs", json::array({int_input("value")})},
        {"outputs", json::array({"INT"})}}});
}

fake_call_answer answer(const json& body) {
  const std::string cls = body["class_type"];
  const json& in = body["inputs"];
  fake_call_answer a;
  if (cls == "Number") a.outputs = json::array({in["value"]});
  if (cls == "Add") {
    a.outputs = json::array({in["a"].get<std::int64_t>() + in["b"].get<std::int64_t>()});
  }
  if (cls == "Show") a.ui = json{{"text", json::array({in["value"]})}};
  if (cls == "Wait") a.until_interrupted = true;
  return a;
}

void write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

}  // namespace

void executor_test::SetUp() {
  leak_checked_test::SetUp();
  char tmpl[] = "/tmp/orch-executor-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  dir_ = tmpl;
}

void executor_test::TearDown() {
  executor_.reset();
  host_.reset();  // reaps its workers through the launcher
  if (launcher_) {
    EXPECT_EQ(launcher_->running(), 0u) << "a fake worker was never reaped";
  }
  launcher_.reset();
  std::error_code ec;
  fs::remove_all(dir_, ec);
  leak_checked_test::TearDown();
}

void executor_test::start(manifests::cache_policy cache) {
  write(dir_ / "packs/ComfyUI-Fake/nodes/comfy-env.toml",
        "[worker]\nlibrary = \"./libfake_nodes.so\"\n");
  write(dir_ / "packs/ComfyUI-Fake/nodes/libfake_nodes.so", "");
  write(dir_ / "deployment.toml",
        "[host]\ndevice = \"cpu\"\n\n[shm]\npinned_pool_size = \"4MiB\"\n\n"
        "[packs]\npaths = [\"packs/ComfyUI-Fake\"]\n\n"
        "[workers]\nhandshake_timeout = \"2s\"\nheartbeat_interval = \"500ms\"\n");
  manifests::diagnostics diags;
  auto d = manifests::load_deployment(dir_ / "deployment.toml", diags);
  std::string problems;
  for (const auto& diag : diags.items()) problems += diag.format() + "\n";
  ASSERT_TRUE(d.has_value()) << problems;
  const auto inv = manifests::build_inventory(*d, diags);
  launcher_ = std::make_shared<fake_launcher>([](const std::string&, std::uint32_t) {
    fake_worker_script s;
    s.nodes = node_classes();
    s.on_call = answer;
    return s;
  });
  runtime::host_options o;
  o.worker_executable = "/nonexistent/comfy-orch-worker";  // never executed: the launcher fakes it
  o.max_workers = 4;
  o.launcher = launcher_;
  auto host = runtime::host_runtime::start(*d, inv, std::move(o));
  ASSERT_TRUE(host.ok()) << host.err().message;
  host_ = std::move(*host);
  ASSERT_TRUE(host_->wait_settled(std::chrono::seconds(10)));
  ASSERT_NE(host_->catalogue().find("Number"), nullptr) << "the fake worker never got ready";
  executor_ = std::make_unique<executor::executor>(*host_, events_, cache);
}

executor::prompt_outcome executor_test::run(const std::string& prompt_json) {
  auto p = executor::parse_prompt(prompt_json);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.err().message);
  if (!p.ok()) return {};
  const auto report =
      executor::validate_prompt(*p, host_->catalogue(), executor_->worker_validation());
  EXPECT_TRUE(report.ok()) << report.to_json().dump();
  return executor_->run(*p, report.outputs, "prompt-" + std::to_string(++prompts_));
}

std::vector<nlohmann::json> executor_test::events_of(const std::string& type) const {
  std::vector<nlohmann::json> out;
  for (const auto& e : events_.events()) {
    if (e["type"] == type) out.push_back(e["data"]);
  }
  return out;
}

}  // namespace orch::runtime_testing
