// comfy-orch report [<deployment>] [--socket S] --html FILE [--since 10m] | --json: the memory
// timelines of a running serve, with their markers and the divergences, as one self-contained
// HTML file, or as the three documents it is drawn from (docs/cli.md, "report").
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

#include "command_server.hpp"
#include "commands.hpp"
#include "orch/live/live_views.hpp"
#include "orch/live/report_html.hpp"

namespace orch::cli {
namespace {

struct report_options {
  server_choice server;
  std::string html;
  std::string since = "10m";
  bool json = false;
};

// Written to a new file of its own beside its place (mkstemp: never through a name someone
// else could have planted) and renamed into it: a reader never sees half a report.
bool write_whole(const std::string& path, const std::string& text) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  std::string temporary = (dir / ".comfy-orch-report-XXXXXX").string();
  const int fd = ::mkstemp(temporary.data());
  if (fd < 0) return false;
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    written += static_cast<std::size_t>(n);
  }
  const bool whole = written == text.size() && ::fchmod(fd, 0644) == 0 && ::close(fd) == 0;
  if (!whole || ::rename(temporary.c_str(), path.c_str()) != 0) {
    ::unlink(temporary.c_str());
    return false;
  }
  return true;
}

int report(const report_options& o) {
  if (o.html.empty() && !o.json) {
    std::cerr << "comfy-orch report: say where: --html FILE, or --json for the documents\n";
    return exit_invalid_input;
  }
  if (auto since = live::parse_since(o.since); !since) {
    std::cerr << "comfy-orch report: --since: " << since.err().message << '\n';
    return exit_invalid_input;
  }
  auto client = connect_to_server("report", o.server);
  if (!client) return exit_failure;
  const auto status = ask_server("report", *client, {{"get", "status"}});
  const auto found = status ? ask_server("report", *client, {{"get", "diverge"}}) : std::nullopt;
  const auto timeline =
      found ? ask_server("report", *client, {{"get", "timeline"}, {"since", o.since}})
            : std::nullopt;
  if (!timeline) return exit_failure;
  if (o.json) {
    const nlohmann::json all = {{"status", *status}, {"diverge", *found}, {"timeline", *timeline}};
    std::cout << all.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  }
  if (!o.html.empty()) {
    if (!write_whole(o.html, live::render_report_html(*status, *found, *timeline))) {
      std::cerr << "comfy-orch report: cannot write " << o.html
                << "\n  fix: choose a file in a directory you can write\n";
      return exit_failure;
    }
    auto count = [](const nlohmann::json& doc, const char* key) {
      const auto it = doc.find(key);
      return it != doc.end() && it->is_array() ? it->size() : 0;
    };
    std::cerr << "comfy-orch report: wrote " << o.html << " (" << count(*timeline, "samples")
              << " samples, " << count(*timeline, "markers") << " markers, "
              << count(*found, "differences") << " differences)\n";
  }
  return exit_ok;
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto* cmd = add_command(
      app, "report", "Write a running serve's memory timelines as one HTML file",
      "Writes the memory timelines of a running `comfy-orch serve` as one self-contained HTML "
      "file (no script, no network): per process, SVG charts of pager resident, pinned, cast "
      "buffers and the device's free view, with markers for node boundaries, prompt epochs, "
      "evictions and frees with their receipts, restarts and divergences, then the table of "
      "divergences. The server samples every --sample-ms into a ring buffer; --since picks how "
      "far back.");
  auto o = std::make_shared<report_options>();
  add_server_options(cmd, o->server);
  cmd->add_option("--html", o->html, "The HTML file to write");
  cmd->add_option("--since", o->since, "How far back: 90s, 10m (default), 2h");
  cmd->add_flag("--json", o->json,
                "Print the documents the report is drawn from: {status, diverge, timeline}");
  cmd->callback([o] {
    const int code = report(*o);
    if (code != exit_ok) throw CLI::RuntimeError(code);
  });
}

}  // namespace orch::cli
