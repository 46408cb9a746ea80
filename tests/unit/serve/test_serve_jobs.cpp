// serve_jobs: ComfyUI's jobs API, summarised from the JSON of GET /queue and GET /history: the
// query's rules and 400 messages, a queue item or a history entry as a job (its status, times,
// outputs and preview), and the page of jobs a query selects.
#include "orch/serve/serve_jobs.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

using nlohmann::json;
using orch::serve::job_of_history;
using orch::serve::job_of_queue_item;
using orch::serve::jobs_page;
using orch::serve::jobs_query;
using orch::serve::parse_jobs_query;

// parse_jobs_query's 400 message for `query` ("<accepted>" where it was accepted).
std::string jobs_query_error(const std::map<std::string, std::string>& query) {
  const auto q = parse_jobs_query(query);
  return q ? std::string("<accepted>") : q.err().message;
}

// A history entry as GET /history answers it: the queue item, the status and the outputs.
json jobs_history_entry(const std::string& status_str, const json& messages,
                        const json& outputs = json::object()) {
  const json extra = {{"create_time", 1000},
                      {"extra_pnginfo", {{"workflow", {{"id", "wf-1"}}}}}};
  return {{"prompt", json::array({7, "id-1", json::object(), extra, json::array({"9"})})},
          {"outputs", outputs},
          {"status", {{"status_str", status_str}, {"completed", true}, {"messages", messages}}},
          {"meta", json::object()}};
}

json jobs_message(const std::string& event, double timestamp) {
  return json::array({event, {{"prompt_id", "id-1"}, {"timestamp", timestamp}}});
}

json jobs_outputs_summary(const json& outputs) {
  return job_of_history("id-1", jobs_history_entry("success", json::array(), outputs), false);
}

// Four jobs: created at 1..4, of two workflows, with durations 30, 10, 40 and 20.
std::vector<json> jobs_sample() {
  return {json{{"id", "a"}, {"status", "completed"}, {"create_time", 1}, {"workflow_id", "w1"},
           {"execution_start_time", 100}, {"execution_end_time", 130}},
          json{{"id", "b"}, {"status", "failed"}, {"create_time", 2}, {"workflow_id", "w2"},
           {"execution_start_time", 100}, {"execution_end_time", 110}},
          json{{"id", "c"}, {"status", "completed"}, {"create_time", 3}, {"workflow_id", "w1"},
           {"execution_start_time", 100}, {"execution_end_time", 140}},
          json{{"id", "d"}, {"status", "pending"}, {"create_time", 4},
           {"execution_start_time", 100}, {"execution_end_time", 120}}};
}

// The ids of a page's jobs, in order.
std::vector<std::string> jobs_ids(const json& page) {
  std::vector<std::string> ids;
  if (!page.is_object() || !page.contains("jobs")) return ids;
  for (const auto& j : page["jobs"]) ids.push_back(j.value("id", ""));
  return ids;
}

json jobs_select(const std::map<std::string, std::string>& query) {
  const auto q = parse_jobs_query(query);
  EXPECT_TRUE(q) << q.err().message;
  return q ? jobs_page(jobs_sample(), *q) : json();
}

TEST(serve_jobs, an_empty_query_selects_every_status_by_creation_newest_first) {
  const auto q = parse_jobs_query({});
  ASSERT_TRUE(q);
  EXPECT_TRUE(q->statuses.empty());
  EXPECT_FALSE(q->workflow_id);
  EXPECT_FALSE(q->by_duration);
  EXPECT_FALSE(q->ascending);
  EXPECT_FALSE(q->limit);
  EXPECT_EQ(q->offset, 0u);
}

TEST(serve_jobs, statuses_are_read_comma_separated_trimmed_and_lowercased) {
  const auto q = parse_jobs_query({{"status", "Completed, failed,,IN_PROGRESS"}});
  ASSERT_TRUE(q) << q.err().message;
  EXPECT_EQ(q->statuses, (std::vector<std::string>{"completed", "failed", "in_progress"}));
}

TEST(serve_jobs, an_invalid_status_is_400_naming_it_and_the_valid_ones) {
  const auto q = parse_jobs_query({{"status", "completed,bogus"}});
  ASSERT_FALSE(q);
  EXPECT_EQ(q.err().code, "bad_request");
  EXPECT_EQ(q.err().message,
            "Invalid status value(s): bogus. Valid values: pending, in_progress, completed, "
            "failed, cancelled");
}

