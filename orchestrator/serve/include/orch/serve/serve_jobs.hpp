// serve_jobs: ComfyUI's jobs API, which the official frontend's queue and history panels read
// (docs/serve.md; the shapes and rules of Comfy-Org/ComfyUI 002c3fb9's server.py and
// comfy_execution/jobs.py at 172be438, not their code). A job is a queue item (pending or
// in_progress) or a history entry (completed, failed, or cancelled: an error after an
// interrupt), summarised from the same JSON that GET /queue and GET /history answer.
//
//   GET  /api/jobs?status=&workflow_id=&sort_by=created_at|execution_duration&sort_order=
//        asc|desc&limit=&offset=      {"jobs": [...], "pagination": {offset, limit, total,
//                                      has_more}}
//   GET  /api/jobs/{id}               one job with its outputs, status and workflow; 404
//   POST /api/jobs/{id}/cancel        {"cancelled": bool}: a pending one dequeued, the running
//                                      one interrupted, anything else a no-op
//   POST /api/jobs/cancel             {"job_ids": [...]}, each id a canonical UUID
//
// The routes read their jobs from a jobs_source: serve's one-machine queue (serve_api_jobs.cpp)
// or the gateway's queue for a fleet (orchestrator/gateway/src/gateway_jobs.cpp), so that both
// answer the same API with the same code.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/serve/serve_http.hpp"
#include "orch/support/result.hpp"

namespace orch::serve {

struct jobs_query {
  std::vector<std::string> statuses;  // empty: all
  std::optional<std::string> workflow_id;
  bool by_duration = false;  // sort_by=execution_duration (else created_at)
  bool ascending = false;
  std::optional<std::size_t> limit;
  std::size_t offset = 0;
};

// The query of GET /api/jobs; the error's message is ComfyUI's 400 text.
result<jobs_query> parse_jobs_query(const std::map<std::string, std::string>& query);

// extra_data's create_time (ms) and extra_pnginfo.workflow.id, where present, into `job`.
void put_job_metadata(nlohmann::json& job, const nlohmann::json& extra_data);

// A queue item ([number, id, prompt, extra_data, outputs]) as a job of `status`, with its
// workflow (the prompt and extra_data) when `detail`.
nlohmann::json job_of_queue_item(const nlohmann::json& item, const std::string& status,
                                 bool detail);
// A history entry ({prompt, outputs, status, meta}) as a job, with its outputs, status and
// workflow when `detail`.
nlohmann::json job_of_history(const std::string& id, const nlohmann::json& entry, bool detail);

// The jobs `query` selects from every job given, sorted and paged: GET /api/jobs's answer.
nlohmann::json jobs_page(std::vector<nlohmann::json> jobs, const jobs_query& query);

// A pending or running prompt as a job of the list, from its parts (no copy of its prompt).
nlohmann::json queued_job(const std::string& id, bool running, double number,
                          const nlohmann::json& extra_data);

// Where the jobs API reads its jobs and cancels them. Each is called on the thread that answers
// the request.
struct jobs_source {
  // Every job, summarised: queued_job's for those waiting or running, job_of_history's (without
  // detail) for those that ended.
  std::function<std::vector<nlohmann::json>()> all;
  // One job in detail (job_of_history or job_of_queue_item with `detail`), or nullopt.
  std::function<std::optional<nlohmann::json>(const std::string& id)> one;
  // ComfyUI's cancel_job for each id (a pending one dequeued, a running one interrupted, any
  // other left alone): whether any was cancelled.
  std::function<bool(const std::vector<std::string>& ids)> cancel;
};

// The jobs API's answer to `req` from `source`, or nullopt when `req` is none of its routes
// (ComfyUI registers them under /api only).
std::optional<http_reply> answer_jobs(const http_request& req, const jobs_source& source);

}  // namespace orch::serve
