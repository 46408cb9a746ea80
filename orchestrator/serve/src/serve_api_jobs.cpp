// The jobs API's routes (serve_jobs.hpp) over the server's queue and history.
#include <algorithm>

#include "orch/serve/serve_api.hpp"
#include "orch/serve/serve_jobs.hpp"

namespace orch::serve {

using nlohmann::json;

std::optional<http_reply> comfy_api::jobs(const http_request& req) {
  jobs_source source;
  source.all = [this] {
    std::vector<json> all;
    // Read in place: the queue's lock is held meanwhile.
    queue_.visit_queue([&](const queued_prompt& p, bool running) {
      all.push_back(queued_job(p.prompt_id, running, p.number, p.extra_data));
    });
    queue_.visit_history([&](const std::string& id, const json& entry) {
      all.push_back(job_of_history(id, entry, false));
    });
    return all;
  };
  source.one = [this](const std::string& id) -> std::optional<json> {
    const json entry = queue_.history_of(id);
    if (entry.contains(id)) return job_of_history(id, entry[id], true);
    std::optional<json> job;
    queue_.visit_queue([&](const queued_prompt& p, bool running) {
      if (!job && p.prompt_id == id)
        job = job_of_queue_item(p.to_json(), running ? "in_progress" : "pending", true);
    });
    return job;
  };
  source.cancel = [this](const std::vector<std::string>& ids) { return cancel_jobs(ids); };
  return answer_jobs(req, source);
}

// ComfyUI's cancel_job, for each id: a pending job is dequeued, the running one interrupted (only
// while it is still the one running), and a finished or unknown one is left alone. All at once:
// one by one, 200,000 ids had held the API thread 2 s.
bool comfy_api::cancel_jobs(const std::vector<std::string>& ids) {
  bool cancelled = queue_.delete_pending(ids) > 0;
  const auto running = queue_.running_id();
  if (running && std::find(ids.begin(), ids.end(), *running) != ids.end()) {
    executor_->interrupt();
    cancelled = true;
  }
  return cancelled;
}

}  // namespace orch::serve
