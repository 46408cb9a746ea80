// user_data: ComfyUI's /users, /settings and /userdata routes as requests reach them from the
// server (the target split by split_target, whose segments keep a %2F inside one segment),
// answered in ComfyUI's shapes and statuses, and never reaching outside the user's directory.
#include "orch/serve/user_data.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "temp_tree.hpp"

namespace {

using namespace std::string_literals;
using nlohmann::json;
using orch::serve::http_reply;
using orch::serve::http_request;
using orch::serve::split_target;
using orch::serve::user_data;
using orch::testing::read_fd;
using orch::testing::temp_tree;

http_request user_data_request(const std::string& method, const std::string& target,
                               const std::string& body) {
  http_request r;
  r.method = method;
  split_target(target, r);
  r.body = body;
  return r;
}

// The route user_data is handed: the segments without ComfyUI's /api prefix.
std::vector<std::string> user_data_route(const http_request& r) {
  std::vector<std::string> route = r.segments;
  if (route.size() > 1 && route[0] == "api") route.erase(route.begin());
  return route;
}

// A reply's bytes: its file's, or its body.
std::string user_data_bytes(const http_reply& r) {
  return r.file ? read_fd(r.file->get()) : r.body;
}

class user_data_test : public ::testing::Test {
 protected:
  // The answer to `method target`; status 0 where no route of user_data answers it.
  http_reply call(const std::string& method, const std::string& target,
                  const std::string& body = "") const {
    const auto req = user_data_request(method, target, body);
    auto answer = users_.handle(req, user_data_route(req));
    if (answer) return *answer;
    http_reply none;
    none.status = 0;
    return none;
  }
  json call_json(const std::string& method, const std::string& target,
                 const std::string& body = "") const {
    const auto r = call(method, target, body);
    EXPECT_EQ(r.status, 200u) << method << " " << target << ": " << r.body;
    return json::parse(user_data_bytes(r), nullptr, false);
  }
  // A listing, sorted (the directory's order is the file system's).
  json listing(const std::string& query) const {
    json out = call_json("GET", "/api/userdata?" + query);
    if (out.is_array()) std::sort(out.begin(), out.end());
    return out;
  }
  bool exists(const std::string& rel) const {
    std::error_code ec;
    return std::filesystem::exists(std::filesystem::symlink_status(t_ / rel, ec));
  }

