// The gateway's live views across its hosts (docs/fleet.md, "Live views across the fleet"):
// GET /orch/status, /orch/diverge, /orch/timeline[?since=] and /metrics (and under /api), each
// asked of every host that is up, with the fleet's secret, and answered as one document labelled
// by host. The hosts are asked at once, asynchronously on the io thread (host_link.hpp); the
// route waits for them on http_server's waiting thread, as /object_info does, never longer than
// a host's deadline: a host that does not answer in time is listed with why, as is one that is
// down or that sends what is not a document.
#include <algorithm>
#include <chrono>
#include <future>
#include <mutex>

#include "orch/executor/prompt.hpp"
#include "orch/gateway/fleet_metrics.hpp"
#include "orch/gateway/gateway_api.hpp"
#include "orch/live/metrics_text.hpp"
#include "orch/serve/json_reply.hpp"
#include "orch/support/untrusted_text.hpp"

namespace orch::gateway {

using nlohmann::json;
using serve::http_reply;
using serve::http_request;
using serve::json_reply;

namespace {

// How long each host has to answer, all of them at once. A serve answers its live views from
// its control segment without asking a worker, so a host that takes longer is stuck; the bound
// is also how long another reply waiting behind this one (/object_info) can be held.
constexpr auto host_deadline = std::chrono::seconds(5);
// The largest status, diverge or timeline document taken from one host (a serve's are a few
// KiB to a few MiB: its timeline holds its sampler's last minutes).
constexpr std::size_t max_host_document_bytes = std::size_t{16} << 20;
// The largest /metrics text taken from one host.
constexpr std::size_t max_host_metrics_bytes = std::size_t{8} << 20;
// The largest document of the whole fleet: hosts past it are listed as not taken.
constexpr std::size_t max_fleet_document_bytes = std::size_t{64} << 20;

// At most 300 bytes of a host's answer, safe for a log and a terminal.
std::string excerpt(const std::string& body) {
  return printable(body.substr(0, 300)) + (body.size() > 300 ? "..." : "");
}

std::string metric_line(const std::string& name, const std::string& labels, std::size_t value) {
  return name + (labels.empty() ? "" : "{" + labels + "}") + " " + std::to_string(value) + "\n";
}

std::string family_head(const std::string& name, const char* help) {
  return "# HELP " + name + " " + help + "\n# TYPE " + name + " gauge\n";
}

}  // namespace

void gateway_api::add_live_routes(serve::route_table& table) {
  using request = const http_request&;
  table.add({.method = "GET", .path = "/orch/status", .answer = [this](request) {
               return live_document("/orch/status", false);
             }});
  table.add({.method = "GET", .path = "/orch/diverge", .answer = [this](request) {
               return live_document("/orch/diverge", true);
             }});
  table.add({.method = "GET", .path = "/orch/timeline", .answer = [this](request r) {
               std::string target = "/orch/timeline";
               if (const auto s = r.query.find("since"); s != r.query.end()) {
                 // serve's form (a number and a unit: 90s, 5m): checked here, so that it is
                 // passed on as it came, with nothing to escape.
                 const std::string& since = s->second;
                 const bool plain = !since.empty() && since.size() <= 16 &&
                                    std::all_of(since.begin(), since.end(), [](char c) {
                                      return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z');
                                    });
                 if (!plain)
                   return json_reply({{"error",
                                       "since must be a number and a unit (90s, 500ms, "
                                       "5m, 1h), as serve's /orch/timeline takes it"}},
                                     400);
                 target += "?since=" + since;
               }
               return live_document(target, false);
             }});
  table.add(
      {.method = "GET", .path = "/metrics", .answer = [this](request) { return fleet_metrics(); }});
}

std::vector<gateway_api::host_reply> gateway_api::ask_every_host(const std::string& target,
                                                                 std::size_t max_bytes) {
  struct asking {
    std::mutex lock;
    std::vector<host_reply> replies;  // one a host, in name order
    std::size_t left = 0;
    std::promise<void> all_in;
  };
  auto state = std::make_shared<asking>();
  auto all_in = state->all_in.get_future();
  on_io([&] {
    std::vector<std::size_t> asked;
    for (auto& [name, h] : hosts_) {
      host_reply r;
      r.host = name;
      if (!h.view.up || !h.link) {
        r.error = "down";
        if (!h.down_reason.empty()) r.error += ": " + h.down_reason;
        if (!h.last_error.empty())
          r.error += (h.down_reason.empty() ? ": " : "; last try: ") + h.last_error;
        if (h.down_reason.empty() && h.last_error.empty())
          r.error += h.listed ? ": not connected yet" : ": its source says it is down";
      } else {
        asked.push_back(state->replies.size());
      }
      state->replies.push_back(std::move(r));
    }
    state->left = asked.size();
    if (asked.empty()) state->all_in.set_value();
    // The callbacks run on this thread, after this returns.
    for (const std::size_t i : asked) {
      hosts_.at(state->replies[i].host)
          .link->request(
              "GET", target, {},
              [state, i](result<host_answer> a) {
                std::lock_guard hold(state->lock);
                if (a) {
                  state->replies[i].answer = std::move(*a);
                } else {
                  state->replies[i].error = a.err().message;
                }
                if (--state->left == 0) state->all_in.set_value();
              },
              host_deadline, max_bytes);
    }
    return 0;
  });
  // Every request ends by its deadline; this bound only guards against one that would not.
  all_in.wait_for(host_deadline + std::chrono::seconds(2));
  std::lock_guard hold(state->lock);
  std::vector<host_reply> replies = state->replies;
  for (auto& r : replies)
    if (!r.answer && r.error.empty())
      r.error = "no answer within " + std::to_string(host_deadline.count()) + " s";
  return replies;
}

http_reply gateway_api::live_document(const std::string& target, bool with_divergent) {
  http_reply later;
  later.later = [this, target, with_divergent]() -> http_reply {
    const auto replies = ask_every_host(target, max_host_document_bytes);
    json hosts = json::object();
    json unanswered = json::object();
    bool divergent = false;
    std::size_t total = 0;
    std::optional<http_reply> refused;  // the hosts' own 400 (a since they cannot read)
    for (const auto& r : replies) {
      if (!r.answer) {
        unanswered[r.host] = r.error;
        continue;
      }
      const std::string& body = r.answer->body;
      if (r.answer->status != 200) {
        unanswered[r.host] = "answered " + target + " with HTTP " +
                             std::to_string(r.answer->status) + ": " + excerpt(body);
        if (r.answer->status == 400 && !refused)
          refused = http_reply{400, "application/json", body};
        continue;
      }
      if (total + body.size() > max_fleet_document_bytes) {
        unanswered[r.host] = "not taken: the fleet's document would pass " +
                             std::to_string(max_fleet_document_bytes >> 20) + " MiB";
        continue;
      }
      auto doc = executor::parse_bounded_json(body);
      if (!doc || !doc->is_object()) {
        unanswered[r.host] = "answered " + target + " with no JSON object" +
                             (doc ? std::string() : ": " + doc.err().message);
        continue;
      }
      total += body.size();
      if (const auto d = doc->find("divergent"); d != doc->end() && *d == true) divergent = true;
      hosts[r.host] = std::move(*doc);
    }
    // Every host refused the request itself (serve's 400): so does the gateway, with its reason.
    if (refused && hosts.empty()) {
      auto parsed = executor::parse_bounded_json(refused->body);
      if (parsed && parsed->is_object() && parsed->contains("error"))
        return json_reply(*parsed, 400);
      return json_reply({{"error", "every host refused " + target}}, 400);
    }
    json out = {{"hosts", std::move(hosts)}, {"unanswered", std::move(unanswered)}};
    if (with_divergent) out["divergent"] = divergent;
    // The status says where prompts go, too: each host's models and prompt, and why the newest
    // went where they went.
    if (target == "/orch/status") out["fleet"] = on_io([this] { return placement_summary(); });
    return json_reply(out);
  };
  return later;
}

http_reply gateway_api::fleet_metrics() {
  http_reply later;
  later.later = [this]() -> http_reply {
    const auto replies = ask_every_host("/metrics", max_host_metrics_bytes);
    std::vector<host_metrics> texts;
    std::map<std::string, bool> answered;
    for (const auto& r : replies) {
      const bool ok = r.answer && r.answer->status == 200;
      answered[r.host] = ok;
      if (ok) texts.push_back({r.host, r.answer->body});
    }
    const merged_metrics merged = merge_host_metrics(texts);
    struct figures {
      std::map<std::string, bool> up;
      std::size_t pending = 0, running = 0;
    };
    const figures f = on_io([&] {
      figures out;
      for (const auto& [name, h] : hosts_) out.up[name] = h.view.up;
      out.pending = queue_.pending().size();
      out.running = queue_.running().size();
      return out;
    });
    const std::string g = gateway_metric_prefix;
    std::string text;
    text += family_head(g + "hosts", "Hosts the gateway knows");
    text += metric_line(g + "hosts", "", f.up.size());
    text += family_head(g + "hosts_up",
                        "Hosts up at the gateway (their stream open, their "
                        "report read)");
    text += metric_line(g + "hosts_up", "",
                        static_cast<std::size_t>(std::count_if(
                            f.up.begin(), f.up.end(), [](const auto& u) { return u.second; })));
    text += family_head(g + "host_up", "1 when the host is up at the gateway, else 0");
    for (const auto& [name, up] : f.up)
      text +=
          metric_line(g + "host_up", "host=\"" + live::escape_label_value(name) + "\"", up ? 1 : 0);
    text += family_head(g + "host_metrics_answered",
                        "1 when the host answered this scrape's /metrics, else 0");
    for (const auto& [name, ok] : answered)
      text += metric_line(g + "host_metrics_answered",
                          "host=\"" + live::escape_label_value(name) + "\"", ok ? 1 : 0);
    text += family_head(g + "host_metrics_dropped_lines",
                        "Lines of the host's /metrics this scrape dropped (not in the format, "
                        "past a cap, or a family of another type)");
    for (const auto& [name, n] : merged.dropped_lines)
      text += metric_line(g + "host_metrics_dropped_lines",
                          "host=\"" + live::escape_label_value(name) + "\"", n);
    text += family_head(g + "queue_pending", "Prompts waiting in the gateway's queue");
    text += metric_line(g + "queue_pending", "", f.pending);
    text += family_head(g + "queue_running", "Prompts running on a host");
    text += metric_line(g + "queue_running", "", f.running);
    return {200, "text/plain; version=0.0.4; charset=utf-8", text + merged.text};
  };
  return later;
}

}  // namespace orch::gateway
