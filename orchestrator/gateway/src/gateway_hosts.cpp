// gateway_api's hosts: their streams and checks, scheduling, the event relay, a prompt's end and
// a host lost (gateway_api.hpp).
#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include "orch/executor/prompt.hpp"
#include "orch/fleet/host_report.hpp"
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
    host_lost(e.host, e.reason.empty() ? "its source reported it down" : e.reason);
    if (it->second.link) it->second.link->close_events();
    return;
  }
  host& h = hosts_[e.host];
  h.view.name = e.host;
  h.url = "http://" + e.address + ":" + std::to_string(e.port);
  h.pid = e.pid;
  if (h.stream_open) host_lost(e.host, "it came up again at " + h.url);
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
      [this, name](const std::string& text) { on_host_message(name, text); },
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
  reading.link->request("GET", "/orch/fleet/host", {}, [this, name](result<host_answer> a) {
    if (stopped_) return;
    host& h = hosts_.at(name);
    h.reading_facts = false;
    if (!h.stream_open) return;  // the next check connects again
    if (!take_report(name, a)) return;
    spdlog::info("gateway: {} serves {} node classes, fingerprint {}", name,
                 h.view.node_classes.size(), h.view.fingerprint);
    schedule();
  });
}

bool gateway_api::take_report(const std::string& name, const result<host_answer>& a) {
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
    h.link->request(
        "GET", "/orch/fleet/host", {},
        [this, name = std::string(name)](result<host_answer> a) {
          if (stopped_) return;
          host& checked = hosts_.at(name);
          checked.checking = false;
          if (!checked.stream_open) return;
          if (!take_report(name, a))
            host_lost(name, "it stopped answering (" + checked.last_error + ")");
        },
        std::chrono::seconds(5));
  }
}

void gateway_api::host_lost(const std::string& name, const std::string& why) {
  host& h = hosts_.at(name);
  const bool was_up = h.view.up;
  h.view.up = false;  // its node classes stay known: a refusal counts hosts up or not
  // Its stream goes too: the next check opens it again, and the host is up once it answers.
  h.stream_open = false;
  h.connecting = false;
  if (h.link) h.link->close_events();
  if (was_up) spdlog::warn("gateway: {} is down: {}", name, printable(why));
  if (const auto* r = queue_.running_on(name)) {
    const std::string id = r->prompt.prompt_id;
    if (!r->node_started) {
      // No node of it ran: nothing it did can have had an effect, so it runs again elsewhere.
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
    const auto d = fleet::place(views, fleet_fingerprint_, p.needs, waiting, tick, options_.policy);
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

void gateway_api::post_to_host(const std::string& prompt_id, const std::string& name) {
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
      [this, prompt_id, name](result<host_answer> a) {
        // Not when the prompt has since gone back to the queue, or to another host.
        const running_prompt* now = queue_.running(prompt_id);
        if (stopped_ || now == nullptr || now->host != name) return;
        if (!a) {
          // Never reached the host: nothing of it ran.
          host_lost(name, a.err().message);
          return;
        }
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
  if (id_field == data.end() || !id_field->is_string())
    return;  // the host's status: the gateway has its own
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
  // At once, whatever waits to be relayed: the rule for a host lost reads it.
  if (type == "executing" && !end) r->node_started = true;
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
        if (stopped_ || r == nullptr || r->host != name) return;
        const auto body = json_of(a);
        const json* found = nullptr;
        if (body && body->is_object())
          if (const auto it = body->find(prompt_id); it != body->end() && it->is_object())
            found = &*it;
        if (found == nullptr && a && tries_left > 0) {
          auto timer =
              std::make_shared<boost::asio::steady_timer>(io_, std::chrono::milliseconds(25));
          timer->async_wait([this, timer, prompt_id, name, tries_left](boost::system::error_code) {
            if (!stopped_) fetch_history(prompt_id, name, tries_left - 1);
          });
          return;
        }
        if (found == nullptr) {
          fail_running(
              prompt_id, "comfy_orch.HostLost",
              "host " + name + " ended the prompt but its history entry could not be read");
          schedule();
          return;
        }
        // Its outputs are copied before the entry is in the history: /history never names a
        // file the gateway's /view cannot give.
        copy_outputs(prompt_id, name, *found);
      });
}

void gateway_api::finish_prompt(const std::string& prompt_id, const json& entry) {
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
  forget_files(prompt_id);
  queue_.finish(prompt_id, object_field("outputs"), object_field("status"), object_field("meta"),
                std::move(outputs));
  schedule();
}

}  // namespace orch::gateway
