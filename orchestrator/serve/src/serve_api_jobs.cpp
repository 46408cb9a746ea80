// The jobs API's routes (serve_jobs.hpp) over the server's queue and history.
#include <algorithm>

#include "orch/executor/prompt.hpp"
#include "orch/serve/json_reply.hpp"
#include "orch/serve/serve_api.hpp"
#include "orch/serve/serve_jobs.hpp"
#include "orch/serve/serve_request_fields.hpp"

namespace orch::serve {

using nlohmann::json;

namespace {

// A queued prompt as a job of the list, read in place: the queue's lock is held meanwhile.
json queue_job(const queued_prompt& p, bool running) {
  json job = {{"id", p.prompt_id},
              {"status", running ? "in_progress" : "pending"},
              {"priority", queue_number(p.number)},
              {"outputs_count", 0},
              {"previewable_outputs_count", 0}};
  put_job_metadata(job, p.extra_data);
  return job;
}

}  // namespace

std::optional<http_reply> comfy_api::jobs(const http_request& req) {
  // ComfyUI registers these under /api only.
  const auto& s = req.segments;
  if (s.size() < 2 || s[0] != "api" || s[1] != "jobs") return std::nullopt;
  const bool get = req.method == "GET", post = req.method == "POST";
  if (s.size() == 2 && get) {
    auto query = parse_jobs_query(req.query);
    if (!query) return json_reply({{"error", query.err().message}}, 400);
    std::vector<json> all;
    queue_.visit_queue(
        [&](const queued_prompt& p, bool running) { all.push_back(queue_job(p, running)); });
    queue_.visit_history([&](const std::string& id, const json& entry) {
      all.push_back(job_of_history(id, entry, false));
    });
    return json_reply(jobs_page(std::move(all), *query));
  }
  if (s.size() == 3 && get) {
    const std::string& id = s[2];
    const json entry = queue_.history_of(id);
    if (entry.contains(id)) return json_reply(job_of_history(id, entry[id], true));
    std::optional<json> job;
    queue_.visit_queue([&](const queued_prompt& p, bool running) {
      if (!job && p.prompt_id == id)
        job = job_of_queue_item(p.to_json(), running ? "in_progress" : "pending", true);
    });
    return job ? json_reply(*job) : json_reply({{"error", "Job not found"}}, 404);
  }
  if (s.size() == 4 && post && s[3] == "cancel" && s[2] != "cancel")
    return json_reply({{"cancelled", cancel_jobs({s[2]})}});
  if (s.size() == 3 && post && s[2] == "cancel") {
    auto body = executor::parse_bounded_json(req.body);
    if (!body) return json_reply({{"error", "Request body must be valid JSON"}}, 400);
    const json ids = body->is_object() ? body->value("job_ids", json()) : json();
    if (!ids.is_array()) return json_reply({{"error", "job_ids must be a list"}}, 400);
    json invalid = json::array();
    for (const auto& id : ids)
      if (!id.is_string() || !canonical_uuid(id.get_ref<const std::string&>()))
        invalid.push_back(id.is_string() ? id : json(id.dump()));
    if (!invalid.empty())
      return json_reply(
          {{"error", "job_ids contains invalid id(s)"}, {"invalid_ids", std::move(invalid)}},
          400);
    return json_reply({{"cancelled", cancel_jobs(ids.get<std::vector<std::string>>())}});
  }
  return std::nullopt;
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
