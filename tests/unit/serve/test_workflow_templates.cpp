// workflow_templates: the official templates under /templates/, the packs' example workflows
// listed by /workflow_templates and served under /api/workflow_templates/<pack>/, as ComfyUI's
// server.py and app/custom_node_manager.py serve them, and never a file outside those folders.
#include "orch/serve/workflow_templates.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/serve/frontend_routes.hpp"
#include "orch/serve/user_data.hpp"
#include "temp_tree.hpp"

namespace {

using nlohmann::json;
using orch::serve::example_workflow_pack;
using orch::serve::example_workflow_pack_of;
using orch::serve::frontend_files;
using orch::serve::frontend_routes;
using orch::serve::http_reply;
using orch::serve::http_request;
using orch::serve::split_target;
using orch::serve::user_data;
using orch::serve::workflow_templates;
using orch::testing::read_fd;
using orch::testing::temp_tree;

std::optional<http_reply> get(const workflow_templates& templates, const std::string& target) {
  http_request r;
  r.method = "GET";
  split_target(target, r);
  return templates.handle(r);
}

// The body of a 200 answer, or a failure naming the target.
std::string fetched(const workflow_templates& templates, const std::string& target) {
  const auto r = get(templates, target);
  if (!r || r->status != 200 || !r->file) {
    ADD_FAILURE() << target << ": " << (r ? std::to_string(r->status) : "no answer");
    return {};
  }
  return read_fd(r->file->get());
}

unsigned status_of(const workflow_templates& templates, const std::string& target) {
  const auto r = get(templates, target);
  return r ? r->status : 0;
}

std::vector<example_workflow_pack> packs(const temp_tree& t, std::vector<std::string> names) {
  std::vector<example_workflow_pack> out;
  for (const auto& name : names) {
    auto found = example_workflow_pack_of(t / ("custom_nodes/" + name), name);
    EXPECT_TRUE(found) << name;
    if (found) out.push_back(*found);
  }
  return out;
}

TEST(workflow_templates, the_official_files_are_served_under_templates_with_their_types) {
  temp_tree t;
  t.file("templates/index.json", "[]");
  t.file("templates/index.fr.json", "[1]");
  t.file("templates/flux_dev-1.webp", "webp");
  t.file("templates/audio-1.mp3", "mp3");
  t.file("templates/logo/bfl.png", "png");
  const workflow_templates templates(t / "templates");
  EXPECT_EQ(fetched(templates, "/templates/index.json"), "[]");
  EXPECT_EQ(fetched(templates, "/templates/index.fr.json"), "[1]");
  EXPECT_EQ(fetched(templates, "/templates/logo/bfl.png"), "png");
  EXPECT_EQ(get(templates, "/templates/index.json")->content_type, "application/json");
  EXPECT_EQ(get(templates, "/templates/flux_dev-1.webp")->content_type, "image/webp");
  EXPECT_EQ(get(templates, "/templates/audio-1.mp3")->content_type, "audio/mpeg");
  EXPECT_EQ(get(templates, "/templates/logo/bfl.png")->content_type, "image/png");
}

// The media parts are optional (scripts/pypi-pins-template-media.txt): a thumbnail that is not
// there is a 404, as on a ComfyUI without them, and so is everything without a directory.
TEST(workflow_templates, a_missing_file_or_directory_is_a_404) {
  temp_tree t;
  t.file("templates/index.json", "[]");
  const workflow_templates templates(t / "templates");
  EXPECT_EQ(status_of(templates, "/templates/flux_dev-1.webp"), 404u);
  EXPECT_EQ(status_of(templates, "/templates/logo"), 404u);
  EXPECT_EQ(status_of(templates, "/templates/"), 404u);
  const workflow_templates none;
  EXPECT_EQ(status_of(none, "/templates/index.json"), 404u);
  const workflow_templates gone(t / "nowhere");
  EXPECT_EQ(status_of(gone, "/templates/index.json"), 404u);
}

TEST(workflow_templates, nothing_outside_the_templates_directory_is_served) {
  temp_tree t;
  t.file("secret.txt", "secret");
  t.file("templates/index.json", "[]");
  t.file("templates/.wheels", "wheels");
  t.file("elsewhere/index.json", "outside");
  t.symlink(t / "secret.txt", "templates/linked.json");
  t.symlink(t / "elsewhere", "templates/logo");
  const workflow_templates templates(t / "templates");
  for (const char* target :
       {"/templates/../secret.txt", "/templates/linked.json", "/templates/logo/index.json",
        "/templates/.wheels", "/templates/%2E%2E/secret.txt"}) {
    const auto r = get(templates, target);
    EXPECT_TRUE(!r || r->status == 404u) << target;
    EXPECT_TRUE(!r || !r->file) << target;
  }
}

TEST(workflow_templates, templates_is_no_route_under_api_and_other_methods_are_not_answered) {
  temp_tree t;
  t.file("templates/index.json", "[]");
  const workflow_templates templates(t / "templates");
  EXPECT_FALSE(get(templates, "/api/templates/index.json"));
  http_request post;
  post.method = "POST";
  split_target("/templates/index.json", post);
  EXPECT_FALSE(templates.handle(post));
  EXPECT_FALSE(get(templates, "/assets/app.js"));
}

// ComfyUI's listing: each pack directory's name, the `*.json` of its example folders without
// `.json` (splitext: only the last), in the folders' order; packs with none left out.
TEST(workflow_templates, the_listing_names_each_packs_example_workflows_as_comfyui_does) {
  temp_tree t;
  t.file("custom_nodes/A/example_workflows/b.json", "{}");
  t.file("custom_nodes/A/example_workflows/a.v2.json", "{}");
  t.file("custom_nodes/A/example_workflows/a.jpg", "jpg");
  t.file("custom_nodes/A/example_workflows/notes.txt", "");
  t.file("custom_nodes/A/example_workflows/nested/deep.json", "{}");
  t.file("custom_nodes/A/workflows/later.json", "{}");
  t.file("custom_nodes/B/examples/x.json", "{}");
  t.file("custom_nodes/C/workflow/y.json", "{}");
  t.file("custom_nodes/D/example/z.json", "{}");
  t.file("custom_nodes/E/docs/w.json", "{}");
  const workflow_templates templates(std::nullopt, packs(t, {"A", "B", "C", "D", "E"}));
  const json expected = {{"A", {"a.v2", "b", "later"}}, {"B", {"x"}}, {"C", {"y"}}, {"D", {"z"}}};
  EXPECT_EQ(templates.listing(), expected);
  for (const char* target : {"/workflow_templates", "/api/workflow_templates"}) {
    const auto r = get(templates, target);
    ASSERT_TRUE(r) << target;
    EXPECT_EQ(r->status, 200u);
    EXPECT_EQ(r->content_type, "application/json");
    EXPECT_EQ(json::parse(r->body), expected) << target;
  }
}

TEST(workflow_templates, a_packs_files_are_served_under_api_by_its_directorys_name) {
  temp_tree t;
  t.file("custom_nodes/A/example_workflows/b.json", "{\"b\":1}");
  t.file("custom_nodes/A/example_workflows/b.jpg", "jpg");
  t.file("custom_nodes/A/example_workflows/more/c.json", "c");
  const workflow_templates templates(std::nullopt, packs(t, {"A"}));
  EXPECT_EQ(fetched(templates, "/api/workflow_templates/A/b.json"), "{\"b\":1}");
  EXPECT_EQ(get(templates, "/api/workflow_templates/A/b.json")->content_type, "application/json");
  EXPECT_EQ(fetched(templates, "/api/workflow_templates/A/b.jpg"), "jpg");
  EXPECT_EQ(get(templates, "/api/workflow_templates/A/b.jpg")->content_type, "image/jpeg");
  EXPECT_EQ(fetched(templates, "/api/workflow_templates/A/more/c.json"), "c");
  EXPECT_EQ(status_of(templates, "/api/workflow_templates/A/none.json"), 404u);
  EXPECT_EQ(status_of(templates, "/api/workflow_templates/Other/b.json"), 404u);
  EXPECT_EQ(status_of(templates, "/api/workflow_templates/A"), 404u);
  // ComfyUI adds the packs' static routes under /api alone.
  EXPECT_FALSE(get(templates, "/workflow_templates/A/b.json"));
}

// ComfyUI lists every example folder's workflows but serves only the first folder a pack has;
// serve looks in each, so every name listed can be fetched, and lists a name once.
TEST(workflow_templates, every_listed_workflow_can_be_fetched_from_whichever_folder_holds_it) {
  temp_tree t;
  t.file("custom_nodes/A/example_workflows/same.json", "first");
  t.file("custom_nodes/A/examples/same.json", "second");
  t.file("custom_nodes/A/examples/only_here.json", "here");
  const workflow_templates templates(std::nullopt, packs(t, {"A"}));
  EXPECT_EQ(templates.listing(), (json{{"A", {"same", "only_here"}}}));
  EXPECT_EQ(fetched(templates, "/api/workflow_templates/A/same.json"), "first");
  EXPECT_EQ(fetched(templates, "/api/workflow_templates/A/only_here.json"), "here");
}

TEST(workflow_templates, names_with_dots_spaces_and_unicode_are_listed_and_served) {
  temp_tree t;
  t.file("custom_nodes/Pack é/example_workflows/café 1.0.json", "unicode");
  t.file("custom_nodes/Pack é/example_workflows/bad\xff.json", "not utf-8");
  const workflow_templates templates(std::nullopt, packs(t, {"Pack é"}));
  EXPECT_EQ(templates.listing(), (json{{"Pack é", {"café 1.0"}}}));
  EXPECT_EQ(fetched(templates, "/api/workflow_templates/Pack%20%C3%A9/caf%C3%A9%201.0.json"),
            "unicode");
}

// A symlink in a pack's example folder, or the folder itself a symlink, reaches nothing; hidden
// names are neither listed nor served (ComfyUI's glob leaves them out).
TEST(workflow_templates, a_symlink_or_a_hidden_name_in_a_pack_is_neither_listed_nor_served) {
  temp_tree t;
  t.file("secret/passwd.json", "secret");
  t.file("custom_nodes/A/example_workflows/ok.json", "ok");
  t.file("custom_nodes/A/example_workflows/.hidden.json", "hidden");
  t.symlink(t / "secret/passwd.json", "custom_nodes/A/example_workflows/linked.json");
  t.symlink(t / "secret", "custom_nodes/A/examples");
  t.symlink(t / "secret", "custom_nodes/A/example_workflows/sub");
  const workflow_templates templates(std::nullopt, packs(t, {"A"}));
  EXPECT_EQ(templates.listing(), (json{{"A", {"ok"}}}));
  for (const char* target :
       {"/api/workflow_templates/A/linked.json", "/api/workflow_templates/A/passwd.json",
        "/api/workflow_templates/A/sub/passwd.json", "/api/workflow_templates/A/.hidden.json",
        "/api/workflow_templates/A/../../../secret/passwd.json"}) {
    const auto r = get(templates, target);
    EXPECT_TRUE(!r || r->status == 404u) << target;
    EXPECT_TRUE(!r || !r->file) << target;
  }
}

// As a pack's web directory (issue 55): a pack directory replaced by a symlink while serve runs
// (its worker could do it) is no longer served, nor listed.
TEST(workflow_templates, a_pack_directory_swapped_for_a_symlink_is_no_longer_served) {
  temp_tree t;
  t.file("custom_nodes/A/example_workflows/ok.json", "ok");
  t.file("secret/example_workflows/passwd.json", "secret");
  const workflow_templates templates(std::nullopt, packs(t, {"A"}));
  ASSERT_EQ(fetched(templates, "/api/workflow_templates/A/ok.json"), "ok");
  std::filesystem::rename(t / "custom_nodes/A", t / "custom_nodes/A.old");
  std::filesystem::create_directory_symlink(t / "secret", t / "custom_nodes/A");
  EXPECT_EQ(status_of(templates, "/api/workflow_templates/A/passwd.json"), 404u);
  EXPECT_EQ(templates.listing(), json::object());
}

TEST(workflow_templates, a_pack_that_is_no_directory_is_not_taken) {
  temp_tree t;
  t.file("custom_nodes/file.py", "");
  EXPECT_FALSE(example_workflow_pack_of(t / "custom_nodes/file.py", "file"));
  EXPECT_FALSE(example_workflow_pack_of(t / "custom_nodes/missing", "missing"));
}

// Through frontend_routes: /templates/ is answered before the frontend's own files (ComfyUI adds
// its route ahead of the web root's), so a frontend file of that name is never served there.
TEST(workflow_templates, frontend_routes_answer_templates_before_the_frontends_files) {
  temp_tree t;
  t.file("web/index.html", "index");
  t.file("web/templates/index.json", "the frontend's");
  t.file("templates/index.json", "[\"official\"]");
  t.file("custom_nodes/A/example_workflows/w.json", "{}");
  const frontend_routes routes(frontend_files(t / "web"), user_data(t / "user"), 1,
                               workflow_templates(t / "templates", packs(t, {"A"})));
  http_request r;
  r.method = "GET";
  split_target("/templates/index.json", r);
  const auto index = routes.handle(r);
  ASSERT_TRUE(index && index->file);
  EXPECT_EQ(read_fd(index->file->get()), "[\"official\"]");
  http_request listing;
  listing.method = "GET";
  split_target("/api/workflow_templates", listing);
  const auto answer = routes.handle(listing);
  ASSERT_TRUE(answer);
  EXPECT_EQ(json::parse(answer->body), (json{{"A", {"w"}}}));
}

}  // namespace