TEST(serve_jobs, an_unknown_sort_by_or_sort_order_is_400) {
  EXPECT_EQ(jobs_query_error({{"sort_by", "name"}}),
            "sort_by must be 'created_at' or 'execution_duration'");
  EXPECT_EQ(jobs_query_error({{"sort_order", "up"}}), "sort_order must be 'asc' or 'desc'");
  EXPECT_EQ(jobs_query_error({{"sort_by", "EXECUTION_DURATION"}, {"sort_order", "ASC"}}),
            "<accepted>");
}

TEST(serve_jobs, a_limit_that_is_not_a_positive_integer_is_400) {
  EXPECT_EQ(jobs_query_error({{"limit", "0"}}), "limit must be a positive integer");
  EXPECT_EQ(jobs_query_error({{"limit", "-3"}}), "limit must be a positive integer");
  EXPECT_EQ(jobs_query_error({{"limit", "x"}}), "limit must be an integer");
  EXPECT_EQ(jobs_query_error({{"limit", ""}}), "limit must be an integer");
  EXPECT_EQ(jobs_query_error({{"limit", "5x"}}), "limit must be an integer");
}

TEST(serve_jobs, an_offset_that_is_not_an_integer_is_400) {
  EXPECT_EQ(jobs_query_error({{"offset", "x"}}), "offset must be an integer");
  EXPECT_EQ(jobs_query_error({{"offset", "1.5"}}), "offset must be an integer");
}

TEST(serve_jobs, a_negative_offset_reads_as_zero) {
  const auto q = parse_jobs_query({{"offset", "-5"}, {"limit", "2"}});
  ASSERT_TRUE(q) << q.err().message;
  EXPECT_EQ(q->offset, 0u);
  EXPECT_EQ(q->limit, 2u);
}

TEST(serve_jobs, a_successful_history_entry_is_a_completed_job) {
  json job = job_of_history("id-1", jobs_history_entry("success", json::array()), false);
  EXPECT_EQ(job["id"], "id-1");
  EXPECT_EQ(job["status"], "completed");
  EXPECT_EQ(job["priority"], 7);
  EXPECT_EQ(job["create_time"], 1000);
  EXPECT_EQ(job["workflow_id"], "wf-1");
  EXPECT_FALSE(job.contains("outputs")) << job;
  EXPECT_FALSE(job.contains("workflow")) << job;
}

TEST(serve_jobs, an_errored_history_entry_is_a_failed_job_with_its_error) {
  const json failure = json::array(
      {"execution_error", {{"node_id", "3"}, {"exception_message", "boom"}, {"timestamp", 9}}});
  const json messages = json::array({jobs_message("execution_start", 5), failure});
  json job = job_of_history("id-1", jobs_history_entry("error", messages), false);
  EXPECT_EQ(job["status"], "failed");
  EXPECT_EQ(job["execution_error"]["exception_message"], "boom");
  EXPECT_EQ(job["execution_end_time"], 9);
}

TEST(serve_jobs, an_error_after_an_interrupt_is_a_cancelled_job) {
  json job = job_of_history(
      "id-1",
      jobs_history_entry("error", json::array({jobs_message("execution_start", 5),
                                               jobs_message("execution_interrupted", 8)})),
      false);
  EXPECT_EQ(job["status"], "cancelled");
  EXPECT_EQ(job["execution_end_time"], 8);
}

TEST(serve_jobs, the_execution_times_are_the_messages_timestamps) {
  json job = job_of_history(
      "id-1",
      jobs_history_entry("success",
                         json::array({jobs_message("execution_start", 1700000000123.0),
                                      jobs_message("execution_cached", 1700000000200.0),
                                      jobs_message("execution_success", 1700000004567.0)})),
      false);
  EXPECT_EQ(job["execution_start_time"], 1700000000123.0);
  EXPECT_EQ(job["execution_end_time"], 1700000004567.0);
}

TEST(serve_jobs, a_detailed_history_job_carries_its_outputs_status_and_workflow) {
  const json outputs = {{"9", {{"images", {{{"filename", "a.png"}, {"type", "output"}}}}}}};
  const json entry = jobs_history_entry("success", json::array(), outputs);
  json job = job_of_history("id-1", entry, true);
  EXPECT_EQ(job["outputs"], outputs);
  EXPECT_EQ(job["execution_status"], entry["status"]);
  EXPECT_EQ(job["workflow"]["prompt"], json::object());
  EXPECT_EQ(job["workflow"]["extra_data"]["create_time"], 1000);
}

