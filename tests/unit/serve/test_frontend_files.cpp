// frontend_files and frontend_routes: the frontend's own files (GET /, their MIME types, the
// extensions listing), never reached outside its root, and the routes the frontend reads at
// start answered in ComfyUI's shapes.
#include "orch/serve/frontend_files.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "orch/serve/frontend_routes.hpp"
#include "orch/serve/user_data.hpp"
#include "temp_tree.hpp"

namespace {

using nlohmann::json;
using orch::serve::frontend_content_type;
using orch::serve::frontend_files;
using orch::serve::frontend_routes;
using orch::serve::http_reply;
using orch::serve::http_request;
using orch::serve::server_feature_flags;
using orch::serve::split_target;
using orch::serve::user_data;
using orch::testing::read_fd;
using orch::testing::temp_tree;

std::string frontend_bytes(const http_reply& r) {
  return r.file ? read_fd(r.file->get()) : r.body;
}

std::string frontend_header(const http_reply& r, const std::string& name) {
  for (const auto& [n, v] : r.headers)
    if (n == name) return v;
  return {};
}

class frontend_files_test : public ::testing::Test {
 protected:
  frontend_files_test() {
    t_.file("web/index.html", "<!doctype html>index");
    t_.file("web/assets/app.js", "app()");
    t_.file("web/assets/style.css", "body{}");
    t_.file("web/fonts/f.woff2", "font");
    t_.file("secret.txt", "secret");
  }
  frontend_files files() const { return frontend_files(t_ / "web"); }

  temp_tree t_;
};

TEST(frontend_files, content_types_follow_the_extension) {
  EXPECT_EQ(frontend_content_type("a.js"), "application/javascript; charset=utf-8");
  EXPECT_EQ(frontend_content_type("a.MJS"), "application/javascript; charset=utf-8");
  EXPECT_EQ(frontend_content_type("a.css"), "text/css; charset=utf-8");
  EXPECT_EQ(frontend_content_type("a.html"), "text/html; charset=utf-8");
  EXPECT_EQ(frontend_content_type("a.svg"), "image/svg+xml");
  EXPECT_EQ(frontend_content_type("a.woff2"), "font/woff2");
  EXPECT_EQ(frontend_content_type("a.wasm"), "application/wasm");
  EXPECT_EQ(frontend_content_type("a.png"), "image/png");
  EXPECT_EQ(frontend_content_type("a.unknown"), "application/octet-stream");
}

TEST_F(frontend_files_test, the_root_path_answers_index_html_uncached_as_html) {
  for (const char* path : {"/", "/index.html"}) {
    const auto r = files().get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200u);
    EXPECT_EQ(r->content_type.rfind("text/html", 0), 0u) << r->content_type;
    EXPECT_EQ(frontend_header(*r, "Cache-Control"), "no-cache");
    EXPECT_EQ(frontend_bytes(*r), "<!doctype html>index");
  }
}

TEST_F(frontend_files_test, a_script_is_served_as_javascript) {
  const auto r = files().get("/assets/app.js");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200u);
  EXPECT_EQ(r->content_type.rfind("application/javascript", 0), 0u) << r->content_type;
  EXPECT_EQ(frontend_bytes(*r), "app()");
  EXPECT_EQ(frontend_header(*r, "Cache-Control"), "");
}

TEST_F(frontend_files_test, a_stylesheet_is_served_as_css_and_a_font_as_woff2) {
  const auto css = files().get("/assets/style.css");
  ASSERT_TRUE(css);
  EXPECT_EQ(css->content_type.rfind("text/css", 0), 0u) << css->content_type;
  EXPECT_EQ(frontend_bytes(*css), "body{}");
  const auto font = files().get("/fonts/f.woff2");
  ASSERT_TRUE(font);
  EXPECT_EQ(font->content_type, "font/woff2");
}

