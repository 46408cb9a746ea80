// gateway_api's hosts (gateway_api.hpp): their streams, reports and checks, a host lost, and a
// running prompt failed. A prompt's life on a host is gateway_prompts.cpp's; a prompt in doubt,
// gateway_in_doubt.cpp's.
#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include "orch/executor/prompt.hpp"
#include "orch/fleet/host_report.hpp"
#include "orch/gateway/errc.hpp"
#include "orch/gateway/gateway_api.hpp"
#include "orch/support/untrusted_text.hpp"

namespace orch::gateway {

using nlohmann::json;

namespace {

std::int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::uint64_t gateway_api::now_tick() const {
  // Placement's logical clock: milliseconds since the gateway started.
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::steady_clock::now() - started_)
                                        .count());
}

void gateway_api::start() {
  check_timer_.expires_after(options_.check_period);
  check_timer_.async_wait([this](boost::system::error_code ec) {
    if (ec || stopped_) return;
    check_hosts();
    schedule();  // the clock moved: placement's pressure window may have passed
    start();
  });
}

void gateway_api::stop() {
  stopped_ = true;
  check_timer_.cancel();
  for (auto& [_, h] : hosts_)
    if (h.link) h.link->close_events();
}

void gateway_api::on_host_event(const host_event& e) {
  if (stopped_) return;
  if (e.what == host_event::kind::down) {
    const auto it = hosts_.find(e.host);
    if (it == hosts_.end()) return;
    it->second.listed = false;
    host_lost(e.host, e.reason.empty() ? "its source reported it down" : e.reason, true);
    if (it->second.link) it->second.link->close_events();
    return;
  }
  host& h = hosts_[e.host];
  h.view.name = e.host;
  h.url = "http://" + e.address + ":" + std::to_string(e.port);
  h.pid = e.pid;
  // Its source started it again: the process it ran before is gone.
  if (h.stream_open) host_lost(e.host, "it came up again at " + h.url, true);
  if (h.link) h.link->close_events();
  h.link = std::make_unique<host_link>(io_, e.address, e.port, options_.secret);
  h.listed = true;
  h.connecting = false;
  spdlog::info("gateway: {} is up at {}", e.host, h.url);
  connect(e.host);
}

void gateway_api::connect(const std::string& name) {
  host& h = hosts_.at(name);
  if (!h.listed || h.connecting || h.stream_open) return;
  h.connecting = true;
  // The stream first, so that no event of a prompt given to it is missed.
  h.link->open_events(
      client_id(),
      [this, name] {
        host& opened = hosts_.at(name);
        opened.connecting = false;
        opened.stream_open = true;
        // Perhaps another serve than before (restarted at the same address): what the last
        // one was sent is not known to be there.
        opened.inputs_held.clear();
        ++opened.serve_generation;
        read_facts(name);
      },
      [this, name](const std::string& text, bool binary) {
        if (binary)
          on_host_frame(name, text);
        else
          on_host_message(name, text);
      },
      [this, name](const std::string& why) {
        host& closed = hosts_.at(name);
        const bool was_open = closed.stream_open;
        closed.connecting = false;
        closed.stream_open = false;
        if (was_open) {
          host_lost(name, "its event stream ended (" + why + ")");
        } else {
          const std::string error = "its event stream could not be opened: " + why;
          if (closed.last_error != error) spdlog::warn("gateway: {}: {}", name, printable(error));
          closed.last_error = error;
        }
      });
}

void gateway_api::read_facts(const std::string& name) {
  host& reading = hosts_.at(name);
  if (reading.reading_facts) return;
  reading.reading_facts = true;
  const std::uint64_t asked = ++reading.reports_asked;
  reading.link->request("GET", "/orch/fleet/host", {}, [this, name, asked](result<host_answer> a) {
    if (stopped_) return;
    host& h = hosts_.at(name);
    h.reading_facts = false;
    if (!h.stream_open) return;  // the next check connects again
    if (!take_report(name, a, asked)) return;
    spdlog::info("gateway: {} serves {} node classes, fingerprint {}", name,
                 h.view.node_classes.size(), h.view.fingerprint);
    // It answers again: whether it has the prompt left in doubt with it is asked now.
    if (const auto* r = queue_.running_on(name); r != nullptr && r->in_doubt)
      settle(r->prompt.prompt_id, name);
    schedule();
  });
}

