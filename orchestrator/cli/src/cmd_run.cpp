// comfy-orch run <deployment> --prompt <api.json> [--json]: starts the deployment's workers,
// validates the prompt against the node classes they report (ComfyUI's error names, before any
// node runs), executes it, prints ComfyUI's events, and ends with the memory table
// (docs/cli.md, docs/runtime.md).
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>

#include <spdlog/spdlog.h>

#include "command_host.hpp"
#include "commands.hpp"
#include "orch/executor/executor.hpp"
#include "orch/executor/prompt_validation.hpp"
#include "orch/executor/unstarted_envs.hpp"
#include "orch/ipc/cgroup_probe.hpp"
#include "orch/ipc/errc.hpp"
#include "orch/manifests/inventory.hpp"
#include "orch/manifests/units.hpp"
#include "orch/runtime/host_runtime.hpp"
#include "orch/runtime/host_startup.hpp"
#include "orch/runtime/memory_table.hpp"
#include "orch/runtime/preflight.hpp"
#include "orch/support/json_fields.hpp"
#include "orch/support/untrusted_text.hpp"
#include "run_signals.hpp"
#include "stop_grace.hpp"

namespace orch::cli {
namespace {

// Node ids, class names and messages quote the prompt, which may come from anyone: escaped
// before they reach the terminal (untrusted_text.hpp).
void print_validation(std::ostream& out, const executor::validation_report& report) {
  out << "prompt refused: " << report.error->type << ": " << printable(report.error->message)
      << '\n';
  // ComfyUI names the first node whose class is missing; a person wants every one of them.
  const auto missing = report.error->extra_info.find("orch_missing_nodes");
  if (missing != report.error->extra_info.end() && missing->is_array()) {
    for (const auto& m : *missing) {
      const auto& cls = m["class_type"];
      out << "  node " << printable(m.value("node_id", "")) << " ("
          << (cls.is_string() ? printable(cls.get<std::string>()) : "no class_type")
          << "): missing_node_type\n";
    }
  }
  for (const auto& [id, ne] : report.node_errors) {
    for (const auto& e : ne.errors) {
      out << "  node " << printable(id) << " (" << printable(ne.class_type) << "): " << e.type
          << ": " << printable(e.message);
      if (!e.details.empty()) out << ": " << printable(e.details);
      out << '\n';
    }
  }
}

int run(const std::string& deployment_file, const std::string& prompt_file, bool as_json,
        bool free_after, std::chrono::milliseconds stop_grace_ms) {
  int code = exit_ok;
  const auto prepared = prepare_for_command(deployment_file, code);
  if (!prepared) return code;
  auto p = executor::parse_prompt_file(prompt_file);
  if (!p) {
    // Refused like every other prompt (docs/cli.md): ComfyUI's invalid_prompt, on stdout.
    const auto refused = executor::invalid_prompt_report(p.err());
    if (as_json) {
      std::cout << nlohmann::json{{"type", "validation_error"}, {"data", refused.to_json()}}.dump()
                << std::endl;
    } else {
      print_validation(std::cout, refused);
    }
    return exit_invalid_input;
  }
  // Before any thread exists: every thread inherits the blocked mask (run_signals.hpp).
  run_signals signals;
  const auto host = start_for_command(*prepared);
  if (!host) return exit_failure;
  auto& h = *host;
  // In short steps, so that Ctrl-C while slow workers start is acted on at once.
  runtime::settle_workers(h, [&] { return signals.interrupted(); });
  auto infos = h.on_io_thread([&] { return h.workers().workers(); });
  nlohmann::json workers = nlohmann::json::array();
  for (const auto& w : infos) {
    workers.push_back({{"env", w.env},
                       {"pid", w.pid},
                       {"state", runtime::to_string(w.state)},
                       {"generation", w.generation},
                       {"error", w.last_error}});
    if (!as_json) {
      std::cout << "worker " << w.env << ": " << runtime::to_string(w.state) << " (pid " << w.pid
                << ", " << w.nodes.size() << " node classes)";
      if (w.state != runtime::worker_state::ready) std::cout << ": " << w.last_error;
      std::cout << '\n';
    }
  }
  for (const auto& s : h.skipped()) {
    workers.push_back({{"env", s.env}, {"pid", 0}, {"state", "skipped"}, {"error", s.reason}});
    if (!as_json) std::cout << "env " << s.env << ": no worker: " << s.reason << '\n';
  }
  if (as_json)
    std::cout << nlohmann::json{{"type", "workers"}, {"data", workers}}.dump() << std::endl;

  executor::text_event_sink text(std::cout);
  executor::json_event_sink lines(std::cout);
  executor::event_sink& sink = as_json ? static_cast<executor::event_sink&>(lines) : text;
  // Before h.shutdown(): the executor releases what the prompt's outputs hold through the host.
  auto ex = std::make_unique<executor::executor>(h, sink);
  // A class's VALIDATE_INPUTS runs in its worker, as part of validation.
  const auto report = executor::validate_prompt(*p, h.catalogue(), ex->worker_validation());
  // A class no running worker provides, while a worker is not running: a worker failure (2).
  if (const auto failed = executor::missing_classes_of_unstarted_envs(report, infos)) {
    if (as_json) {
      std::cout << nlohmann::json{{"type", "worker_error"},
                                  {"data", executor::to_json(*failed, report)}}
                       .dump()
                << std::endl;
    } else {
      auto shown = report;
      shown.error = failed->error;
      print_validation(std::cout, shown);
    }
    ex.reset();
    h.shutdown();
    return signals.interrupted() ? exit_interrupted : exit_failure;
  }
  if (!report.ok()) {
    if (as_json) {
      std::cout << nlohmann::json{{"type", "validation_error"}, {"data", report.to_json()}}.dump()
                << std::endl;
    } else {
      print_validation(std::cout, report);
    }
    ex.reset();
    h.shutdown();
    return signals.interrupted() ? exit_interrupted : exit_invalid_input;
  }
  // Outputs that failed validation next to ones that passed: the prompt runs without them, and
  // says so as ComfyUI does (its log lines; with --json, its node_errors).
  if (const auto ignored = executor::ignored_outputs_log(report); !ignored.empty()) {
    if (as_json) {
      std::cout << nlohmann::json{{"type", "outputs_ignored"},
                                  {"data", {{"node_errors", report.to_json()["node_errors"]}}}}
                       .dump()
                << std::endl;
    } else {
      for (const auto& line : ignored) std::cout << printable(line) << '\n';
    }
  }
  bool ok = false;
  {
    stop_grace grace(h, stop_grace_ms);
    signals.on_interrupt([&ex, &grace] {
      ex->interrupt();
      grace.interrupted();  // a node that ignores it has the grace, then its worker is killed
    });
    if (signals.interrupted()) {  // it came while the workers started
      ex->interrupt();
      grace.interrupted();
    }
    const auto outcome = ex->run(*p, report.outputs, std::to_string(::getpid()) + "-1");
    signals.on_interrupt({});
    ok = outcome.ok;
    // ComfyUI's executed carries a node's UI only; a person (or a script) running one prompt
    // also wants the values its output nodes returned: comfy-orch's own line after the events.
    nlohmann::json results = nlohmann::json::object();
    for (const auto& id : report.outputs) {
      if (auto it = outcome.nodes.find(id); it != outcome.nodes.end())
        results[id] = {{"class_type", it->second.class_type}, {"outputs", it->second.outputs}};
    }
    sink.emit("outputs", results);
    if (free_after) {
      // ComfyUI's POST /free {unload_models, free_memory}, broadcast: one receipt per worker.
      nlohmann::json receipts = nlohmann::json::object();
      for (const auto& [env, r] : h.free_all(true, true)) {
        receipts[env] = r ? *r : nlohmann::json{{"error", r.err().message}};
        if (!as_json) {
          std::cout << "free " << env << ": "
                    << (r ? std::to_string(unsigned_field(*r, "freed")) +
                                " bytes freed"
                          : "failed: " + r.err().message)
                    << '\n';
        }
      }
      if (as_json)
        std::cout << nlohmann::json{{"type", "free"}, {"data", receipts}}.dump() << std::endl;
    }
    const auto rows = h.on_io_thread([&] { return runtime::read_memory_table(h); });
    if (as_json) {
      std::cout << nlohmann::json{{"type", "memory_table"}, {"data", runtime::to_json(rows)}}.dump()
                << std::endl;
    } else {
      std::cout << '\n' << runtime::format_memory_table(rows);
    }
  }
  ex.reset();
  h.shutdown();
  if (signals.interrupted()) return exit_interrupted;
  return ok ? exit_ok : exit_failure;
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto* cmd = add_command(
      app, "run", "Run one ComfyUI prompt on the deployment's workers",
      "Start the deployment's workers, validate a ComfyUI API-format prompt against the node "
      "classes they report, run it, print ComfyUI's events and a per-process memory table. "
      "Exit 0: success; 1: invalid deployment or prompt (refused before any node ran); 2: a "
      "node or worker failed.");
  struct options {
    std::string deployment;
    std::string prompt;
    bool json = false;
    bool free_after = false;
    unsigned stop_grace_ms = 5000;
  };
  auto opts = std::make_shared<options>();
  cmd->add_option("deployment", opts->deployment, "Deployment file (comfy-orch.toml)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--prompt", opts->prompt, "Prompt in ComfyUI's API format")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_flag("--json", opts->json, "Emit events and the memory table as JSON lines");
  cmd->add_flag("--free-after", opts->free_after,
                "After the prompt, ask every worker to unload its models and drop its caches "
                "(ComfyUI's POST /free) and print each worker's receipt of bytes freed");
  cmd->add_option("--stop-grace-ms", opts->stop_grace_ms,
                  "After Ctrl-C or SIGTERM: how long a node that ignores the interrupt may run on "
                  "before its worker is killed (default 5000 ms)")
      ->check(CLI::Range(0u, 600000u));
  cmd->callback([opts] {
    const int code = run(opts->deployment, opts->prompt, opts->json, opts->free_after,
                         std::chrono::milliseconds(opts->stop_grace_ms));
    if (code != exit_ok) throw CLI::RuntimeError(code);
  });
}

}  // namespace orch::cli