TEST(serve_jobs, outputs_are_counted_with_the_previewable_ones) {
  const json outputs = {
      {"9", {{"images", {{{"filename", "a.png"}, {"type", "output"}},
                         {{"filename", "b.png"}, {"type", "output"}}}}}},
      {"12", {{"latents", {{{"filename", "l.latent"}, {"type", "output"}}}}}},
      {"15", {{"animated", {true}}}}};
  json job = jobs_outputs_summary(outputs);
  EXPECT_EQ(job["outputs_count"], 3);
  EXPECT_EQ(job["previewable_outputs_count"], 2);
}

TEST(serve_jobs, the_preview_prefers_a_saved_image_over_a_temporary_one) {
  const json outputs = {
      {"3", {{"images", {{{"filename", "t.png"}, {"subfolder", ""}, {"type", "temp"}}}}}},
      {"9", {{"images", {{{"filename", "o.png"}, {"subfolder", "s"}, {"type", "output"}}}}}}};
  json job = jobs_outputs_summary(outputs);
  ASSERT_TRUE(job.contains("preview_output")) << job;
  EXPECT_EQ(job["preview_output"], (json{{"filename", "o.png"},
                                         {"subfolder", "s"},
                                         {"type", "output"},
                                         {"nodeId", "9"},
                                         {"mediaType", "images"}}));
}

TEST(serve_jobs, a_temporary_image_is_the_preview_where_nothing_was_saved) {
  const json outputs = {{"3", {{"images", {{{"filename", "t.png"}, {"type", "temp"}}}}}}};
  json job = jobs_outputs_summary(outputs);
  EXPECT_EQ(job["preview_output"]["filename"], "t.png");
  EXPECT_EQ(job["preview_output"]["nodeId"], "3");
}

TEST(serve_jobs, a_string_naming_a_3d_file_counts_as_an_output) {
  const json outputs = {{"5", {{"result", {"scene.GLB", "not a file", nullptr}}}}};
  json job = jobs_outputs_summary(outputs);
  EXPECT_EQ(job["outputs_count"], 1);
  EXPECT_EQ(job["previewable_outputs_count"], 1);
  EXPECT_EQ(job["preview_output"], (json{{"filename", "scene.GLB"},
                                         {"type", "output"},
                                         {"subfolder", ""},
                                         {"mediaType", "3d"},
                                         {"nodeId", "5"}}));
}

TEST(serve_jobs, raw_text_is_the_preview_where_there_is_no_file) {
  const json outputs = {{"4", {{"text", {"hello"}}}}};
  json job = jobs_outputs_summary(outputs);
  EXPECT_EQ(job["outputs_count"], 0);
  EXPECT_EQ(job["preview_output"],
            (json{{"content", "hello"}, {"nodeId", "4"}, {"mediaType", "text"}}));
}

TEST(serve_jobs, raw_text_in_the_preview_is_truncated_at_1024_characters) {
  const json outputs = {{"4", {{"text", {std::string(2000, 'x')}}}}};
  json preview = jobs_outputs_summary(outputs)["preview_output"];
  EXPECT_EQ(preview["content"], std::string(1024, 'x'));
  EXPECT_EQ(preview["truncated"], true);
}

TEST(serve_jobs, an_image_is_the_preview_before_raw_text) {
  const json outputs = {{"4", {{"text", {"hello"}}}},
                        {"9", {{"images", {{{"filename", "t.png"}, {"type", "temp"}}}}}}};
  EXPECT_EQ(jobs_outputs_summary(outputs)["preview_output"]["filename"], "t.png");
}

TEST(serve_jobs, a_job_without_outputs_has_no_preview) {
  json job = jobs_outputs_summary(json::object());
  EXPECT_EQ(job["outputs_count"], 0);
  EXPECT_EQ(job["previewable_outputs_count"], 0);
  EXPECT_FALSE(job.contains("preview_output")) << job;
}

TEST(serve_jobs, a_queue_item_is_a_job_without_outputs_with_its_creation_and_workflow) {
  const json extra = {{"create_time", 1234},
                      {"extra_pnginfo", {{"workflow", {{"id", "wf-9"}}}}}};
  const json item = json::array({3, "id-2", {{"1", {{"class_type", "X"}}}}, extra, {"1"}});
  json job = job_of_queue_item(item, "pending", false);
  EXPECT_EQ(job["id"], "id-2");
  EXPECT_EQ(job["status"], "pending");
  EXPECT_EQ(job["priority"], 3);
  EXPECT_EQ(job["outputs_count"], 0);
  EXPECT_EQ(job["previewable_outputs_count"], 0);
  EXPECT_EQ(job["create_time"], 1234);
  EXPECT_EQ(job["workflow_id"], "wf-9");
  EXPECT_FALSE(job.contains("workflow"));
  json detailed = job_of_queue_item(item, "in_progress", true);
  EXPECT_EQ(detailed["status"], "in_progress");
  EXPECT_EQ(detailed["workflow"], (json{{"prompt", item[2]}, {"extra_data", extra}}));
}

