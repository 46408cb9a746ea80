// gateway_api's hosts: their streams and checks, scheduling, the event relay, a prompt's end and
// a host lost (gateway_api.hpp).
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

constexpr std::size_t max_decisions = 100;

// A host's text, parsed as a client's is (nested at most executor::max_prompt_depth, never a
// throw): a host is another machine, and JSON nested deep enough would overflow the stack of
// whatever copies or frees it.
std::optional<json> parsed_from_host(const std::string& text) {
  auto parsed = executor::parse_bounded_json(text);
  if (!parsed) return std::nullopt;
  return std::move(*parsed);
}

std::optional<json> json_of(const result<host_answer>& a) {
  if (!a || a->status != 200) return std::nullopt;
  return parsed_from_host(a->body);
}

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
    const std::uint64_t asked = ++h.reports_asked;
    h.link->request(
        "GET", "/orch/fleet/host", {},
        [this, name = std::string(name), asked](result<host_answer> a) {
          if (stopped_) return;
          host& checked = hosts_.at(name);
          checked.checking = false;
          if (!checked.stream_open) return;
          if (!take_report(name, a, asked))
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

void gateway_api::note(const std::string& prompt_id, const fleet::placement& p) {
  // A waiting prompt is asked again at every round: noted once for each reason it gives.
  if (p.kind == fleet::placement_kind::wait) {
    auto& last = last_reason_[prompt_id];
    if (last == p.reason) return;
    last = p.reason;
  } else {
    last_reason_.erase(prompt_id);
  }
  decisions_.push_back({prompt_id, p, now_tick()});
  while (decisions_.size() > max_decisions) decisions_.pop_front();
}

void gateway_api::schedule() {
  if (stopped_) return;
  std::vector<fleet::host_view> views;
  for (auto& [name, h] : hosts_) {
    h.view.running = queue_.running_on(name) != nullptr;
    views.push_back(h.view);
  }
  std::vector<fleet::prompt_needs> waiting;
  for (const auto& p : queue_.pending()) waiting.push_back(p.needs);
  // In the queue's order, each pending prompt gets placement's answer; each one it runs makes
  // its host busy for the prompts after it.
  std::vector<std::pair<std::string, std::string>> runs;  // prompt, host
  const auto tick = now_tick();
  for (const auto& p : queue_.pending()) {
    if (views.empty()) break;
    const auto d =
        options_.round_robin
            ? round_robin_.pick(views, fleet_fingerprint_, p.needs)
            : fleet::place(views, fleet_fingerprint_, p.needs, waiting, tick, options_.policy);
    note(p.prompt_id, d);
    if (d.kind != fleet::placement_kind::run) continue;
    for (auto& v : views)
      if (v.name == d.host) {
        v.running = true;
        v.last_used = tick;
      }
    runs.emplace_back(p.prompt_id, d.host);
  }
  for (const auto& [prompt_id, name] : runs) {
    hosts_.at(name).view.last_used = tick;
    if (queue_.take(prompt_id, name)) send_inputs(prompt_id, name);
  }
  // The reasons of prompts no longer waiting (deleted, cleared) go: a client queuing and
  // deleting in a loop would grow them without end.
  std::erase_if(last_reason_, [this](const auto& entry) {
    const auto& pending = queue_.pending();
    return std::none_of(pending.begin(), pending.end(),
                        [&](const fleet_prompt& p) { return p.prompt_id == entry.first; });
  });
}

void gateway_api::send_to_host(const std::string& prompt_id, const std::string& name, bool again,
                               int tries_left) {
  running_prompt* r = queue_.running(prompt_id);
  if (r == nullptr) return;
  relay_[prompt_id] = r->prompt.client_id();
  json extra = r->prompt.extra_data;
  extra["client_id"] = client_id();
  const json body = {{"prompt", r->prompt.document},
                     {"prompt_id", prompt_id},
                     {"client_id", client_id()},
                     {"extra_data", extra}};
  hosts_.at(name).link->request(
      "POST", "/prompt", body.dump(-1, ' ', false, json::error_handler_t::replace),
      [this, prompt_id, name, again, tries_left](result<host_answer> a) {
        // Not when the prompt has since gone back to the queue, or to another host.
        const running_prompt* now = queue_.running(prompt_id);
        if (stopped_ || now == nullptr || now->host != name) return;
        if (!a) {
          // Refused: it never reached the host, whose process is gone. Else it may have (a
          // timeout after it was sent, a connection cut): host_lost leaves it in doubt there.
          host_lost(name, a.err().message, a.err().code == gateway_errc::host_not_listening);
          return;
        }
        if (again && a->status == 400 && a->body.find("\"prompt_id_known\"") != std::string::npos) {
          // The host has it already (an earlier POST of it came after all): asked again what
          // it has, never run twice.
          queue_.set_in_doubt(prompt_id, true);
          if (tries_left > 0) settle(prompt_id, name, tries_left - 1);
          return;
        }
        if (a->status == 200) queue_.set_in_doubt(prompt_id, false);  // a late answer
        if (a->status != 200) {
          spdlog::warn("gateway: {} refused prompt {}: HTTP {} {}", name, prompt_id, a->status,
                       printable(a->body.substr(0, 2000)));
          fail_running(prompt_id, "comfy_orch.HostRefused",
                       "host " + name + " refused the prompt (HTTP " + std::to_string(a->status) +
                           "): " + a->body.substr(0, 4000));
          schedule();
        }
      });
}

void gateway_api::on_host_message(const std::string& name, const std::string& text) {
  if (stopped_) return;
  const auto parsed = parsed_from_host(text);
  if (!parsed || !parsed->is_object()) return;
  const json& m = *parsed;
  const auto data_field = m.find("data");
  if (data_field == m.end() || !data_field->is_object()) return;
  const json& data = *data_field;
  const auto id_field = data.find("prompt_id");
  if (id_field == data.end() || !id_field->is_string()) {
    // A message of no prompt: the host's status (the gateway has its own), or a pack's own
    // (a node's PromptServer.send_sync to its prompt's client, the gateway here), which goes to
    // the client of the one prompt the host runs, as serve sends it to that prompt's client.
    const auto type_field = m.find("type");
    if (type_field == m.end() || !type_field->is_string() || *type_field == "status") return;
    const running_prompt* r = queue_.running_on(name);
    if (r == nullptr) return;
    const auto relay = relay_.find(r->prompt.prompt_id);
    if (relay != relay_.end() && !relay->second.empty()) server_.send(relay->second, text);
    return;
  }
  const std::string id = id_field->get<std::string>();
  const auto relay = relay_.find(id);
  if (relay == relay_.end()) return;
  running_prompt* r = queue_.running(id);
  if (r == nullptr || r->host != name) return;
  const auto type_field = m.find("type");
  if (type_field == m.end() || !type_field->is_string()) return;
  const std::string& type = type_field->get_ref<const std::string&>();
  const auto node = data.find("node");
  const bool end = type == "executing" && node != data.end() && node->is_null();
  if (type == "executing" && !end) queue_.node_started(id);
  // An event does not settle a prompt in doubt: a host greets a client that connects again with
  // the last progress of its prompt (progress_state), ended or not; settle asks.
  // Its outcome: GET /history/{id} now waits for its entry.
  if (type == "execution_success" || type == "execution_error" ||
      type == "execution_interrupted")
    ending_.insert(id);
  // What a client that connects again mid-prompt is greeted with (greeting()).
  if (type == "executing" && !end) live_[id].executing = text;
  if (type == "progress_state") live_[id].progress = text;
  // Relayed in order, an `executed` naming files once they are copied (gateway_files.cpp).
  relay_event(name, id, text);
}

void gateway_api::fetch_history(const std::string& prompt_id, const std::string& name,
                                int tries_left) {
  // The host writes its history entry just after the prompt's last event: until it is there,
  // asked again (a bounded number of times, 25 ms apart).
  hosts_.at(name).link->request(
      "GET", "/history/" + prompt_id, {},
      [this, prompt_id, name, tries_left](result<host_answer> a) {
        const running_prompt* r = queue_.running(prompt_id);
        if (stopped_ || r == nullptr || r->host != name) {
          ending_.erase(prompt_id);
          ended_.erase(prompt_id);
          return;
        }
        if (auto entry = history_entry(prompt_id, a)) {
          // Its outputs are copied before the entry is in the history: /history never names a
          // file the gateway's /view cannot give (copy_outputs, then finish_prompt).
          copy_outputs(prompt_id, name, std::move(*entry));
          return;
        }
        if (a && tries_left > 0) {
          auto timer =
              std::make_shared<boost::asio::steady_timer>(io_, std::chrono::milliseconds(25));
          timer->async_wait([this, timer, prompt_id, name, tries_left](boost::system::error_code) {
            if (!stopped_) fetch_history(prompt_id, name, tries_left - 1);
          });
          return;
        }
        fail_running(prompt_id, "comfy_orch.HostLost",
                     "host " + name + " ended the prompt but its history entry could not be read");
        schedule();
      });
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

std::optional<json> gateway_api::history_entry(const std::string& prompt_id,
                                               const result<host_answer>& a) {
  auto body = json_of(a);
  if (!body || !body->is_object()) return std::nullopt;
  const auto it = body->find(prompt_id);
  if (it == body->end() || !it->is_object()) return std::nullopt;
  return std::move(*it);
}

void gateway_api::finish_prompt(const std::string& prompt_id, const std::string& name,
                                json entry) {
  // The host's report is read again before the prompt ends at the gateway: the models it loaded
  // are then resident in the host's view when the prompt's client, or the queue, places the next
  // prompt (the periodic check could be a second away).
  read_report_then(name, [this, prompt_id, name, entry = std::move(entry)] {
    const running_prompt* now = queue_.running(prompt_id);
    if (now == nullptr || now->host != name) {
      ending_.erase(prompt_id);
      ended_.erase(prompt_id);
      return;
    }
    finish_from_entry(prompt_id, entry);
    schedule();
  });
}

void gateway_api::finish_from_entry(const std::string& prompt_id, const json& entry) {
  // The entry is the host's: each field is taken only in the shape ComfyUI gives it.
  const auto object_field = [&](const char* key) {
    const auto it = entry.find(key);
    return it != entry.end() && it->is_object() ? *it : json::object();
  };
  std::vector<std::string> outputs;
  if (const auto item = entry.find("prompt");
      item != entry.end() && item->is_array() && item->size() > 4 && (*item)[4].is_array())
    for (const auto& o : (*item)[4])
      if (o.is_string()) outputs.push_back(o.get<std::string>());
  relay_.erase(prompt_id);
  queue_.finish(prompt_id, object_field("outputs"), object_field("status"), object_field("meta"),
                std::move(outputs));
  ending_.erase(prompt_id);
  // Its `executing` for no node, held until now (ComfyUI's order: the history first).
  if (const auto held = ended_.find(prompt_id); held != ended_.end()) {
    server_.send(held->second.first, held->second.second);
    ended_.erase(held);
  }
}

void gateway_api::settle(const std::string& prompt_id, const std::string& name, int tries_left) {
  // Its queue first, then its history: a prompt that ends between the two is in the second, and
  // one whose late POST comes between them is refused when sent again (prompt_id_known), then
  // asked about again. One question at a time a prompt; one that gets no answer is asked again
  // at the next check (check_hosts).
  const auto still_in_doubt = [this, prompt_id, name] {
    const running_prompt* r = queue_.running(prompt_id);
    return !stopped_ && r != nullptr && r->host == name && r->in_doubt;
  };
  if (!still_in_doubt() || !settling_.insert(prompt_id).second) return;
  const auto unanswered = [this, prompt_id, name](const std::string& asked,
                                                  const result<host_answer>& a) {
    settling_.erase(prompt_id);
    spdlog::warn("gateway: {} did not say whether it has prompt {} ({}: {}); asked again", name,
                 prompt_id, asked, !a ? a.err().message : "HTTP " + std::to_string(a->status));
  };
  hosts_.at(name).link->request(
      "GET", "/queue", {},
      [this, prompt_id, name, tries_left, still_in_doubt, unanswered](result<host_answer> a) {
        if (!still_in_doubt()) return (void)settling_.erase(prompt_id);
        const auto q = json_of(a);
        if (!q || !q->is_object()) return unanswered("GET /queue", a);
        for (const char* part : {"queue_running", "queue_pending"})
          if (const auto items = q->find(part); items != q->end() && items->is_array())
            for (const auto& item : *items)
              if (item.is_array() && item.size() > 1 && item[1] == prompt_id) {
                spdlog::info("gateway: {} has prompt {}: its events follow", name, prompt_id);
                settling_.erase(prompt_id);
                queue_.set_in_doubt(prompt_id, false);
                return;
              }
        hosts_.at(name).link->request(
            "GET", "/history/" + prompt_id, {},
            [this, prompt_id, name, tries_left, still_in_doubt, unanswered](result<host_answer> h) {
              if (!still_in_doubt()) return (void)settling_.erase(prompt_id);
              if (!h || h->status != 200) return unanswered("GET /history", h);
              settling_.erase(prompt_id);
              if (auto entry = history_entry(prompt_id, h)) {
                spdlog::info("gateway: {} had run prompt {}: its entry is taken", name, prompt_id);
                copy_outputs(prompt_id, name, std::move(*entry));
                return;
              }
              const running_prompt* r = queue_.running(prompt_id);
              if (r->node_started) {
                fail_running(prompt_id, "comfy_orch.HostLost",
                             "host " + name + " (" + hosts_.at(name).url +
                                 ") no longer knows this prompt, which it had started: it "
                                 "restarted while it ran it");
                schedule();
                return;
              }
              spdlog::info("gateway: {} never got prompt {}: sent again", name, prompt_id);
              queue_.set_in_doubt(prompt_id, false);
              send_inputs(prompt_id, name, true, tries_left);
            });
      });
}

void gateway_api::settle_lost(const std::string& name, bool gone, const std::string& why) {
  const auto* r = queue_.running_on(name);
  if (r == nullptr || !r->in_doubt) return;
  const std::string id = r->prompt.prompt_id;
  const auto h = hosts_.find(name);
  const std::string url = h != hosts_.end() ? " (" + h->second.url + ")" : std::string();
  if (gone && !r->node_started) {
    spdlog::warn(
        "gateway: prompt {} goes back to the queue: {} is gone ({}), and no node of it "
        "had started",
        id, name, printable(why));
    relay_.erase(id);
    queue_.requeue(id);
  } else {
    fail_running(
        id, "comfy_orch.HostLost",
        "host " + name + url + " was lost while it held this prompt: " + why +
            (gone ? std::string() : "; it may yet run it there, so it is not run elsewhere"));
  }
  schedule();
}

void gateway_api::probe_gone(const std::string& name) {
  host& h = hosts_.at(name);
  if (h.probing || !h.link) return;
  h.probing = true;
  h.link->request(
      "GET", "/orch/fleet/host", {},
      [this, name](result<host_answer> a) {
        if (stopped_) return;
        hosts_.at(name).probing = false;
        if (!a && a.err().code == gateway_errc::host_not_listening)
          settle_lost(name, true, "nothing listens at its address: " + a.err().message);
      },
      std::chrono::seconds(2));
}

}  // namespace orch::gateway
