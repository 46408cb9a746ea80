// gateway_api's prompts on their hosts (gateway_api.hpp): scheduling (placement over every
// host's view), a prompt sent to its host, its events relayed by prompt id, and its end (the
// host's history entry, its outputs copied, the host's report read again).
#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include "orch/fleet/host_report.hpp"
#include "orch/gateway/gateway_api.hpp"
#include "orch/support/untrusted_text.hpp"
#include "host_json.hpp"

namespace orch::gateway {

using nlohmann::json;

namespace {

constexpr std::size_t max_decisions = 100;

}  // namespace

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

}  // namespace orch::gateway
