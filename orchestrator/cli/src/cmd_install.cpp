// comfy-orch install <deployment> [<env>...]: builds the deployment's Python envs that are
// missing, broken or stale (docs/envs.md), one line per env and phase, the backend's own output
// in a log file per env.
#include <algorithm>
#include <atomic>
#include <iostream>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "diagnostics_output.hpp"
#include "orch/envs/env_context.hpp"
#include "orch/envs/env_install.hpp"
#include "orch/envs/env_usage.hpp"

namespace orch::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct install_options {
  std::string deployment;
  std::vector<std::string> envs;
  std::string backend;
  unsigned jobs = 1;
  bool dry_run = false;
  bool force = false;
  bool json = false;
  bool no_index = false;
  std::vector<std::string> find_links;
};

// The envs to consider: those named, else every Python env. Unknown names are an error that
// lists the known ones.
std::vector<const manifests::env_entry*> select_envs(const manifests::inventory& inv,
                                                     const std::vector<std::string>& names,
                                                     std::string& unknown) {
  std::vector<const manifests::env_entry*> out;
  std::vector<std::string> known;
  for (const auto& pack : inv.packs) {
    for (const auto& e : pack.envs) {
      if (e.status.native || e.status.named) continue;  // built elsewhere
      known.push_back(e.dir.env_name);
      if (names.empty() || std::find(names.begin(), names.end(), e.dir.env_name) != names.end()) {
        out.push_back(&e);
      }
    }
  }
  for (const auto& n : names) {
    if (std::find(known.begin(), known.end(), n) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      unknown = "no Python env named '" + n +
                "' in the deployment (its envs: " + (list.empty() ? "none" : list) +
                "; `comfy-orch envs` lists them)";
    }
  }
  return out;
}

std::string state_word(const manifests::env_status& s) {
  return manifests::to_string(s.state);
}

json dry_run_entry(const envs::env_context& c, const manifests::env_entry& e,
                   envs::env_backend_kind backend) {
  const auto derivation = manifests::derive_env(
      e.dir.env_name, e.manifest, *c.stack, manifests::this_platform(), e.dir.config.parent_path());
  const bool up = envs::env_up_to_date(e.status);
  const auto refused = up ? std::nullopt : envs::backend_refusal(e, derivation, *c.stack, backend);
  json entry = {{"env", e.dir.env_name},
                {"state", state_word(e.status)},
                {"action", up        ? "skip"
                           : refused ? "refuse"
                                     : "build"},
                {"dir", envs::install_dir_for(e, c.deployment.env.root, *c.stack).string()},
                {"backend", envs::to_string(backend)},
                {"identity", derivation.identity},
                {"requirements", derivation.requirements},
                {"conda_packages", derivation.conda_packages},
                {"notes", derivation.notes},
                {"pixi_toml", manifests::pixi_toml_text(derivation, e.dir.config)}};
  if (refused) entry["refused"] = *refused;
  return entry;
}