  temp_tree t_;
  user_data users_{t_ / "user"};
};

TEST(split_target, keeps_an_encoded_slash_inside_its_segment_while_the_path_is_decoded) {
  http_request r;
  split_target("/api/userdata/a%2Fb/move/c%2Fd?overwrite=false", r);
  EXPECT_EQ(r.segments, (std::vector<std::string>{"api", "userdata", "a/b", "move", "c/d"}));
  EXPECT_EQ(r.path, "/api/userdata/a/b/move/c/d");
  EXPECT_EQ(r.query.at("overwrite"), "false");
}

TEST(split_target, gives_the_root_path_one_empty_segment) {
  http_request r;
  split_target("/", r);
  EXPECT_EQ(r.segments, std::vector<std::string>{""});
  EXPECT_EQ(r.path, "/");
}

TEST_F(user_data_test, users_says_the_storage_is_the_server_and_is_migrated) {
  EXPECT_EQ(call_json("GET", "/api/users"), (json{{"storage", "server"}, {"migrated", true}}));
  EXPECT_EQ(call_json("GET", "/users"), (json{{"storage", "server"}, {"migrated", true}}));
  EXPECT_TRUE(std::filesystem::is_directory(t_ / "user/default"));
}

TEST_F(user_data_test, routes_it_does_not_have_answer_nullopt) {
  EXPECT_EQ(call("GET", "/api/nothing").status, 0u);
  EXPECT_EQ(call("POST", "/api/users").status, 0u);
  EXPECT_EQ(call("PUT", "/api/userdata/a.json").status, 0u);
  EXPECT_EQ(call("GET", "/api/userdata/a.json/b/c").status, 0u);
  EXPECT_EQ(call("DELETE", "/api/settings").status, 0u);
}

TEST_F(user_data_test, a_posted_file_reads_back_byte_for_byte) {
  const std::string bytes = "a\0b\xff\r\n{}"s;
  const auto posted = call("POST", "/api/userdata/blob.bin", bytes);
  ASSERT_EQ(posted.status, 200u) << posted.body;
  EXPECT_EQ(json::parse(posted.body), "blob.bin");
  const auto got = call("GET", "/api/userdata/blob.bin");
  ASSERT_EQ(got.status, 200u);
  EXPECT_EQ(got.content_type, "application/octet-stream");
  EXPECT_EQ(user_data_bytes(got), bytes);
  EXPECT_EQ(t_.read("user/default/blob.bin"), bytes);
}

TEST_F(user_data_test, a_json_file_is_answered_as_json) {
  t_.file("user/default/a.json", "{\"x\":1}");
  const auto got = call("GET", "/userdata/a.json");
  ASSERT_EQ(got.status, 200u);
  EXPECT_EQ(got.content_type, "application/json");
  EXPECT_EQ(user_data_bytes(got), "{\"x\":1}");
}

TEST_F(user_data_test, an_encoded_slash_in_the_file_segment_makes_the_subdirectory) {
  const auto posted = call("POST", "/api/userdata/workflows%2Fa.json", "{}");
  ASSERT_EQ(posted.status, 200u) << posted.body;
  EXPECT_EQ(json::parse(posted.body), "workflows/a.json");
  EXPECT_TRUE(std::filesystem::is_directory(t_ / "user/default/workflows"));
  EXPECT_EQ(t_.read("user/default/workflows/a.json"), "{}");
  EXPECT_EQ(user_data_bytes(call("GET", "/api/userdata/workflows%2Fa.json")), "{}");
}

// A name that still holds a '%' is decoded once more, as ComfyUI's parse.unquote decodes it.
TEST_F(user_data_test, a_name_encoded_twice_is_decoded_once_more) {
  const auto posted = call("POST", "/api/userdata/a%2520b.json", "x");
  ASSERT_EQ(posted.status, 200u) << posted.body;
  EXPECT_EQ(json::parse(posted.body), "a b.json");
  EXPECT_EQ(t_.read("user/default/a b.json"), "x");
}

// A name still holding a '%' is decoded once more as ComfyUI's parse.unquote does, which keeps a
// '?' and a bare '%' (decoded as a request target, it had been cut at the '?').
TEST_F(user_data_test, a_name_holding_a_percent_sign_and_a_question_mark_keeps_both) {
  const auto posted = call("POST", "/api/userdata/50%25%20done%3F.json", "x");
  ASSERT_EQ(posted.status, 200u) << posted.body;
  EXPECT_EQ(json::parse(posted.body), "50% done?.json");
  EXPECT_EQ(t_.listing("user/default"), "50% done?.json");
}

TEST_F(user_data_test, a_post_without_overwrite_on_a_taken_name_is_409_and_keeps_the_file) {
  t_.file("user/default/a.json", "old");
  EXPECT_EQ(call("POST", "/api/userdata/a.json?overwrite=false", "new").status, 409u);
  EXPECT_EQ(t_.read("user/default/a.json"), "old");
  EXPECT_EQ(call("POST", "/api/userdata/b.json?overwrite=false", "new").status, 200u);
  EXPECT_EQ(call("POST", "/api/userdata/a.json", "newer").status, 200u);
  EXPECT_EQ(t_.read("user/default/a.json"), "newer");
}

TEST_F(user_data_test, a_post_with_full_info_answers_the_files_info) {
  json info = call_json("POST", "/api/userdata/workflows%2Fa.json?full_info=true", "12345");
  EXPECT_EQ(info["path"], "workflows/a.json");
  EXPECT_EQ(info["size"], 5);
  EXPECT_TRUE(info["modified"].is_number()) << info;
  EXPECT_TRUE(info["created"].is_number()) << info;
  EXPECT_GT(info["modified"].get<double>(), 0.0);
  EXPECT_EQ(info.size(), 4u) << info;
}

TEST_F(user_data_test, a_listing_without_recurse_names_the_files_of_the_directory_only) {
  t_.file("user/default/workflows/a.json", "a");
  t_.file("user/default/workflows/sub/b.json", "b");
  EXPECT_EQ(listing("dir=workflows"), (json{"a.json"}));
}

TEST_F(user_data_test, a_recursive_listing_names_relative_paths) {
  t_.file("user/default/workflows/a.json", "a");
  t_.file("user/default/workflows/sub/b.json", "b");
  t_.file("user/default/workflows/sub/deeper/c.json", "c");
  t_.file("user/default/other/x.json", "x");
  EXPECT_EQ(listing("dir=workflows&recurse=true"),
            (json{"a.json", "sub/b.json", "sub/deeper/c.json"}));
}

TEST_F(user_data_test, a_split_listing_gives_each_path_then_its_parts) {
  t_.file("user/default/workflows/a.json", "a");
  t_.file("user/default/workflows/sub/b.json", "b");
  EXPECT_EQ(listing("dir=workflows&recurse=true&split=true"),
            (json{json{"a.json", "a.json"}, json{"sub/b.json", "sub", "b.json"}}));
}

TEST_F(user_data_test, a_full_info_listing_gives_each_files_info) {
  t_.file("user/default/workflows/sub/b.json", "bb");
  json out = listing("dir=workflows&recurse=true&full_info=true");
  ASSERT_EQ(out.size(), 1u) << out;
  EXPECT_EQ(out[0]["path"], "sub/b.json");
  EXPECT_EQ(out[0]["size"], 2);
  EXPECT_TRUE(out[0]["modified"].is_number());
  EXPECT_TRUE(out[0]["created"].is_number());
}

TEST_F(user_data_test, a_listing_without_a_dir_is_400_and_of_an_absent_directory_404) {
  EXPECT_EQ(call("GET", "/api/userdata").status, 400u);
  EXPECT_EQ(call("GET", "/api/userdata?dir=").status, 400u);
  EXPECT_EQ(call("GET", "/api/userdata?dir=nope").status, 404u);
  t_.file("user/default/file.json", "x");
  EXPECT_EQ(call("GET", "/api/userdata?dir=file.json").status, 404u);
}

TEST_F(user_data_test, an_absent_file_is_404) {
  EXPECT_EQ(call("GET", "/api/userdata/nope.json").status, 404u);
  EXPECT_EQ(call("GET", "/api/userdata/nodir%2Fnope.json").status, 404u);
}

TEST_F(user_data_test, a_path_out_of_the_user_directory_is_403_and_writes_nothing) {
  t_.file("user/x.json", "outside");
  // Encoded once (one segment) or twice (decoded again, as ComfyUI does).
  const std::string abs = (t_ / "abs.json").string();
  std::string abs_encoded;
  for (char c : abs) abs_encoded += c == '/' ? std::string("%2F") : std::string(1, c);
  for (const std::string& file :
       {"..%2Fx.json"s, "..%252Fx.json"s, "a%2F..%2F..%2Fx.json"s, abs_encoded}) {
    EXPECT_EQ(call("POST", "/api/userdata/" + file, "bad").status, 403u) << file;
    EXPECT_EQ(call("GET", "/api/userdata/" + file).status, 403u) << file;
    EXPECT_EQ(call("DELETE", "/api/userdata/" + file).status, 403u) << file;
    EXPECT_EQ(call("POST", "/api/userdata/" + file + "/move/y.json").status, 403u) << file;
  }
  t_.file("user/default/in.json", "in");
  EXPECT_EQ(call("POST", "/api/userdata/in.json/move/..%2Fmoved.json").status, 403u);
  EXPECT_EQ(call("GET", "/api/userdata?dir=..").status, 403u);
  EXPECT_EQ(call("GET", "/api/userdata?dir=%2Fetc").status, 403u);
  EXPECT_EQ(t_.read("user/x.json"), "outside");
  EXPECT_EQ(t_.listing("user"), "default,x.json");
  EXPECT_FALSE(exists("abs.json"));
  EXPECT_EQ(t_.read("user/default/in.json"), "in");
}

TEST_F(user_data_test, a_symlink_in_the_user_directory_is_never_followed) {
  t_.file("outside/secret.json", "secret");
  t_.symlink(t_ / "outside/secret.json", "user/default/link.json");
  t_.symlink(t_ / "outside", "user/default/linkdir");
  for (const char* file : {"link.json", "linkdir%2Fsecret.json"}) {
    const auto got = call("GET", "/api/userdata/"s + file);
    EXPECT_TRUE(got.status == 403u || got.status == 404u) << file << ": " << got.status;
    EXPECT_EQ(got.file, nullptr) << file;
  }
  EXPECT_EQ(call("POST", "/api/userdata/linkdir%2Fnew.json", "x").status, 403u);
  EXPECT_EQ(call("GET", "/api/userdata?dir=linkdir").status, 403u);
  EXPECT_EQ(call("DELETE", "/api/userdata/link.json").status, 404u);
  EXPECT_EQ(call("POST", "/api/userdata/link.json/move/stolen.json").status, 404u);
  EXPECT_EQ(call("POST", "/api/userdata/linkdir%2Fsecret.json/move/stolen.json").status, 403u);
  EXPECT_EQ(t_.listing("outside"), "secret.json");
  EXPECT_EQ(t_.read("outside/secret.json"), "secret");
  EXPECT_TRUE(exists("user/default/link.json"));
  EXPECT_FALSE(exists("user/default/stolen.json"));
}

TEST_F(user_data_test, a_listing_leaves_symlinks_out) {
  t_.file("outside/secret.json", "secret");
  t_.file("user/default/workflows/real.json", "r");
  t_.symlink(t_ / "outside/secret.json", "user/default/workflows/link.json");
  t_.symlink(t_ / "outside", "user/default/workflows/linkdir");
  t_.symlink(t_ / "user/default/workflows/real.json", "user/default/workflows/inside.json");
  EXPECT_EQ(listing("dir=workflows&recurse=true"), (json{"real.json"}));
  EXPECT_EQ(listing("dir=workflows"), (json{"real.json"}));
}

// ComfyUI's glob leaves hidden names out; so does the listing (an upload's temporary file is
// one), in every subdirectory, and a hidden directory is not walked.
TEST_F(user_data_test, a_listing_leaves_hidden_files_and_directories_out) {
  t_.file("user/default/workflows/a.json", "a");
  t_.file("user/default/workflows/.upload-1234.tmp", "half");
  t_.file("user/default/workflows/sub/b.json", "b");
  t_.file("user/default/workflows/.cache/c.json", "c");
  EXPECT_EQ(listing("dir=workflows&recurse=true"), (json{"a.json", "sub/b.json"}));
}

TEST_F(user_data_test, delete_answers_204_and_removes_the_file) {
  t_.file("user/default/workflows/a.json", "a");
  const auto r = call("DELETE", "/api/userdata/workflows%2Fa.json");
  EXPECT_EQ(r.status, 204u) << r.body;
  EXPECT_FALSE(exists("user/default/workflows/a.json"));
}

TEST_F(user_data_test, delete_of_a_missing_file_or_a_directory_is_404) {
  t_.dir("user/default/workflows");
  EXPECT_EQ(call("DELETE", "/api/userdata/nope.json").status, 404u);
  EXPECT_EQ(call("DELETE", "/api/userdata/workflows").status, 404u);
  EXPECT_TRUE(std::filesystem::is_directory(t_ / "user/default/workflows"));
}

TEST_F(user_data_test, move_renames_the_file_and_answers_its_new_path) {
  t_.file("user/default/workflows/a.json", "a");
  json moved = call_json("POST", "/api/userdata/workflows%2Fa.json/move/archive%2Fb.json");
  EXPECT_EQ(moved, "archive/b.json");
  EXPECT_FALSE(exists("user/default/workflows/a.json"));
  EXPECT_EQ(t_.read("user/default/archive/b.json"), "a");
}

TEST_F(user_data_test, move_with_full_info_answers_the_moved_files_info) {
  t_.file("user/default/a.json", "abc");
  json info = call_json("POST", "/api/userdata/a.json/move/b.json?full_info=true");
  EXPECT_EQ(info["path"], "b.json");
  EXPECT_EQ(info["size"], 3);
}

TEST_F(user_data_test, move_without_overwrite_onto_a_taken_name_is_409_and_keeps_both) {
  t_.file("user/default/a.json", "a");
  t_.file("user/default/b.json", "b");
  EXPECT_EQ(call("POST", "/api/userdata/a.json/move/b.json?overwrite=false").status, 409u);
  EXPECT_EQ(t_.read("user/default/a.json"), "a");
  EXPECT_EQ(t_.read("user/default/b.json"), "b");
}

TEST_F(user_data_test, move_onto_a_taken_name_overwrites_it_by_default) {
  t_.file("user/default/a.json", "a");
  t_.file("user/default/b.json", "b");
  EXPECT_EQ(call("POST", "/api/userdata/a.json/move/b.json").status, 200u);
  EXPECT_FALSE(exists("user/default/a.json"));
  EXPECT_EQ(t_.read("user/default/b.json"), "a");
}

// Issue 55: a move onto a directory answered 500 (rename(2) refuses it); overwrite replaces a
// file, never a directory, so it is a conflict, and both are kept.
TEST_F(user_data_test, move_onto_a_directory_is_409_and_keeps_both) {
  t_.file("user/default/a.json", "a");
  t_.file("user/default/folder/inside.json", "i");
  const auto r = call("POST", "/api/userdata/a.json/move/folder");
  EXPECT_EQ(r.status, 409u) << r.body;
  EXPECT_EQ(t_.read("user/default/a.json"), "a");
  EXPECT_EQ(t_.read("user/default/folder/inside.json"), "i");
}

TEST_F(user_data_test, move_of_a_missing_file_is_404) {
  EXPECT_EQ(call("POST", "/api/userdata/nope.json/move/b.json").status, 404u);
  EXPECT_FALSE(exists("user/default/b.json"));
}

TEST_F(user_data_test, a_setting_set_by_id_reads_back_by_id_and_in_all_settings) {
  EXPECT_EQ(call("POST", "/api/settings/Comfy.Locale", "\"fr\"").status, 200u);
  EXPECT_EQ(call("POST", "/settings/Comfy.Grid", "{\"size\":10}").status, 200u);
  EXPECT_EQ(call_json("GET", "/api/settings/Comfy.Locale"), "fr");
  EXPECT_EQ(call_json("GET", "/settings/Comfy.Grid"), (json{{"size", 10}}));
  EXPECT_EQ(call_json("GET", "/api/settings"),
            (json{{"Comfy.Locale", "fr"}, {"Comfy.Grid", {{"size", 10}}}}));
  EXPECT_EQ(json::parse(t_.read("user/default/comfy.settings.json"))["Comfy.Locale"], "fr");
}

TEST_F(user_data_test, an_unset_setting_reads_as_null_and_no_settings_as_an_empty_object) {
  EXPECT_EQ(call_json("GET", "/api/settings"), json::object());
  EXPECT_EQ(call_json("GET", "/api/settings/Comfy.Nothing"), json(nullptr));
}

TEST_F(user_data_test, posting_an_object_to_settings_merges_it) {
  ASSERT_EQ(call("POST", "/api/settings", "{\"a\":1,\"b\":{\"c\":2}}").status, 200u);
  ASSERT_EQ(call("POST", "/api/settings", "{\"b\":3,\"d\":4}").status, 200u);
  EXPECT_EQ(call_json("GET", "/api/settings"), (json{{"a", 1}, {"b", 3}, {"d", 4}}));
}

TEST_F(user_data_test, posting_settings_that_are_not_an_object_is_400) {
  ASSERT_EQ(call("POST", "/api/settings", "{\"a\":1}").status, 200u);
  EXPECT_EQ(call("POST", "/api/settings", "[1,2]").status, 400u);
  EXPECT_EQ(call_json("GET", "/api/settings"), (json{{"a", 1}}));
}

TEST_F(user_data_test, a_settings_body_that_is_not_json_is_400_and_changes_nothing) {
  ASSERT_EQ(call("POST", "/api/settings/a", "1").status, 200u);
  EXPECT_EQ(call("POST", "/api/settings", "{not json").status, 400u);
  EXPECT_EQ(call("POST", "/api/settings/a", "nope").status, 400u);
  EXPECT_EQ(call("POST", "/api/settings/b", "").status, 400u);
  EXPECT_EQ(call_json("GET", "/api/settings"), (json{{"a", 1}}));
}

TEST_F(user_data_test, a_settings_file_that_is_not_json_reads_as_an_empty_object) {
  t_.file("user/default/comfy.settings.json", "{not json");
  EXPECT_EQ(call_json("GET", "/api/settings"), json::object());
  EXPECT_EQ(call_json("GET", "/api/settings/a"), json(nullptr));
  t_.file("user/default/comfy.settings.json", "[1, 2]");
  EXPECT_EQ(call_json("GET", "/api/settings"), json::object());
  // Never written over: what the user had stays for them to mend.
  EXPECT_EQ(call("POST", "/api/settings/b", "1").status, 500u);
  EXPECT_EQ(t_.read("user/default/comfy.settings.json"), "[1, 2]");
}

// A value nested to the reader's limit would be one level deeper in the file, and every later
// read would lose every setting: it is refused, and the settings stay readable.
TEST_F(user_data_test, a_setting_too_deep_to_read_back_is_refused_and_the_others_kept) {
  ASSERT_EQ(call("POST", "/api/settings/kept", "true").status, 200u);
  const std::string deep = std::string(256, '[') + std::string(256, ']');
  EXPECT_EQ(call("POST", "/api/settings/deep", deep).status, 400u);
  EXPECT_EQ(call_json("GET", "/api/settings"), json({{"kept", true}}));
  EXPECT_EQ(call("POST", "/api/settings/%FF", "1").status, 200u);  // no throw on a bad name
  EXPECT_EQ(call_json("GET", "/api/settings").value("kept", false), true);
}

}  // namespace