TEST_F(frontend_files_test, an_absent_file_or_a_directory_is_not_served) {
  EXPECT_FALSE(files().get("/nope.js"));
  EXPECT_FALSE(files().get("/assets"));
  EXPECT_FALSE(files().get("/assets/"));
}

TEST_F(frontend_files_test, a_path_out_of_the_root_is_not_served) {
  for (const char* path : {"/../secret.txt", "/assets/../../secret.txt", "//secret.txt"})
    EXPECT_FALSE(files().get(path)) << path;
}

TEST_F(frontend_files_test, a_symlink_inside_the_root_is_not_served) {
  t_.symlink(t_ / "secret.txt", "web/leak.txt");
  t_.symlink(t_.root(), "web/up");
  t_.symlink(t_ / "web/assets/app.js", "web/alias.js");
  for (const char* path : {"/leak.txt", "/up/secret.txt", "/alias.js"})
    EXPECT_FALSE(files().get(path)) << path;
}

TEST(frontend_files, without_a_root_the_root_path_is_a_404_page_that_says_how_to_get_one) {
  const frontend_files none(std::nullopt);
  for (const char* path : {"/", "/index.html"}) {
    const auto r = none.get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 404u);
    EXPECT_EQ(r->content_type.rfind("text/html", 0), 0u) << r->content_type;
    EXPECT_NE(r->body.find("scripts/install-deps"), std::string::npos) << r->body;
    EXPECT_NE(r->body.find("--front-end-root"), std::string::npos) << r->body;
  }
}

TEST(frontend_files, without_a_root_no_other_path_is_served_and_no_extension_is_listed) {
  const frontend_files none(std::nullopt);
  EXPECT_FALSE(none.get("/assets/app.js"));
  EXPECT_FALSE(none.get("/extensions/core/a.js"));
  EXPECT_EQ(none.extensions(), json::array());
}

TEST_F(frontend_files_test, extensions_lists_every_script_under_extensions_sorted_as_urls) {
  t_.file("web/extensions/core/widgets.js", "w");
  t_.file("web/extensions/core/a.js", "a");
  t_.file("web/extensions/b.js", "b");
  t_.file("web/extensions/core/readme.md", "r");
  t_.file("web/extensions/core/style.css", "c");
  t_.file("web/assets/not_an_extension.js", "n");
  EXPECT_EQ(files().extensions(),
            (json{"/extensions/b.js", "/extensions/core/a.js", "/extensions/core/widgets.js"}));
}

TEST_F(frontend_files_test, extensions_leaves_symlinks_out) {
  t_.file("web/extensions/b.js", "b");
  t_.file("elsewhere/z.js", "z");
  t_.symlink(t_ / "web/extensions/b.js", "web/extensions/alias.js");
  t_.symlink(t_ / "elsewhere", "web/extensions/linked");
  EXPECT_EQ(files().extensions(), (json{"/extensions/b.js"}));
}

TEST_F(frontend_files_test, extensions_is_empty_where_the_root_has_no_extensions_directory) {
  EXPECT_EQ(files().extensions(), json::array());
}

// frontend_routes, with the files above, a user directory and an upload limit of 12345.
class frontend_routes_test : public frontend_files_test {
 protected:
  std::optional<http_reply> call(const std::string& method, const std::string& target) const {
    http_request r;
    r.method = method;
    split_target(target, r);
    return routes_.handle(r);
  }
  json call_json(const std::string& target) const {
    const auto r = call("GET", target);
    if (!r) {
      ADD_FAILURE() << target << ": no answer";
      return nullptr;
    }
    EXPECT_EQ(r->status, 200u) << target;
    EXPECT_EQ(r->content_type, "application/json") << target;
    return json::parse(r->body, nullptr, false);
  }

  frontend_routes routes_{files(), user_data(t_ / "user"), 12345};
};

