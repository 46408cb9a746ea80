// gateway_api's prompts in doubt (gateway_api.hpp; docs/fleet.md, "A prompt in doubt"): a
// prompt whose host stopped answering after it was sent stays with that host until the host says
// whether it has it, or is known gone.
#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include "orch/gateway/errc.hpp"
#include "orch/gateway/gateway_api.hpp"
#include "orch/support/untrusted_text.hpp"
#include "host_json.hpp"

namespace orch::gateway {

using nlohmann::json;

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