bool gateway_api::take_report(const std::string& name, const result<host_answer>& a,
                              std::uint64_t asked) {
  host& h = hosts_.at(name);
  std::string error;
  std::optional<fleet::host_report> report;
  if (!a) {
    error = a.err().message;
  } else if (a->status != 200) {
    error = "GET /orch/fleet/host answered HTTP " + std::to_string(a->status) +
            (a->status == 401 ? " (the gateway's fleet secret is not the host's)" : "");
  } else {
    auto reading = fleet::parse_host_report(a->body);
    if (reading.report)
      report = std::move(reading.report);
    else
      error = "its report is refused: " + reading.error;
  }
  if (!report) {
    if (h.last_error != error) spdlog::warn("gateway: {}: {}", name, printable(error));
    h.last_error = error;
    return false;
  }
  h.last_error.clear();
  // A report asked before the one last taken says less: it answers that the host is there, and
  // no more (one read before a prompt ended lacks the models the prompt loaded).
  if (asked < h.report_taken) return true;
  h.report_taken = asked;
  // What the gateway knows better than the host's last report: whether it is up to the gateway,
  // when it last gave it a prompt, and whether it runs one of the gateway's (a report read just
  // before a prompt ended would keep the host busy until the next).
  const fleet::host_view before = h.view;
  h.view = std::move(report->view);
  h.view.name = name;
  h.view.up = true;
  h.view.last_used = before.last_used;
  h.view.running = queue_.running_on(name) != nullptr;
  h.view.queued = 0;
  h.parts = std::move(report->parts);
  h.has_classes = true;
  // The fleet's fingerprint: the pinned one, else the first host's to report. A host whose
  // fingerprint differs is never given a prompt (placement leaves it out), with the difference
  // named.
  if (fleet_fingerprint_.empty()) {
    fleet_fingerprint_ = h.view.fingerprint;
    fleet_parts_ = h.parts;
    spdlog::info("gateway: the fleet's fingerprint is {}'s, {}", name, fleet_fingerprint_);
  } else if (fleet_parts_.empty() && h.view.fingerprint == fleet_fingerprint_) {
    // A pinned fingerprint's parts, from the first host that has it: the hosts refused before
    // can now be told what differs.
    fleet_parts_ = h.parts;
    for (auto& [other, o] : hosts_)
      if (o.has_classes) judge_fingerprint(other);
  }
  judge_fingerprint(name);
  return true;
}

void gateway_api::judge_fingerprint(const std::string& name) {
  host& h = hosts_.at(name);
  std::string refusal;
  if (h.view.fingerprint != fleet_fingerprint_)
    refusal = fleet_parts_.empty() ? "its fingerprint " + h.view.fingerprint +
                                         " is not the fleet's " + fleet_fingerprint_
                                   : "its packs or envs differ from the fleet's: " +
                                         fleet::fingerprint_difference(fleet_parts_, h.parts);
  if (refusal != h.refusal && !refusal.empty())
    spdlog::warn("gateway: {} is refused: {}", name, printable(refusal));
  h.refusal = std::move(refusal);
}

void gateway_api::check_hosts() {
  // Prompts in doubt on hosts that do not answer: ended past the limit, else moved on at once
  // when nothing listens where their host was.
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::string> lost_hosts;
  std::vector<std::string> asked;
  std::vector<std::pair<std::string, std::string>> answering;  // prompt, host
  for (const auto& [id, r] : queue_.running()) {
    if (!r.in_doubt) continue;
    if (now - r.in_doubt_since > options_.in_doubt_limit) {
      lost_hosts.push_back(r.host);
      continue;
    }
    const auto h = hosts_.find(r.host);
    if (h == hosts_.end()) continue;
    if (h->second.view.up)
      answering.emplace_back(id, r.host);
    else
      asked.push_back(r.host);
  }
  for (const auto& name : lost_hosts)
    settle_lost(
        name, false,
        "it did not answer for " +
            std::to_string(
                std::chrono::duration_cast<std::chrono::seconds>(options_.in_doubt_limit).count()) +
            " s");
  for (const auto& name : asked) probe_gone(name);
  for (const auto& [id, name] : answering) settle(id, name);
  for (auto& [name, h] : hosts_) {
    if (!h.listed) continue;
    if (!h.stream_open) {
      connect(name);
      continue;
    }
    if (!h.view.up) {  // its stream is open but its classes could not be read: again
      read_facts(name);
      continue;
    }
    if (h.checking) continue;
    h.checking = true;
    const std::uint64_t report_number = ++h.reports_asked;
    h.link->request(
        "GET", "/orch/fleet/host", {},
        [this, name = std::string(name), report_number](result<host_answer> a) {
          if (stopped_) return;
          host& checked = hosts_.at(name);
          checked.checking = false;
          if (!checked.stream_open) return;
          if (!take_report(name, a, report_number))
            host_lost(name, "it stopped answering (" + checked.last_error + ")");
        },
        std::chrono::seconds(5));
  }
}

