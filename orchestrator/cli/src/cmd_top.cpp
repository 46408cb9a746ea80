// comfy-orch top [<deployment>] [--socket S | --url URL] [--interval-ms N]: `status`, refreshed
// live in the terminal with ncurses (docs/cli.md, "top"); with --url at a gateway, every host's
// processes, each named host/process. Each process's resident and pinned figures get a
// sparkline of their recent samples; a row is red while the process diverges from its host
// (an unacknowledged difference of `diverge`). Keys: q quits, s cycles the sort, f the filter.
#include <curses.h>
#include <langinfo.h>

#include <algorithm>
#include <chrono>
#include <clocale>
#include <cstring>
#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "command_server.hpp"
#include "commands.hpp"
#include "orch/live/fleet_text.hpp"
#include "orch/live/live_text.hpp"
#include "orch/support/json_fields.hpp"
#include "orch/support/untrusted_text.hpp"

namespace orch::cli {
namespace {

using live::human_bytes;
using nlohmann::json;

constexpr std::size_t spark_width = 16;
const char* const sort_names[] = {"process", "resident", "pinned", "calls"};
const char* const filter_names[] = {"all", "workers", "diverging"};

struct top_options {
  server_choice server;
  unsigned interval_ms = 1000;
};

// A process's row: its name, after its host's at a gateway (host-0/imageops-nodes).
std::string row_key(const json& p) {
  const std::string host = text_field(p, "host");
  return host.empty() ? text_field(p, "process") : host + "/" + text_field(p, "process");
}

// The recent values of one figure, drawn in block characters (ASCII where the terminal's
// locale is not UTF-8).
std::string sparkline(const std::deque<std::uint64_t>& values, bool utf8) {
  static const char* const blocks[] = {"\u2581", "\u2582", "\u2583", "\u2584",
                                       "\u2585", "\u2586", "\u2587", "\u2588"};
  static const char ascii[] = "_.-=+*#@";
  const std::uint64_t peak = values.empty() ? 0 : *std::max_element(values.begin(), values.end());
  std::string out;
  for (const auto v : values) {
    const std::size_t level = peak == 0 ? 0 : static_cast<std::size_t>(v * 7 / peak);
    if (utf8) {
      out += blocks[level];
    } else {
      out += ascii[level];
    }
  }
  return out + std::string(spark_width - values.size(), ' ');
}

class top_screen {
 public:
  explicit top_screen(bool utf8) : utf8_(utf8) {}

  void update(const json& status, const json& divergences) {
    status_ = status;
    diverging_.clear();
    for (const auto& d : divergences.value("differences", json::array())) {
      if (text_field(d, "severity") == "divergence" &&
          !(d.contains("acknowledged") && d["acknowledged"] == true))
        diverging_.insert(row_key(d));
    }
    unanswered_.clear();
    for (const auto& [host, why] : object_field(status, "unanswered").items())
      unanswered_ += (unanswered_.empty() ? "did not answer: " : "; ") + host + " (" +
                     (why.is_string() ? why.get<std::string>() : why.dump()) + ")";
    for (const auto& p : status.value("processes", json::array())) {
      const std::string name = row_key(p);
      push(resident_[name],
           unsigned_field(p, "pager_resident_bytes") + unsigned_field(p, "ledger_loaded_bytes"));
      push(pinned_[name], unsigned_field(p, "pinned_reserved_bytes"));
    }
  }

  // Returns false when the key asks to quit.
  bool key(int ch) {
    if (ch == 'q' || ch == 'Q') return false;
    if (ch == 's') sort_ = (sort_ + 1) % 4;
    if (ch == 'f') filter_ = (filter_ + 1) % 3;
    return true;
  }

  void draw(const std::string& note) {
    erase();
    mvprintw(0, 0,
             "comfy-orch top  serve pid %s  budget %s  reserved %s  |  sort: %s (s)  "
             "filter: %s (f)  quit: q",
             status_.value("pid", json()).dump().c_str(),
             human_bytes(status_.value("budget_bytes", json())).c_str(),
             human_bytes(status_.value("pinned_reserved_bytes", json())).c_str(), sort_names[sort_],
             filter_names[filter_]);
    const std::string line = note.empty() ? unanswered_ : note;
    if (!line.empty()) mvprintw(1, 0, "%s", printable(line).c_str());
    attron(A_BOLD);
    mvprintw(2, 0, "%-24s %-10s %-7s %-3s %-9s %-16s %-9s %-16s %-22s %-7s %-4s %-4s %s", "PROCESS",
             "MODE", "MANAGER", "LVL", "RESIDENT", "", "PINNED", "", "CAST/HIGH/BOUND", "CALLS",
             "GEN", "RST", "STATE");
    attroff(A_BOLD);
    int row = 3;
    for (const json* p : rows()) {
      const std::string name = row_key(*p);
      const bool red = diverging_.count(name) != 0;
      if (red && has_colors()) attron(COLOR_PAIR(1) | A_BOLD);
      const std::string cast = human_bytes(p->value("cast_buffer_bytes", json())) + "/" +
                               human_bytes(p->value("cast_high_water_bytes", json())) + "/" +
                               human_bytes(p->value("cast_bound_bytes", json()));
      mvprintw(row++, 0, "%-24.24s %-10.10s %-7.7s %-3s %-9s %s %-9s %s %-22s %-7s %-4s %-4s %s%s",
               name.c_str(), text_field(*p, "mode").c_str(), text_field(*p, "manager").c_str(),
               p->value("level", json()).dump().c_str(),
               human_bytes(json(resident_[name].empty() ? 0 : resident_[name].back())).c_str(),
               sparkline(resident_[name], utf8_).c_str(),
               human_bytes(p->value("pinned_reserved_bytes", json())).c_str(),
               sparkline(pinned_[name], utf8_).c_str(), cast.c_str(),
               p->value("calls", json()).dump().c_str(),
               p->value("generation", json()).dump().c_str(),
               p->value("restarts", json()).dump().c_str(), text_field(*p, "state").c_str(),
               red ? "  DIVERGES (comfy-orch diverge)" : "");
      if (red && has_colors()) attroff(COLOR_PAIR(1) | A_BOLD);
    }
    refresh();
  }