TEST(serve_jobs, a_queue_item_without_extra_data_has_no_creation_time_or_workflow) {
  json job = job_of_queue_item(json::array({1, "id-3", json::object()}), "pending", false);
  EXPECT_EQ(job["id"], "id-3");
  EXPECT_FALSE(job.contains("create_time")) << job;
  EXPECT_FALSE(job.contains("workflow_id")) << job;
}

TEST(serve_jobs, a_page_is_sorted_by_creation_newest_first_by_default) {
  json page = jobs_select({});
  EXPECT_EQ(jobs_ids(page), (std::vector<std::string>{"d", "c", "b", "a"}));
  EXPECT_EQ(page["pagination"], (json{{"offset", 0}, {"limit", nullptr}, {"total", 4},
                                      {"has_more", false}}));
}

TEST(serve_jobs, a_page_is_sorted_oldest_first_on_request) {
  EXPECT_EQ(jobs_ids(jobs_select({{"sort_order", "asc"}})),
            (std::vector<std::string>{"a", "b", "c", "d"}));
}

TEST(serve_jobs, a_page_is_sorted_by_execution_duration_on_request) {
  EXPECT_EQ(jobs_ids(jobs_select({{"sort_by", "execution_duration"}})),
            (std::vector<std::string>{"c", "a", "d", "b"}));
  EXPECT_EQ(jobs_ids(jobs_select({{"sort_by", "execution_duration"}, {"sort_order", "asc"}})),
            (std::vector<std::string>{"b", "d", "a", "c"}));
}

TEST(serve_jobs, a_page_holds_only_the_statuses_asked_for) {
  EXPECT_EQ(jobs_ids(jobs_select({{"status", "completed"}})),
            (std::vector<std::string>{"c", "a"}));
  json page = jobs_select({{"status", "pending,failed"}});
  EXPECT_EQ(jobs_ids(page), (std::vector<std::string>{"d", "b"}));
  EXPECT_EQ(page["pagination"]["total"], 2);
  EXPECT_EQ(jobs_ids(jobs_select({{"status", "cancelled"}})), std::vector<std::string>{});
}

TEST(serve_jobs, a_page_holds_only_the_workflow_asked_for) {
  EXPECT_EQ(jobs_ids(jobs_select({{"workflow_id", "w1"}})),
            (std::vector<std::string>{"c", "a"}));
  EXPECT_EQ(jobs_ids(jobs_select({{"workflow_id", "w1"}, {"status", "completed"},
                                  {"sort_order", "asc"}})),
            (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(jobs_ids(jobs_select({{"workflow_id", "nope"}})), std::vector<std::string>{});
}

TEST(serve_jobs, a_page_takes_limit_jobs_from_offset_and_says_whether_more_follow) {
  json first = jobs_select({{"limit", "2"}});
  EXPECT_EQ(jobs_ids(first), (std::vector<std::string>{"d", "c"}));
  EXPECT_EQ(first["pagination"], (json{{"offset", 0}, {"limit", 2}, {"total", 4},
                                       {"has_more", true}}));
  json middle = jobs_select({{"limit", "2"}, {"offset", "1"}});
  EXPECT_EQ(jobs_ids(middle), (std::vector<std::string>{"c", "b"}));
  EXPECT_EQ(middle["pagination"]["has_more"], true);
  json last = jobs_select({{"limit", "2"}, {"offset", "3"}});
  EXPECT_EQ(jobs_ids(last), (std::vector<std::string>{"a"}));
  EXPECT_EQ(last["pagination"], (json{{"offset", 3}, {"limit", 2}, {"total", 4},
                                      {"has_more", false}}));
}

TEST(serve_jobs, an_offset_past_the_end_gives_an_empty_page) {
  json page = jobs_select({{"offset", "10"}});
  EXPECT_EQ(jobs_ids(page), std::vector<std::string>{});
  EXPECT_EQ(page["pagination"]["total"], 4);
  EXPECT_EQ(page["pagination"]["offset"], 10);
  EXPECT_EQ(page["pagination"]["has_more"], false);
}

}  // namespace
