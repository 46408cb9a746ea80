// Interrupting a live `comfy-orch serve` (docs/serve.md, "Threads"): /interrupt and the jobs
// API's cancel stop the running prompt and the queue goes on, and neither /interrupt nor a POST
// /prompt waits behind a request that waits for a busy worker.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>

#include "serve_fixture.hpp"

namespace {

using namespace orch::serve_testing;

TEST_F(serve_test, interrupt_stops_the_running_prompt_and_the_queue_goes_on) {
  auto s = serve();
  ws_client ws(s->port(), "c");
  ASSERT_TRUE(ws.next());
  const std::string slow = queue(*s, sleep_prompt(60000), "c");
  const std::string next = queue(*s, quick_prompt, "c");
  wait_inside_the_running_node(*s);
  EXPECT_EQ(s->post("/interrupt", {{"prompt_id", "not-the-running-one"}}).status, 200u);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(s->get("/queue").json()["queue_running"][0][1], slow);  // still running
  EXPECT_EQ(s->post("/interrupt", json::object()).status, 200u);
  EXPECT_TRUE(heard(ws.until_prompt_end(slow), "execution_interrupted"));
  ws.until_prompt_end(next);
  EXPECT_EQ(history_of(*s, slow)["status"]["status_str"], "error");
  EXPECT_EQ(history_of(*s, next)["status"]["status_str"], "success");
  EXPECT_EQ(s->stop(), 0);
}

// ComfyUI's jobs API (002c3fb9), which the frontend's queue and history panels read: the list
// by status, one job in detail, and cancel, which dequeues a pending job, interrupts the running
// one and leaves a finished one alone.
TEST_F(serve_test, the_jobs_api_lists_details_and_cancels_pending_and_running_jobs) {
  auto s = serve();
  ws_client ws(s->port(), "c");
  ASSERT_TRUE(ws.next());
  const std::string slow = queue(*s, sleep_prompt(60000), "c");
  const std::string pending = queue(*s, quick_prompt, "c");
  wait_inside_the_running_node(*s);
  const json active = s->get("/api/jobs?status=in_progress,pending").json();
  ASSERT_EQ(active["jobs"].size(), 2u) << active;
  std::map<std::string, std::string> status;
  for (const auto& j : active["jobs"]) status[j["id"]] = j["status"];
  EXPECT_EQ(status[slow], "in_progress");
  EXPECT_EQ(status[pending], "pending");
  EXPECT_EQ(active["pagination"]["total"], 2);
  const json detail = s->get("/api/jobs/" + pending).json();
  EXPECT_EQ(detail["status"], "pending");
  EXPECT_EQ(detail["workflow"]["prompt"], quick_prompt);
  EXPECT_GT(detail["create_time"].get<std::int64_t>(), 0);
  EXPECT_EQ(s->post("/api/jobs/" + pending + "/cancel", json::object()).json(),
            json({{"cancelled", true}}));
  EXPECT_TRUE(s->get("/queue").json()["queue_pending"].empty());
  const auto invalid = s->post("/api/jobs/cancel", {{"job_ids", {"not-a-uuid"}}});
  EXPECT_EQ(invalid.status, 400u);
  EXPECT_EQ(invalid.json()["invalid_ids"], json({"not-a-uuid"}));
  EXPECT_EQ(s->post("/api/jobs/cancel", {{"job_ids", {slow}}}).json(),
            json({{"cancelled", true}}));
  EXPECT_TRUE(heard(ws.until_prompt_end(slow), "execution_interrupted"));
  EXPECT_EQ(s->get("/api/jobs/" + slow).json()["status"], "cancelled");
  const json cancelled = s->get("/api/jobs?status=cancelled").json();
  ASSERT_EQ(cancelled["jobs"].size(), 1u) << cancelled;
  EXPECT_EQ(cancelled["jobs"][0]["id"], slow);
  EXPECT_EQ(s->post("/api/jobs/" + slow + "/cancel", json::object()).json(),
            json({{"cancelled", false}}));  // finished: a no-op
  EXPECT_EQ(s->get("/api/jobs/0b5d1c2e-7f3a-4c1b-9e2d-1a2b3c4d5e6f").status, 404u);
  EXPECT_EQ(s->get("/api/jobs?limit=0").status, 400u);
  EXPECT_EQ(s->stop(), 0);
}

// A /free waits for the workers' receipts, which a worker gives after its running node: the
// API thread waits with it. /interrupt is answered on the io thread, not queued behind it (it
// waited there for the node's whole 60 s, and then found nothing left to interrupt).
TEST_F(serve_test, interrupt_is_not_queued_behind_a_request_that_waits_for_a_worker) {
  auto s = serve();
  ws_client ws(s->port(), "c");
  ASSERT_TRUE(ws.next());
  const std::string slow = queue(*s, sleep_prompt(60000), "c");
  wait_inside_the_running_node(*s);
  // A prompt whose class validates in its worker: the API thread waits on that busy worker
  // (/free no longer does: the busy worker is asked, not waited for).
  std::thread waiting([&] {
    EXPECT_EQ(s->post("/prompt", checked_prompt).status, 200u);
  });
  std::this_thread::sleep_for(200ms);  // the API thread waits on the validation
  EXPECT_EQ(s->post("/interrupt", json::object()).status, 200u);
  EXPECT_TRUE(heard(ws.until_prompt_end(slow), "execution_interrupted"));
  waiting.join();
  EXPECT_EQ(history_of(*s, slow)["status"]["status_str"], "error");
  EXPECT_EQ(s->stop(), 0);
}

// POST /prompt is answered on the io thread too (no node of it has a worker-side
// VALIDATE_INPUTS): a client can queue while a /free waits for a running node's receipts. On
// the API thread it waited behind the /free for the whole node.
TEST_F(serve_test, a_prompt_is_queued_while_a_request_waits_for_a_worker) {
  auto s = serve();
  ws_client ws(s->port(), "c");
  ASSERT_TRUE(ws.next());
  const std::string slow = queue(*s, sleep_prompt(60000), "c");
  wait_inside_the_running_node(*s);
  std::atomic<bool> validated{false};
  std::thread waiting([&] {  // validates in the busy worker: the API thread waits
    EXPECT_EQ(s->post("/prompt", checked_prompt).status, 200u);
    validated = true;
  });
  std::this_thread::sleep_for(200ms);  // the API thread waits on the validation
  const std::string next = queue(*s, sleep_prompt(0), "c");
  EXPECT_FALSE(validated.load()) << "the POST was answered only after the validation";
  // GET /prompt, as the io thread answers it (GET /queue waits behind the validation).
  EXPECT_EQ(s->get("/prompt").json()["exec_info"]["queue_remaining"], 2);
  EXPECT_EQ(s->post("/interrupt", json::object()).status, 200u);
  EXPECT_TRUE(heard(ws.until_prompt_end(slow), "execution_interrupted"));
  EXPECT_TRUE(heard(ws.until_prompt_end(next), "execution_success"));
  waiting.join();
  EXPECT_EQ(history_of(*s, next)["status"]["status_str"], "success");
  EXPECT_EQ(s->stop(), 0);
}

}  // namespace