void gateway_api::host_lost(const std::string& name, const std::string& why, bool gone) {
  host& h = hosts_.at(name);
  const bool was_up = h.view.up;
  h.view.up = false;  // its node classes stay known: a refusal counts hosts up or not
  h.down_reason = why;
  // Its stream goes too: the next check opens it again, and the host is up once it answers.
  h.stream_open = false;
  h.connecting = false;
  if (h.link) h.link->close_events();
  if (was_up) spdlog::warn("gateway: {} is down: {}", name, printable(why));
  if (const auto* r = queue_.running_on(name)) {
    const std::string id = r->prompt.prompt_id;
    if (!r->node_started && !gone) {
      // Its POST may be in the host's socket, or queued there: a host that does not answer may
      // be stopped or cut off, not gone, and would run it when it answers again. It stays the
      // host's, in doubt, until the host says (settle) or is known gone (probe_gone).
      if (!r->in_doubt)
        spdlog::warn(
            "gateway: prompt {} waits for {} to answer again or be known gone: it may have it", id,
            name);
      queue_.set_in_doubt(id, true);
    } else if (!r->node_started) {
      // No node of it ran, and the host is gone: nothing it did can have had an effect, so it
      // runs again elsewhere.
      spdlog::warn(
          "gateway: prompt {} goes back to the queue: {} was lost before any node of "
          "it ran",
          id, name);
      relay_.erase(id);
      forget_files(id);
      queue_.requeue(id);
    } else {
      fail_running(id, "comfy_orch.HostLost",
                   "host " + name + " (" + h.url + ") was lost while it ran this prompt: " + why);
    }
  }
  schedule();
}

void gateway_api::fail_running(const std::string& prompt_id, const std::string& exception_type,
                               const std::string& message) {
  ending_.erase(prompt_id);
  ended_.erase(prompt_id);  // it sends its own end
  live_.erase(prompt_id);
  running_prompt* r = queue_.running(prompt_id);
  if (r == nullptr) return;
  const std::string client = r->prompt.client_id();
  const json data = {{"prompt_id", prompt_id},
                     {"node_id", nullptr},
                     {"node_type", nullptr},
                     {"executed", json::array()},
                     {"exception_message", message},
                     {"exception_type", exception_type},
                     {"traceback", json::array()},
                     {"current_inputs", json::object()},
                     {"current_outputs", json::object()},
                     {"timestamp", unix_ms_now()}};
  relay_.erase(prompt_id);
  forget_files(prompt_id);
  if (!client.empty()) {
    server_.send(client, json{{"type", "execution_error"}, {"data", data}}.dump(
                             -1, ' ', false, json::error_handler_t::replace));
    server_.send(
        client, json{{"type", "executing"}, {"data", {{"node", nullptr}, {"prompt_id", prompt_id}}}}
                    .dump());
  }
  queue_.finish(prompt_id, json::object(),
                {{"status_str", "error"},
                 {"completed", false},
                 {"messages", json::array({json::array({"execution_error", data})})}},
                json::object());
}

void gateway_api::read_report_then(const std::string& name, std::function<void()> then) {
  host& h = hosts_.at(name);
  const std::uint64_t asked = ++h.reports_asked;
  h.link->request(
      "GET", "/orch/fleet/host", {},
      [this, name, asked, then = std::move(then)](result<host_answer> a) {
        if (stopped_) return;
        host& read = hosts_.at(name);
        // A report that cannot be read leaves the view as it was: the periodic check decides
        // whether the host is lost.
        if (read.stream_open) take_report(name, a, asked);
        then();
      },
      std::chrono::seconds(5));
}

}  // namespace orch::gateway
