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
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

}  // namespace orch::serve