TEST_F(frontend_routes_test, a_path_under_api_is_never_a_static_file) {
  t_.file("web/api/index.html", "not for /api");
  t_.file("web/api/x.js", "not for /api");
  EXPECT_FALSE(call("GET", "/api/index.html"));
  EXPECT_FALSE(call("GET", "/api/x.js"));
  EXPECT_FALSE(call("GET", "/api/"));
  EXPECT_FALSE(call("GET", "/api"));
}

TEST_F(frontend_routes_test, the_frontends_files_are_served_outside_api) {
  const auto index = call("GET", "/");
  ASSERT_TRUE(index);
  EXPECT_EQ(frontend_bytes(*index), "<!doctype html>index");
  const auto script = call("GET", "/assets/app.js");
  ASSERT_TRUE(script);
  EXPECT_EQ(frontend_bytes(*script), "app()");
  EXPECT_FALSE(call("GET", "/nope.js"));
}

TEST_F(frontend_routes_test, extensions_answers_the_listing_with_or_without_api) {
  t_.file("web/extensions/core/a.js", "a");
  EXPECT_EQ(call_json("/api/extensions"), (json{"/extensions/core/a.js"}));
  EXPECT_EQ(call_json("/extensions"), (json{"/extensions/core/a.js"}));
  const auto file = call("GET", "/extensions/core/a.js");
  ASSERT_TRUE(file);
  EXPECT_EQ(frontend_bytes(*file), "a");
}

TEST_F(frontend_routes_test, i18n_answers_an_empty_object) {
  EXPECT_EQ(call_json("/api/i18n"), json::object());
  EXPECT_EQ(call_json("/i18n"), json::object());
}

TEST_F(frontend_routes_test, features_answers_the_upload_limit_given) {
  const json expected = {{"supports_preview_metadata", true}, {"max_upload_size", 12345}};
  EXPECT_EQ(call_json("/api/features"), expected);
  EXPECT_EQ(server_feature_flags(7)["max_upload_size"], 7);
}

TEST_F(frontend_routes_test, raw_logs_answer_no_entries_and_a_terminal_size) {
  const json expected = {{"entries", json::array()}, {"size", {{"cols", 80}, {"rows", 24}}}};
  EXPECT_EQ(call_json("/internal/logs/raw"), expected);
  EXPECT_EQ(call_json("/api/internal/logs/raw"), expected);
  EXPECT_EQ(call_json("/internal/logs"), "");
}

TEST_F(frontend_routes_test, what_serve_has_none_of_answers_comfyuis_empty_shapes) {
  EXPECT_EQ(call_json("/api/embeddings"), json::array());
  EXPECT_EQ(call_json("/api/models"), json::array());
  EXPECT_EQ(call_json("/api/experiment/models"), json::array());
  EXPECT_EQ(call_json("/api/workflow_templates"), json::object());
  EXPECT_EQ(call_json("/api/internal/folder_paths"), json::object());
  for (const char* target : {"/api/models/checkpoints", "/api/experiment/models/loras",
                             "/api/view_metadata/loras"}) {
    const auto r = call("GET", target);
    ASSERT_TRUE(r) << target;
    EXPECT_EQ(r->status, 404u) << target;
  }
}

TEST_F(frontend_routes_test, a_post_to_a_get_only_route_answers_nullopt) {
  for (const char* target : {"/api/features", "/api/extensions", "/api/i18n",
                             "/internal/logs/raw", "/", "/assets/app.js", "/api/users"})
    EXPECT_FALSE(call("POST", target)) << target;
}

TEST_F(frontend_routes_test, the_users_data_is_reached_through_the_routes) {
  EXPECT_EQ(call_json("/api/users"), (json{{"storage", "server"}, {"migrated", true}}));
  t_.file("user/default/workflows/a.json", "{}");
  const auto r = call("GET", "/api/userdata/workflows%2Fa.json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200u);
  EXPECT_EQ(frontend_bytes(*r), "{}");
  const auto removed = call("DELETE", "/api/userdata/workflows%2Fa.json");
  ASSERT_TRUE(removed);
  EXPECT_EQ(removed->status, 204u);
}

}  // namespace
