// comfy-orch envs <deployment>: one line per bound node directory with its env name, location
// and state, so an operator sees what will run isolated and what still has to be built.
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "commands.hpp"
#include "diagnostics_output.hpp"
#include "orch/manifests/inventory.hpp"
#include "orch/orchestrator/preflight.hpp"

namespace orch::cli {
namespace {

struct row {
  std::string pack, node_dir, env, state, runs, python, path;
};

// What an env still needs before a worker can run it; nothing when one can.
std::string needs(const manifests::env_status& s) {
  if (s.state != manifests::env_state::ok) {
    return s.native ? "its node library built" : "its env installed (comfy-env install)";
  }
  return {};
}

// A native env's library, a Python env's interpreter (what the worker runs).
std::string runs_what(const manifests::env_status& s) {
  return (s.native || s.interpreter.empty() ? s.path : s.interpreter).string();
}

void print_table(std::ostream& out, const std::vector<row>& rows) {
  const std::vector<std::string> header = {"PACK",   "NODE DIR", "ENV", "STATE",
                                           "RUNS",   "PYTHON",   "PATH"};
  std::vector<std::size_t> width(header.size());
  for (std::size_t i = 0; i < header.size(); ++i) width[i] = header[i].size();
  auto cells = [](const row& r) {
    return std::vector<std::string>{r.pack, r.node_dir, r.env, r.state, r.runs, r.python, r.path};
  };
  for (const auto& r : rows) {
    const auto c = cells(r);
    for (std::size_t i = 0; i < c.size(); ++i) width[i] = std::max(width[i], c[i].size());
  }
  auto line = [&](const std::vector<std::string>& c) {
    for (std::size_t i = 0; i < c.size(); ++i) {
      out << c[i];
      if (i + 1 < c.size()) out << std::string(width[i] - c[i].size() + 2, ' ');
    }
    out << '\n';
  };
  line(header);
  for (const auto& r : rows) line(cells(r));
}

}  // namespace

void add_envs_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "envs",
      "List the envs of a deployment: one line per isolated node directory (nodes/ and "
      "nodes/<child>/ with a comfy-env.toml) with pack, env name (comfy-env's naming rule), "
      "location in the env workspace, state (ok, missing, broken), whether a worker can run it "
      "(RUNS, and what it still needs), Python version, and what the worker runs (a native "
      "pack's node library, a Python env's interpreter; [packs.python] names one ahead of the "
      "workspace's). The "
      "workspace root is [env] root, else ORCH_ENV_ROOT, else COMFY_ENV_ROOT, else ~/.ce.");
  struct options {
    std::string deployment;
    bool json = false;
  };
  auto opts = std::make_shared<options>();
  cmd->add_option("deployment", opts->deployment, "Deployment file (comfy-orch.toml)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_flag("--json", opts->json, "Print one JSON document (schema: docs/cli.md)");
  cmd->callback([opts] {
    manifests::diagnostics diags;
    auto d = manifests::load_deployment(opts->deployment, diags);
    manifests::inventory inv;
    if (d) {
      // The libraries `run` would load (preflight.hpp).
      d->packs.library_paths = orchestrator::deployment_library_directories(*d);
      inv = manifests::build_inventory(*d, diags);
      spdlog::debug("deployment {}: {} pack(s), {} env(s), workspace {}", opts->deployment,
                    inv.packs.size(), inv.env_count(), d->env.root.string());
    }

    auto envs = nlohmann::json::array();
    std::vector<row> rows;
    for (const auto& pack : inv.packs) {
      for (const auto& e : pack.envs) {
        const auto& s = e.status;
        envs.push_back({{"pack", pack.layout.name},
                        {"pack_dir", pack.layout.dir.string()},
                        {"node_dir", e.dir.relative_dir.string()},
                        {"env", e.dir.env_name},
                        {"kind", s.native ? "native" : "python"},
                        {"state", manifests::to_string(s.state)},
                        {"runnable", needs(s).empty()},
                        {"needs", needs(s)},
                        {"python", s.python_version},
                        {"path", s.path.string()},
                        {"interpreter", s.interpreter.string()},
                        {"detail", s.detail}});
        rows.push_back({pack.layout.name, e.dir.relative_dir.string(), e.dir.env_name,
                        manifests::to_string(s.state), needs(s).empty() ? "yes" : "no",
                        s.python_version.empty() ? "-" : s.python_version, runs_what(s)});
      }
    }
    if (opts->json) {
      nlohmann::json doc = {{"deployment", opts->deployment},
                            {"valid", !diags.has_errors()},
                            {"envs", envs},
                            {"diagnostics", diagnostics_to_json(diags)}};
      if (d) {
        doc["workspace_root"] = d->env.root.string();
        doc["workspace_root_source"] = manifests::to_string(d->env.source);
      }
      std::cout << doc.dump(2) << '\n';
    } else {
      print_diagnostics(std::cerr, diags);
      if (d) {
        std::cout << "env workspace: " << d->env.root.string() << " (from "
                  << manifests::to_string(d->env.source) << ")\n";
        print_table(std::cout, rows);
        std::size_t counts[3] = {0, 0, 0};
        for (const auto& pack : inv.packs) {
          for (const auto& e : pack.envs) ++counts[static_cast<int>(e.status.state)];
        }
        std::cout << rows.size() << " env(s): " << counts[0] << " ok, " << counts[1] << " missing, "
                  << counts[2] << " broken\n";
        for (const auto& pack : inv.packs) {
          for (const auto& e : pack.envs) {
            if (!e.status.detail.empty())
              std::cout << e.dir.env_name << ": " << e.status.detail << '\n';
            if (const auto n = needs(e.status); !n.empty())
              std::cout << e.dir.env_name << ": runs no worker: needs " << n << '\n';
          }
        }
      }
    }
    if (diags.has_errors()) throw CLI::RuntimeError(exit_invalid_input);
  });
}

}  // namespace orch::cli
