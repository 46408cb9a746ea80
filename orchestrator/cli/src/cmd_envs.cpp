// comfy-orch envs <deployment>: one line per bound node directory with its env name, location
// and state, so an operator sees what will run isolated and what still has to be built.
#include <algorithm>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "commands.hpp"
#include "diagnostics_output.hpp"
#include "orch/envs/env_context.hpp"

namespace orch::cli {
namespace {

struct row {
  std::string pack, node_dir, env, state, runs, python, abi, path;
};

// What an env still needs before a worker can run it, or before it is current; nothing when
// it is both.
std::string needs(const manifests::env_status& s) {
  if (s.native) return s.runnable ? "" : "its node library built";
  if (!s.runnable) return "its env installed (comfy-orch install)";
  if (s.state == manifests::env_state::stale) return "a rebuild (comfy-orch install)";
  return {};
}

// A native env's library, a Python env's interpreter (what the worker runs).
std::string runs_what(const manifests::env_status& s) {
  return (s.native || s.interpreter.empty() ? s.path : s.interpreter).string();
}

void print_table(std::ostream& out, const std::vector<row>& rows) {
  const std::vector<std::string> header = {"PACK", "NODE DIR", "ENV", "STATE",
                                           "RUNS", "PYTHON",   "ABI", "PATH"};
  std::vector<std::size_t> width(header.size());
  for (std::size_t i = 0; i < header.size(); ++i) width[i] = header[i].size();
  auto cells = [](const row& r) {
    return std::vector<std::string>{r.pack, r.node_dir, r.env, r.state,
                                    r.runs, r.python,   r.abi, r.path};
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
  auto* cmd = add_command(
      app, "envs", "List a deployment's envs and what state each is in",
      "List the envs of a deployment: one line per isolated node directory (nodes/ and "
      "nodes/<child>/ with a comfy-env.toml) with pack, env name (comfy-env's naming rule), "
      "location in the env workspace, state (ok, missing, broken, stale, ambiguous; and orphan "
      "for an env directory no pack maps to), whether a worker can run it "
      "(RUNS, and what it still needs), Python version, the ABI tag it was built for, and what the "
      "worker runs (a native "
      "pack's node library, a Python env's interpreter; [packs.python] names one ahead of the "
      "workspace's). The "
      "workspace root is [env] root, else ORCH_ENV_ROOT, else COMFY_ENV_ROOT, else ~/.ce.");
  struct options {
    std::string deployment;
    bool json = false;
  };
  auto opts = std::make_shared<options>();
  cmd->add_option("deployment", opts->deployment,
                  "Deployment file (comfy-orch.toml), or a ComfyUI tree (its custom_nodes)")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_flag("--json", opts->json, "Print one JSON document (schema: docs/cli.md)");
  cmd->callback([opts] {
    manifests::diagnostics diags;
    auto context = envs::load_env_context(opts->deployment, diags);
    const manifests::inventory empty;
    const auto& inv = context ? context->inventory : empty;
    const std::string tag =
        context && context->stack ? manifests::abi_tag(*context->stack) : std::string();
    const auto orphans = context ? manifests::find_orphan_envs(context->deployment.env.root,
                                                               manifests::claimed_env_dirs(inv))
                                 : std::vector<manifests::orphan_env>{};

    auto envs = nlohmann::json::array();
    std::vector<row> rows;
    std::map<std::string, std::size_t> counts;
    for (const auto& pack : inv.packs) {
      for (const auto& e : pack.envs) {
        const auto& s = e.status;
        ++counts[manifests::to_string(s.state)];
        auto candidates = nlohmann::json::array();
        for (const auto& c : s.candidates) candidates.push_back(c.string());
        envs.push_back({{"pack", pack.layout.name},
                        {"pack_dir", pack.layout.dir.string()},
                        {"node_dir", e.dir.relative_dir.string()},
                        {"env", e.dir.env_name},
                        {"kind", s.native ? "native" : "python"},
                        {"state", manifests::to_string(s.state)},
                        {"runnable", s.runnable},
                        {"needs", needs(s)},
                        {"python", s.python_version},
                        {"abi_tag", s.abi_tag},
                        {"stamp", s.stamp_note},
                        {"identity", s.identity},
                        {"candidates", candidates},
                        {"path", s.path.string()},
                        {"interpreter", s.interpreter.string()},
                        {"detail", s.detail}});
        rows.push_back({pack.layout.name, e.dir.relative_dir.string(), e.dir.env_name,
                        manifests::to_string(s.state), s.runnable ? "yes" : "no",
                        s.python_version.empty() ? "-" : s.python_version,
                        s.native || s.state == manifests::env_state::missing ? "-"
                        : s.abi_tag.empty()                                  ? "?"
                                                                             : s.abi_tag,
                        runs_what(s)});
      }
    }
    for (const auto& o : orphans) {
      envs.push_back({{"pack", nullptr},
                      {"env", o.path.filename().string()},
                      {"kind", "python"},
                      {"state", "orphan"},
                      {"runnable", false},
                      {"abi_tag", o.abi_tag},
                      {"path", o.path.string()},
                      {"detail",
                       "no discovered pack maps to it; comfy-orch gc lists and removes "
                       "it"}});
      rows.push_back({"-", "-", o.path.filename().string(), "orphan", "no", "-",
                      o.abi_tag.empty() ? "?" : o.abi_tag, o.path.string()});
      ++counts["orphan"];
    }
    if (opts->json) {
      nlohmann::json doc = {{"deployment", opts->deployment},
                            {"valid", !diags.has_errors()},
                            {"envs", envs},
                            {"diagnostics", diagnostics_to_json(diags)}};
      if (context) {
        doc["workspace_root"] = context->deployment.env.root.string();
        doc["workspace_root_source"] = manifests::to_string(context->deployment.env.source);
        doc["host_python"] = context->host_python.string();
        doc["abi_tag"] = tag.empty() ? nlohmann::json(nullptr) : nlohmann::json(tag);
        if (!context->stack_problem.empty()) doc["abi_problem"] = context->stack_problem;
      }
      std::cout << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    } else {
      print_diagnostics(std::cerr, diags);
      if (context) {
        std::cout << "env workspace: " << context->deployment.env.root.string() << " (from "
                  << manifests::to_string(context->deployment.env.source) << ")\n";
        std::cout << "host stack: "
                  << (tag.empty() ? "unknown (" + context->stack_problem + "); stamps not checked"
                                  : "abi=" + tag + " (" + context->host_python.string() + ")")
                  << '\n';
        print_table(std::cout, rows);
        std::string summary;
        // ok, missing and broken always; the other states when there are any.
        for (const char* state : {"ok", "missing", "broken", "stale", "ambiguous", "orphan"}) {
          const bool always = std::string_view(state) == "ok" ||
                              std::string_view(state) == "missing" ||
                              std::string_view(state) == "broken";
          if (always || counts[state] > 0) {
            summary += (summary.empty() ? "" : ", ") + std::to_string(counts[state]) + " " + state;
          }
        }
        std::cout << rows.size() << " env(s): " << summary << '\n';
        for (const auto& pack : inv.packs) {
          for (const auto& e : pack.envs) {
            if (!e.status.detail.empty())
              std::cout << e.dir.env_name << ": " << e.status.detail << '\n';
            if (const auto n = needs(e.status); !n.empty())
              std::cout << e.dir.env_name << ": " << (e.status.runnable ? "" : "runs no worker: ")
                        << "needs " << n << '\n';
          }
        }
      }
    }
    if (diags.has_errors()) throw CLI::RuntimeError(exit_invalid_input);
  });
}

}  // namespace orch::cli