int run_install(const install_options& o) {
  manifests::diagnostics diags;
  auto context = envs::load_env_context(o.deployment, diags);
  print_diagnostics(std::cerr, diags);
  if (!context || diags.has_errors()) return exit_invalid_input;
  if (!context->stack) {
    std::cerr << "comfy-orch install: " << context->stack_problem << '\n';
    return exit_failure;
  }
  std::string unknown;
  const auto targets = select_envs(context->inventory, o.envs, unknown);
  if (!unknown.empty()) {
    std::cerr << "comfy-orch install: " << unknown << '\n';
    return exit_invalid_input;
  }
  auto backend = envs::choose_backend(o.backend, context->host_python);
  if (!backend) {
    std::cerr << "comfy-orch install: " << backend.err().message << '\n';
    return exit_failure;
  }
  const std::string tag = manifests::abi_tag(*context->stack);
  if (o.dry_run) {
    json plan = json::array();
    bool any_refused = false;
    for (const auto* e : targets) {
      plan.push_back(dry_run_entry(*context, *e, *backend));
      any_refused = any_refused || plan.back()["action"] == "refuse";
    }
    // As install would end: a plan with an env it refuses fails, as the install would.
    const int status = any_refused ? exit_failure : exit_ok;
    if (o.json) {
      std::cout << json{{"abi_tag", tag}, {"backend", envs::to_string(*backend)}, {"envs", plan}}
                       .dump(2, ' ', false, json::error_handler_t::replace)
                << '\n';
      return status;
    }
    std::cout << "host stack: abi=" << tag << " (" << context->host_python.string() << "), backend "
              << envs::to_string(*backend) << '\n';
    for (const auto& p : plan) {
      std::cout << p["env"].get<std::string>() << ": " << p["state"].get<std::string>();
      if (p["action"] == "skip") {
        std::cout << ", nothing to do\n";
      } else if (p["action"] == "refuse") {
        std::cout << ", would be refused: " << p["refused"].get<std::string>() << '\n';
      } else {
        std::cout << ", would build into " << p["dir"].get<std::string>() << " ("
                  << p["requirements"].size() << " requirement(s))\n";
      }
    }
    return status;
  }

  envs::remember_deployment(context->deployment.env.root, o.deployment);
  std::mutex out_mutex;
  auto say = [&](const std::string& line) {
    std::lock_guard lock(out_mutex);
    std::cout << line << std::endl;
  };
  say("host stack: abi=" + tag + " (" + context->host_python.string() + "), backend " +
      envs::to_string(*backend) + ", " + std::to_string(targets.size()) + " env(s)");
  std::atomic<std::size_t> next{0};
  std::atomic<int> failures{0};
  auto worker = [&] {
    for (std::size_t i = next++; i < targets.size(); i = next++) {
      const auto& e = *targets[i];
      const std::string prefix = "[" + std::to_string(i + 1) + "/" +
                                 std::to_string(targets.size()) + "] " + e.dir.env_name + ": ";
      envs::install_request request;
      request.env = &e;
      request.stack = *context->stack;
      request.platform = manifests::this_platform();
      request.workspace_root = context->deployment.env.root;
      request.host_python = context->host_python;
      request.backend = *backend;
      request.no_index = o.no_index;
      for (const auto& f : o.find_links) request.find_links.emplace_back(f);
      request.force = o.force;
      request.orch_version = ORCH_VERSION;
      say(prefix + state_word(e.status) +
          (e.status.detail.empty() ? "" : " (" + e.status.detail + ")"));
      envs::install_outcome outcome;
      try {
        outcome = envs::install_env(request, [&](const std::string& p) { say(prefix + p); });
      } catch (const std::exception& ex) {  // a filesystem error nothing below expected
        outcome.message = std::string("unexpected error: ") + ex.what();
      }
      switch (outcome.result) {
        case envs::install_outcome::kind::up_to_date:
          say(prefix + "up to date at " + outcome.dir.string());
          break;
        case envs::install_outcome::kind::built:
          say(prefix + "built at " + outcome.dir.string() + " (log: " + outcome.log.string() + ")");
          break;
        case envs::install_outcome::kind::failed:
          ++failures;
          say(prefix + "FAILED: " + outcome.message +
              (outcome.log.empty() ? "" : "; log: " + outcome.log.string()));
          break;
      }
    }
  };
  std::vector<std::thread> pool;
  const unsigned jobs = std::max(1u, std::min<unsigned>(o.jobs, 64));
  for (unsigned j = 0; j < jobs; ++j) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  if (failures > 0) {
    say(std::to_string(failures.load()) + " of " + std::to_string(targets.size()) +
        " env(s) failed");
    return exit_failure;
  }
  return exit_ok;
}

}  // namespace

void add_install_command(CLI::App& app) {
  auto* cmd = add_command(
      app, "install", "Build a deployment's missing, broken or stale Python envs",
      "Builds the deployment's Python envs that are missing, broken or stale (built for another "
      "ABI tag, or from a manifest whose dependencies changed), or only the envs named. Each env "
      "is built beside its final place and renamed into it only on success, under a lock per "
      "env, and stamped (env.stamp.json) last, so a failed or interrupted install leaves the "
      "previous env as it was. The backend is pixi, else uv, else python -m venv, unless one is "
      "asked for. One line per env and phase; the backend's own output goes to a log file whose "
      "path is printed (docs/envs.md).");
  auto o = std::make_shared<install_options>();
  cmd->add_option("deployment", o->deployment,
                  "Deployment file (comfy-orch.toml), or a ComfyUI tree (its custom_nodes)")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_option("envs", o->envs, "Env names (as `comfy-orch envs` prints them); default: all");
  cmd->add_option("--backend", o->backend, "pixi, uv or venv (default: the first installed)")
      ->check(CLI::IsMember({"pixi", "uv", "venv"}));
  cmd->add_option("--jobs,-j", o->jobs, "Envs built in parallel (default 1)")
      ->check(CLI::Range(1, 64));
  cmd->add_flag("--dry-run", o->dry_run, "Say what would be built, and from what; build nothing");
  cmd->add_flag("--json", o->json, "With --dry-run: the plan as JSON, generated manifests too");
  cmd->add_flag("--force", o->force, "Rebuild envs that are up to date too");
  cmd->add_option("--find-links", o->find_links,
                  "A directory of wheels for pip and uv (repeatable)");
  cmd->add_flag("--no-index", o->no_index,
                "pip and uv use only --find-links, never a package index (offline installs)");
  cmd->callback([o] {
    if (const int code = run_install(*o); code != exit_ok) throw CLI::RuntimeError(code);
  });
}

}  // namespace orch::cli
