// comfy-orch ls [--json]: this user's running `comfy-orch serve`s, from the registrations in the
// control directory (docs/cli.md, "ls"). Those of servers that died are removed as they are seen.
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "orch/control/control_directory.hpp"

namespace orch::cli {

void add_ls_command(CLI::App& app) {
  auto* cmd = add_command(
      app, "ls", "List this user's running serves",
      "Lists this user's running `comfy-orch serve`s: pid, deployment, HTTP address, control "
      "socket and whether it answers (from " +
          control::control_directory_path().string() + ").");
  auto json_out = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json_out, "A JSON array (docs/cli.md) instead of the table");
  cmd->callback([json_out] {
    auto servers = control::list_registrations();
    if (!servers) {
      std::cerr << "comfy-orch ls: " << servers.err().message << '\n';
      throw CLI::RuntimeError(exit_failure);
    }
    if (*json_out) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& s : *servers) {
        out.push_back({{"pid", s.pid},
                       {"deployment", s.deployment},
                       {"http", s.http},
                       {"socket", s.socket},
                       {"version", s.version},
                       {"started_unix_ms", s.started_unix_ms},
                       {"answering", s.answering}});
      }
      std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
      return;
    }
    if (servers->empty()) {
      std::cout << "no running comfy-orch serve (" << control::control_directory_path().string()
                << ")\n";
      return;
    }
    for (const auto& s : *servers) {
      std::cout << s.pid << "  " << s.deployment << "  " << (s.http.empty() ? "-" : s.http) << "  "
                << s.socket << (s.answering ? "" : "  (not answering)") << '\n';
    }
  });
}

}  // namespace orch::cli
