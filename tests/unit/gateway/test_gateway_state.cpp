// The gateway's state (gateway_state.hpp) under its queue (fleet_queue.hpp): what a queue wrote
// is what a queue made from the reopened file holds (pending prompts with their numbers, order,
// bodies and clients; prompts given to hosts, in doubt; the history in order, within its caps;
// the counter and the gateway's id), the file's mode, a second opener refused, and files that are
// no state of a gateway (garbage, damaged, another program's database) refused naming the file and
// what to do.
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <sys/stat.h>

#include <fstream>

#include "orch/gateway/errc.hpp"
#include "orch/gateway/fleet_queue.hpp"
#include "orch/gateway/gateway_state.hpp"
#include "temp_tree.hpp"

namespace orch::gateway {
namespace {

using nlohmann::json;

fleet_prompt state_prompt(fleet_queue& q, const std::string& id, bool front = false,
                          const std::string& client = "c") {
  fleet_prompt p;
  p.prompt_id = id;
  p.number = q.next_number(front);
  p.document = {{"1", {{"class_type", "X"}, {"inputs", {{"text", "prompt " + id}}}}}};
  p.extra_data = {{"client_id", client}, {"create_time", 7}};
  p.bytes = 100;
  return p;
}

std::unique_ptr<gateway_state> opened(const std::filesystem::path& file) {
  auto s = gateway_state::open(file);
  EXPECT_TRUE(s) << (s ? "" : s.err().message);
  return s ? std::move(*s) : nullptr;
}

stored_state read_back(gateway_state& s) {
  auto l = s.load();
  EXPECT_TRUE(l) << (l ? "" : l.err().message);
  return l ? std::move(*l) : stored_state{};
}

TEST(gateway_state, a_new_file_is_private_and_keeps_its_gateway_id) {
  orch::testing::temp_tree dir;
  std::string id;
  {
    auto s = opened(dir / "state.sqlite");
    ASSERT_TRUE(s);
    id = read_back(*s).gateway_id;
    EXPECT_EQ(id.size(), 36u);
    struct stat st {};
    ASSERT_EQ(::stat((dir / "state.sqlite").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
  }
  auto again = opened(dir / "state.sqlite");
  ASSERT_TRUE(again);
  EXPECT_EQ(read_back(*again).gateway_id, id);
}

TEST(gateway_state, a_reopened_queue_holds_what_the_queue_before_it_wrote) {
  orch::testing::temp_tree dir;
  json expected_queue;
  nlohmann::ordered_json expected_history;
  {
    auto s = opened(dir / "state.sqlite");
    ASSERT_TRUE(s);
    fleet_queue q(3);
    q.keep_in(s.get());
    q.restore(read_back(*s));
    for (const char* id : {"a", "b", "c", "d", "e", "f"}) ASSERT_TRUE(q.put(state_prompt(q, id)));
    ASSERT_TRUE(q.put(state_prompt(q, "front", /*front=*/true, "other")));
    ASSERT_TRUE(q.take("a", "host-0"));
    q.finish("a", {{"9", {{"images", json::array()}}}}, {{"status_str", "success"}}, {});
    ASSERT_TRUE(q.take("b", "host-1"));
    q.finish("b", json::object(), {{"status_str", "error"}}, {});
    ASSERT_TRUE(q.take("c", "host-0"));
    q.finish("c", json::object(), {{"status_str", "success"}}, {});
    ASSERT_TRUE(q.take("d", "host-0"));
    q.node_started("d");
    ASSERT_TRUE(q.take("e", "host-1"));
    q.delete_history({"b"});
    q.delete_pending({"f"});
    expected_queue = q.queue_json();
    expected_history = q.history(std::nullopt, -1);
    EXPECT_EQ(expected_history.size(), 2u);  // a and c: b deleted
  }
  auto s = opened(dir / "state.sqlite");
  ASSERT_TRUE(s);
  fleet_queue q(3);
  q.keep_in(s.get());
  q.restore(read_back(*s));
  EXPECT_EQ(q.queue_json(), expected_queue);
  EXPECT_EQ(q.history(std::nullopt, -1), expected_history);
  ASSERT_EQ(q.pending().size(), 1u);
  EXPECT_EQ(q.pending()[0].prompt_id, "front");
  EXPECT_EQ(q.pending()[0].number, -6);
  EXPECT_EQ(q.pending()[0].client_id(), "other");
  EXPECT_FALSE(q.pending()[0].needs.node_classes.empty()) << "its needs are read again";
  // Given to hosts before: still theirs, in doubt, with what the gateway knew of them.
  const running_prompt* d = q.running("d");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->host, "host-0");
  EXPECT_TRUE(d->node_started);
  EXPECT_TRUE(d->in_doubt);
  const running_prompt* e = q.running("e");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->host, "host-1");
  EXPECT_FALSE(e->node_started);
  // The counter goes on: no number is given twice.
  EXPECT_EQ(q.next_number(false), 7);
  // A prompt requeued after the restart is pending again after the next one.
  q.requeue("e");
  EXPECT_EQ(q.pending().size(), 2u);
}

TEST(gateway_state, the_history_caps_hold_in_the_file_too) {
  orch::testing::temp_tree dir;
  {
    auto s = opened(dir / "state.sqlite");
    fleet_queue q(10);
    q.keep_in(s.get());
    q.restore(read_back(*s));
    for (int i = 0; i < 5; ++i) {
      const std::string id = "p" + std::to_string(i);
      ASSERT_TRUE(q.put(state_prompt(q, id)));
      ASSERT_TRUE(q.take(id, "h"));
      q.finish(id, json::object(), {{"status_str", "success"}}, {});
    }
  }
  {
    // A smaller history_size after the restart: the oldest go, from the file as well.
    auto s = opened(dir / "state.sqlite");
    fleet_queue q(2);
    q.keep_in(s.get());
    q.restore(read_back(*s));
    EXPECT_EQ(q.history_size(), 2u);
    EXPECT_EQ(read_back(*s).history.size(), 2u);
    ASSERT_TRUE(q.put(state_prompt(q, "p5")));
    ASSERT_TRUE(q.take("p5", "h"));
    q.finish("p5", json::object(), {{"status_str", "success"}}, {});
    const auto history = read_back(*s).history;
    ASSERT_EQ(history.size(), 2u);
    EXPECT_EQ(history[0].prompt_id, "p4");
    EXPECT_EQ(history[1].prompt_id, "p5");
    q.clear_history();
    EXPECT_TRUE(read_back(*s).history.empty());
    ASSERT_TRUE(q.put(state_prompt(q, "p6")));
    q.clear_pending();
    EXPECT_TRUE(read_back(*s).prompts.empty());
  }
}

TEST(gateway_state, a_second_gateway_on_the_same_file_is_refused) {
  orch::testing::temp_tree dir;
  auto first = opened(dir / "state.sqlite");
  ASSERT_TRUE(first);
  auto second = gateway_state::open(dir / "state.sqlite");
  ASSERT_FALSE(second);
  EXPECT_EQ(second.err().code, gateway_errc::state_unusable);
  EXPECT_NE(second.err().message.find((dir / "state.sqlite").string()), std::string::npos);
  EXPECT_NE(second.err().message.find("another gateway"), std::string::npos)
      << second.err().message;
}

// Whichever of open and load finds it, the error names the file and says what to do.
void expect_refused(const std::filesystem::path& file, const std::string& why) {
  std::string message;
  auto s = gateway_state::open(file);
  if (!s) {
    message = s.err().message;
  } else {
    auto l = (*s)->load();
    ASSERT_FALSE(l) << "a damaged file was read as a state";
    message = l.err().message;
  }
  EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  EXPECT_NE(message.find(why), std::string::npos) << message;
  EXPECT_NE(message.find("fix: move"), std::string::npos) << message;
}

TEST(gateway_state, a_file_that_is_no_database_is_refused_naming_it) {
  orch::testing::temp_tree dir;
  dir.file("garbage.sqlite", std::string(8192, 'x'));
  expect_refused(dir / "garbage.sqlite", "not a SQLite database");
}

TEST(gateway_state, a_damaged_state_is_refused_naming_it) {
  orch::testing::temp_tree dir;
  {
    auto s = opened(dir / "state.sqlite");
    fleet_queue q;
    q.keep_in(s.get());
    for (int i = 0; i < 50; ++i) ASSERT_TRUE(q.put(state_prompt(q, "p" + std::to_string(i))));
  }
  // Past SQLite's own 100-byte header, its pages overwritten.
  std::fstream f(dir / "state.sqlite", std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(100);
  const std::string junk(16384, '\x5a');
  f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  f.close();
  expect_refused(dir / "state.sqlite", "state.sqlite");
}

TEST(gateway_state, another_programs_database_is_refused_not_taken_over) {
  orch::testing::temp_tree dir;
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir / "other.sqlite").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE photos (name TEXT); INSERT INTO photos VALUES ('a');",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  expect_refused(dir / "other.sqlite", "not a comfy-orch gateway's state (its tables: photos)");
  // Untouched.
  ASSERT_EQ(sqlite3_open((dir / "other.sqlite").c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master", -1, &st, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(st, 0), 1);
  sqlite3_finalize(st);
  sqlite3_close(db);
}

TEST(gateway_state, a_directory_where_the_file_would_be_is_refused) {
  orch::testing::temp_tree dir;
  dir.dir("state.sqlite");
  auto s = gateway_state::open(dir / "state.sqlite");
  ASSERT_FALSE(s);
  EXPECT_NE(s.err().message.find((dir / "state.sqlite").string()), std::string::npos);
}

}  // namespace
}  // namespace orch::gateway
