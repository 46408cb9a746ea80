#include "orch/serve/serve_jobs.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "orch/executor/prompt.hpp"
#include "orch/serve/errc.hpp"
#include "orch/serve/json_reply.hpp"
#include "orch/serve/serve_request_fields.hpp"
#include "orch/support/ascii_lower.hpp"

namespace orch::serve {

using nlohmann::json;

namespace {

const std::vector<std::string> all_statuses = {"pending", "in_progress", "completed", "failed",
                                               "cancelled"};

bool ends_with_any(const std::string& name, std::initializer_list<const char*> endings) {
  const std::string lower = ascii_lower(name);
  return std::any_of(endings.begin(), endings.end(), [&](const char* e) {
    const std::string ending = e;
    return lower.size() >= ending.size() &&
           lower.compare(lower.size() - ending.size(), ending.size(), ending) == 0;
  });
}

bool three_d_file(const std::string& name) {
  return ends_with_any(name, {".obj", ".fbx", ".gltf", ".glb", ".usdz"});
}
bool text_file(const std::string& name) { return ends_with_any(name, {".txt", ".md", ".json"}); }

std::string text_of(const json& item, const char* key) {
  auto it = item.find(key);
  return it != item.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// An output item the frontend can show (jobs.py's is_previewable).
bool previewable(const std::string& media, const json& item) {
  static const char* media_types[] = {"images", "video", "audio", "3d", "text"};
  if (std::find(std::begin(media_types), std::end(media_types), media) != std::end(media_types))
    return true;
  const std::string format = text_of(item, "format");
  if (format.rfind("video/", 0) == 0 || format.rfind("audio/", 0) == 0) return true;
  const std::string file = text_of(item, "filename");
  return three_d_file(file) || text_file(file);
}

// A string item naming a 3D file is a file item; any other string is not one.
std::optional<json> as_file_item(const json& item) {
  if (item.is_object()) return item;
  if (item.is_string() && three_d_file(item.get<std::string>()))
    return json{{"filename", item}, {"type", "output"}, {"subfolder", ""}, {"mediaType", "3d"}};
  return std::nullopt;
}

struct outputs_summary {
  std::size_t count = 0;
  std::size_t previewable = 0;
  json preview = nullptr;
};

// jobs.py's get_outputs_summary and count_previewable_outputs in one pass: the preview is a
// saved visual output first, then any visual one, then a text file, then raw text.
outputs_summary summarise(const json& outputs) {
  outputs_summary s;
  json saved = nullptr, visual = nullptr, text_file_preview = nullptr, raw_text = nullptr;
  if (!outputs.is_object()) return s;
  for (const auto& [node, media_map] : outputs.items()) {
    if (!media_map.is_object()) continue;
    for (const auto& [media, items] : media_map.items()) {
      if (media == "animated" || !items.is_array()) continue;
      for (const auto& raw : items) {
        auto item = as_file_item(raw);
        if (!item) {
          if (media == "text" && raw_text.is_null() && !raw.is_null()) {
            std::string value = raw.is_string() ? raw.get<std::string>() : raw.dump();
            json t = {{"content", value.substr(0, 1024)}, {"nodeId", node}, {"mediaType", media}};
            if (value.size() > 1024) t["truncated"] = true;
            raw_text = std::move(t);
          }
          continue;
        }
        ++s.count;
        if (!previewable(media, *item)) continue;
        ++s.previewable;
        json enriched = *item;
        enriched["nodeId"] = node;
        if (!enriched.contains("mediaType")) enriched["mediaType"] = media;
        if (media == "text" || text_file(text_of(*item, "filename"))) {
          if (text_file_preview.is_null()) text_file_preview = std::move(enriched);
        } else if (text_of(*item, "type") == "output") {
          if (saved.is_null()) saved = std::move(enriched);
        } else if (visual.is_null()) {
          visual = std::move(enriched);
        }
      }
    }
  }
  for (json* p : {&saved, &visual, &text_file_preview, &raw_text})
    if (!p->is_null()) {
      s.preview = std::move(*p);
      break;
    }
  return s;
}

}  // namespace

void put_job_metadata(json& job, const json& extra_data) {
  if (!extra_data.is_object()) return;
  if (auto it = extra_data.find("create_time"); it != extra_data.end() && it->is_number())
    job["create_time"] = *it;
  const json* workflow = nullptr;
  if (auto png = extra_data.find("extra_pnginfo"); png != extra_data.end() && png->is_object())
    if (auto w = png->find("workflow"); w != png->end() && w->is_object()) workflow = &*w;
  if (workflow != nullptr)
    if (auto id = workflow->find("id"); id != workflow->end() && !id->is_null())
      job["workflow_id"] = *id;
}

namespace {

const json& at_or_null(const json& array, std::size_t i) {
  static const json null_value = nullptr;
  return array.is_array() && array.size() > i ? array[i] : null_value;
}

double number_or(const json& job, const char* key) {
  auto it = job.find(key);
  return it != job.end() && it->is_number() ? it->get<double>() : 0.0;
}

}  // namespace

result<jobs_query> parse_jobs_query(const std::map<std::string, std::string>& query) {
  jobs_query q;
  const auto get = [&](const char* key) -> const std::string* {
    auto it = query.find(key);
    return it == query.end() ? nullptr : &it->second;
  };
  if (const auto* s = get("status"); s != nullptr && !s->empty()) {
    std::vector<std::string> invalid;
    std::size_t at = 0;
    while (at <= s->size()) {
      const auto comma = std::min(s->find(',', at), s->size());
      std::string one = s->substr(at, comma - at);
      one.erase(0, one.find_first_not_of(" \t"));
      one.erase(one.find_last_not_of(" \t") + 1);
      one = ascii_lower(one);
      if (!one.empty()) {
        if (std::find(all_statuses.begin(), all_statuses.end(), one) == all_statuses.end())
          invalid.push_back(one);
        q.statuses.push_back(one);
      }
      at = comma + 1;
    }
    if (!invalid.empty()) {
      std::string said, valid;
      for (const auto& i : invalid) said += (said.empty() ? "" : ", ") + i;
      for (const auto& v : all_statuses) valid += (valid.empty() ? "" : ", ") + v;
      return error{serve_errc::bad_request,
                   "Invalid status value(s): " + said + ". Valid values: " + valid};
    }
  }
  if (const auto* w = get("workflow_id"); w != nullptr && !w->empty()) q.workflow_id = *w;
  const std::string sort_by = get("sort_by") ? ascii_lower(*get("sort_by")) : "created_at";
  if (sort_by != "created_at" && sort_by != "execution_duration")
    return error{serve_errc::bad_request, "sort_by must be 'created_at' or 'execution_duration'"};
  q.by_duration = sort_by == "execution_duration";
  const std::string order = get("sort_order") ? ascii_lower(*get("sort_order")) : "desc";
  if (order != "asc" && order != "desc")
    return error{serve_errc::bad_request, "sort_order must be 'asc' or 'desc'"};
  q.ascending = order == "asc";
  const auto integer = [](const std::string& text) -> std::optional<long long> {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || end != text.c_str() + text.size() || errno != 0) return std::nullopt;
    return v;
  };
  if (const auto* l = get("limit")) {
    const auto v = integer(*l);
    if (!v) return error{serve_errc::bad_request, "limit must be an integer"};
    if (*v <= 0) return error{serve_errc::bad_request, "limit must be a positive integer"};
    q.limit = static_cast<std::size_t>(*v);
  }
  if (const auto* o = get("offset")) {
    const auto v = integer(*o);
    if (!v) return error{serve_errc::bad_request, "offset must be an integer"};
    q.offset = *v < 0 ? 0 : static_cast<std::size_t>(*v);
  }
  return q;
}

json job_of_queue_item(const json& item, const std::string& status, bool detail) {
  json job = {{"id", at_or_null(item, 1)},
              {"status", status},
              {"priority", at_or_null(item, 0)},
              {"outputs_count", 0},
              {"previewable_outputs_count", 0}};
  put_job_metadata(job, at_or_null(item, 3));
  if (detail)
    job["workflow"] = {{"prompt", at_or_null(item, 2)}, {"extra_data", at_or_null(item, 3)}};
  return job;
}

json job_of_history(const std::string& id, const json& entry, bool detail) {
  // By reference: the queue's lock is held while every entry is summarised (serve_api_jobs.cpp).
  static const json none = nullptr, no_object = json::object(), no_array = json::array();
  const auto field = [&](const json& j, const char* key, const json& fallback) -> const json& {
    auto it = j.is_object() ? j.find(key) : j.end();
    return it != j.end() ? *it : fallback;
  };
  const json& item = field(entry, "prompt", none);
  const json& status_info = field(entry, "status", no_object);
  const json& outputs = field(entry, "outputs", no_object);
  json job = {{"id", id}, {"priority", at_or_null(item, 0)}};
  put_job_metadata(job, at_or_null(item, 3));
  bool interrupted = false;
  const json& messages = field(status_info, "messages", no_array);
  for (const auto& m : messages.is_array() ? messages : no_array) {
    if (!m.is_array() || m.size() < 2 || !m[0].is_string() || !m[1].is_object()) continue;
    const std::string event = m[0];
    const json timestamp = m[1].value("timestamp", json());
    if (event == "execution_start" && !timestamp.is_null()) job["execution_start_time"] = timestamp;
    if (event == "execution_success" || event == "execution_error" ||
        event == "execution_interrupted") {
      if (!timestamp.is_null()) job["execution_end_time"] = timestamp;
      if (event == "execution_error") job["execution_error"] = m[1];
      interrupted = interrupted || event == "execution_interrupted";
    }
  }
  const json& status_str_field = field(status_info, "status_str", none);
  const std::string status_str =
      status_str_field.is_string() ? status_str_field.get<std::string>() : std::string();
  job["status"] = status_str == "error" ? (interrupted ? "cancelled" : "failed") : "completed";
  const auto summary = summarise(outputs);
  job["outputs_count"] = summary.count;
  job["previewable_outputs_count"] = summary.previewable;
  if (!summary.preview.is_null()) job["preview_output"] = summary.preview;
  if (detail) {
    job["outputs"] = outputs;
    job["execution_status"] = status_info;
    job["workflow"] = {{"prompt", at_or_null(item, 2)}, {"extra_data", at_or_null(item, 3)}};
  }
  return job;
}

json jobs_page(std::vector<json> jobs, const jobs_query& q) {
  std::erase_if(jobs, [&](const json& j) {
    const std::string status = j.value("status", "");
    if (!q.statuses.empty() &&
        std::find(q.statuses.begin(), q.statuses.end(), status) == q.statuses.end())
      return true;
    return q.workflow_id && (!j.contains("workflow_id") || j["workflow_id"] != *q.workflow_id);
  });
  const auto key = [&](const json& j) {
    if (!q.by_duration) return number_or(j, "create_time");
    const double start = number_or(j, "execution_start_time");
    const double end = number_or(j, "execution_end_time");
    return start != 0 && end != 0 ? end - start : 0.0;
  };
  std::stable_sort(jobs.begin(), jobs.end(), [&](const json& a, const json& b) {
    return q.ascending ? key(a) < key(b) : key(b) < key(a);
  });
  const std::size_t total = jobs.size();
  const std::size_t from = std::min(q.offset, total);
  const std::size_t to = q.limit ? std::min(total, from + *q.limit) : total;
  json page = json::array();
  for (std::size_t i = from; i < to; ++i) page.push_back(std::move(jobs[i]));
  return {{"jobs", std::move(page)},
          {"pagination",
           {{"offset", q.offset},
            {"limit", q.limit ? json(*q.limit) : json(nullptr)},
            {"total", total},
            {"has_more", q.offset + (to - from) < total}}}};
}

json queued_job(const std::string& id, bool running, double number, const json& extra_data) {
  json job = {{"id", id},
              {"status", running ? "in_progress" : "pending"},
              {"priority", queue_number(number)},
              {"outputs_count", 0},
              {"previewable_outputs_count", 0}};
  put_job_metadata(job, extra_data);
  return job;
}

std::optional<http_reply> answer_jobs(const http_request& req, const jobs_source& source) {
  const auto& s = req.segments;
  if (s.size() < 2 || s[0] != "api" || s[1] != "jobs") return std::nullopt;
  const bool get = req.method == "GET", post = req.method == "POST";
  if (s.size() == 2 && get) {
    auto query = parse_jobs_query(req.query);
    if (!query) return json_reply({{"error", query.err().message}}, 400);
    return json_reply(jobs_page(source.all(), *query));
  }
  if (s.size() == 3 && get) {
    auto job = source.one(s[2]);
    return job ? json_reply(*job) : json_reply({{"error", "Job not found"}}, 404);
  }
  if (s.size() == 4 && post && s[3] == "cancel" && s[2] != "cancel")
    return json_reply({{"cancelled", source.cancel({s[2]})}});
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
    return json_reply({{"cancelled", source.cancel(ids.get<std::vector<std::string>>())}});
  }
  return std::nullopt;
}

}  // namespace orch::serve
