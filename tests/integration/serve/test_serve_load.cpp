// A live `comfy-orch serve` under load (docs/serve.md, "Threads"): clients queueing at once while
// WebSocket clients come and go lose no prompt, and the server's memory comes back.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "serve_fixture.hpp"

namespace {

using namespace orch::serve_testing;

// 8 clients queue 25 prompts each while WebSocket clients come and go: every prompt ends in the
// history (200 entries), none is lost or run twice, and the server's memory comes back to where
// it was (within 10 MiB) once the load is over.
TEST_F(serve_test, eight_clients_queueing_25_prompts_each_lose_nothing) {
  auto s = serve();
  // Warm: the first prompts map the pool and load the workers' code.
  for (int i = 0; i < 5; ++i) queue(*s, quick_prompt);
  wait_until_idle(*s);
  ASSERT_EQ(s->post("/history", {{"clear", true}}).status, 200u);
  const std::uint64_t before = rss_kib(s->pid());

  std::atomic<bool> stop{false};
  std::thread churn([&] {  // WebSocket clients that connect, read their greeting and leave
    for (int n = 0; !stop; ++n) {
      try {
        ws_client c(s->port(), "churn-" + std::to_string(n % 16));
        c.next(200ms);
      } catch (const std::exception&) {
        // refused past the cap: fine, the server must only stay up
      }
    }
  });
  std::mutex mutex;
  std::set<std::string> ids;
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c)
    clients.emplace_back([&, c] {
      for (int i = 0; i < 25; ++i) {
        // Each prompt its own: every one runs, and the cache turns over under the load.
        json p = quick_prompt;
        p["1"]["inputs"]["value"] = (c * 25 + i) / 1000.0;
        const std::string id = queue(*s, p, "client-" + std::to_string(c));
        std::lock_guard lock(mutex);
        ids.insert(id);
      }
    });
  for (auto& t : clients) t.join();
  wait_until_idle(*s);
  stop = true;
  churn.join();

  EXPECT_EQ(ids.size(), 200u);  // 200 distinct prompt ids
  const json history = s->get("/history").json();
  EXPECT_EQ(history.size(), 200u);
  int succeeded = 0;
  for (const auto& id : ids) {
    ASSERT_TRUE(history.contains(id)) << id << " is not in the history";
    const std::string st = history[id]["status"]["status_str"];
    if (st == "success") ++succeeded;
    else EXPECT_FALSE(history[id]["status"]["messages"].empty()) << id << " failed without its error";
  }
  EXPECT_EQ(succeeded, 200);
  ASSERT_EQ(s->post("/history", {{"clear", true}}).status, 200u);
  const std::uint64_t after = rss_kib(s->pid());
#ifndef ORCH_TEST_SANITIZED  // ASan's quarantine keeps what was freed: RSS says nothing there
  EXPECT_LT(after, before + 10 * 1024) << "RSS " << before << " KiB before, " << after << " after";
#endif
  EXPECT_EQ(s->stop(), 0);
}

}  // namespace