 private:
  static void push(std::deque<std::uint64_t>& d, std::uint64_t v) {
    d.push_back(v);
    while (d.size() > spark_width) d.pop_front();
  }

  std::vector<const json*> rows() const {
    std::vector<const json*> out;
    const json& processes = status_.contains("processes") && status_["processes"].is_array()
                                ? status_["processes"]
                                : empty_;
    for (const auto& p : processes) {
      if (!p.is_object()) continue;
      const std::string name = row_key(p);
      if (filter_ == 1 && text_field(p, "mode") != "worker") continue;
      if (filter_ == 2 && diverging_.count(name) == 0) continue;
      out.push_back(&p);
    }
    auto figure = [&](const json* p) -> std::uint64_t {
      const std::string name = text_field(*p, "process");
      if (sort_ == 1)
        return unsigned_field(*p, "pager_resident_bytes") +
               unsigned_field(*p, "ledger_loaded_bytes");
      if (sort_ == 2) return unsigned_field(*p, "pinned_reserved_bytes");
      return unsigned_field(*p, "calls");
    };
    std::stable_sort(out.begin(), out.end(), [&](const json* a, const json* b) {
      if (sort_ == 0) return row_key(*a) < row_key(*b);
      return figure(a) > figure(b);
    });
    return out;
  }

  bool utf8_;
  json status_ = json::object();
  const json empty_ = json::array();
  std::set<std::string> diverging_;
  std::string unanswered_;  // at a gateway: the hosts that did not answer, and why
  std::map<std::string, std::deque<std::uint64_t>> resident_, pinned_;
  int sort_ = 0;
  int filter_ = 0;
};

// Both documents, a gateway's flattened to one row a process (fleet_text.hpp).
result<std::pair<json, json>> read_views(live_source& source) {
  auto status = source.ask("status");
  if (!status) return status.err();
  auto found = source.ask("diverge");
  if (!found) return found.err();
  if (!live::is_fleet_document(*status)) return std::pair(std::move(*status), std::move(*found));
  return std::pair(live::flatten_fleet(*status, "processes"),
                   live::flatten_fleet(*found, "differences"));
}

int top(const top_options& o) {
  auto source = live_source::open("top", o.server);
  if (!source) return exit_failure;
  // Asked once before the screen is taken, so that a server that cannot be asked is said
  // plainly (over HTTP, open() has not connected yet).
  auto first = read_views(*source);
  if (!first) {
    std::cerr << "comfy-orch top: " << first.err().message << " (" << first.err().code << ")\n";
    return exit_failure;
  }
  std::setlocale(LC_ALL, "");
  const bool utf8 = std::strcmp(nl_langinfo(CODESET), "UTF-8") == 0;
  if (initscr() == nullptr) {
    std::cerr << "comfy-orch top: cannot start the terminal (is TERM set?)\n";
    return exit_failure;
  }
  cbreak();
  noecho();
  curs_set(0);
  keypad(stdscr, TRUE);
  if (has_colors()) {
    start_color();
    use_default_colors();
    init_pair(1, COLOR_RED, -1);
  }
  top_screen screen(utf8);
  std::optional<result<std::pair<json, json>>> unused(std::move(first));  // the first read
  std::string lost;
  auto next = std::chrono::steady_clock::now();
  for (;;) {
    if (std::chrono::steady_clock::now() >= next) {
      auto views = unused ? std::move(*unused) : read_views(*source);
      unused.reset();
      if (!views) {
        lost = views.err().message;
        break;
      }
      screen.update(views->first, views->second);
      screen.draw("");
      next = std::chrono::steady_clock::now() + std::chrono::milliseconds(o.interval_ms);
    }
    timeout(50);
    const int ch = getch();
    if (ch == ERR) continue;
    if (!screen.key(ch)) break;
    screen.draw("");
  }
  endwin();
  if (!lost.empty()) {
    std::cerr << "comfy-orch top: the server stopped answering: " << lost << '\n';
    return exit_failure;
  }
  return exit_ok;
}

}  // namespace

void add_top_command(CLI::App& app) {
  auto* cmd = add_command(
      app, "top", "Watch a running serve's processes live in the terminal",
      "`comfy-orch status` refreshed live in the terminal: each process's resident and pinned "
      "bytes with a sparkline of the recent samples, a row in red while that process diverges "
      "from its host (see `comfy-orch diverge`). Keys: q quits, s cycles the sort (process, "
      "resident, pinned, calls), f the filter (all, workers, diverging). With --url at a gateway, "
      "every host's processes, each named host/process.");
  auto o = std::make_shared<top_options>();
  add_server_options(cmd, o->server);
  add_url_options(cmd, o->server);
  cmd->add_option("--interval-ms", o->interval_ms, "How often to ask the server (default 1000)")
      ->check(CLI::Range(100u, 60000u));
  cmd->callback([o] {
    const int code = top(*o);
    if (code != exit_ok) throw CLI::RuntimeError(code);
  });
}

}  // namespace orch::cli
