// ComfyUI's jobs API at the gateway (serve_jobs.hpp: serve's routes, over a jobs_source), over
// the gateway's queue and history: the official frontend's queue and history panels list every
// prompt of the fleet under the gateway's ids, wherever it runs or ran. Each part is read on the
// io thread, which owns the queue.
#include <set>

#include "orch/gateway/gateway_api.hpp"
#include "orch/serve/serve_jobs.hpp"

namespace orch::gateway {

using nlohmann::json;

std::optional<serve::http_reply> gateway_api::jobs(const serve::http_request& req) {
  serve::jobs_source source;
  source.all = [this] {
    return on_io([&] {
      std::vector<json> all;
      for (const auto& [id, r] : queue_.running())
        all.push_back(serve::queued_job(id, true, r.prompt.number, r.prompt.extra_data));
      for (const auto& p : queue_.pending())
        all.push_back(serve::queued_job(p.prompt_id, false, p.number, p.extra_data));
      queue_.visit_history([&](const std::string& id, const json& entry) {
        all.push_back(serve::job_of_history(id, entry, false));
      });
      return all;
    });
  };
  source.one = [this](const std::string& id) {
    return on_io([&]() -> std::optional<json> {
      const json entry = queue_.history_of(id);
      if (entry.contains(id)) return serve::job_of_history(id, entry[id], true);
      if (const auto running = queue_.running().find(id); running != queue_.running().end())
        return serve::job_of_queue_item(running->second.prompt.to_json(), "in_progress", true);
      for (const auto& p : queue_.pending())
        if (p.prompt_id == id) return serve::job_of_queue_item(p.to_json(), "pending", true);
      return std::nullopt;
    });
  };
  // ComfyUI's cancel_job: a pending prompt dequeued here, a running one interrupted on its host.
  source.cancel = [this](const std::vector<std::string>& ids) {
    return on_io([&] {
      bool cancelled = queue_.delete_pending(ids) > 0;
      const std::set<std::string> wanted(ids.begin(), ids.end());
      interrupt_running([&](const std::string& id) {
        if (!wanted.contains(id)) return false;
        cancelled = true;
        return true;
      });
      return cancelled;
    });
  };
  return serve::answer_jobs(req, source);
}

}  // namespace orch::gateway
