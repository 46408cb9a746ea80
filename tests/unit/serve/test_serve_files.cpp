// serve_files: GET /view and POST /upload/image as requests reach them from the server (the
// target percent-decoded by split_target), answered in ComfyUI's shapes and statuses, and never
// reaching outside the input, output and temp directories.
#include "orch/serve/serve_files.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "temp_tree.hpp"

namespace {

using namespace std::string_literals;
using nlohmann::json;
using orch::serve::content_type_of;
using orch::serve::file_directories;
using orch::serve::file_routes;
using orch::serve::http_reply;
using orch::serve::http_request;
using orch::testing::read_fd;
using orch::testing::temp_tree;

const std::string boundary = "----orchTestBoundary7MA4YWxk";

// One part of a form: a field, or a file when `filename` is given.
struct field {
  std::string name;
  std::string value;
  std::string filename;
};

std::string form(const std::vector<field>& fields) {
  std::string body;
  for (const auto& f : fields) {
    body += "--" + boundary + "\r\nContent-Disposition: form-data; name=\"" + f.name + "\"";
    if (!f.filename.empty()) body += "; filename=\"" + f.filename + "\"\r\nContent-Type: image/png";
    body += "\r\n\r\n" + f.value + "\r\n";
  }
  return body + "--" + boundary + "--\r\n";
}

class serve_files_test : public ::testing::Test {
 protected:
  serve_files_test() {
    t_.dir("input");
    t_.dir("output");
    t_.dir("temp");
  }
  file_routes routes() const {
    return file_routes({t_ / "input", t_ / "output", t_ / "temp", t_ / "user"});
  }

  // GET <target>, as the server hands it on.
  http_reply view(const std::string& target) const {
    http_request r;
    r.method = "GET";
    orch::serve::split_target(target, r);
    return routes().view(r);
  }
  http_reply upload(const std::vector<field>& fields) const {
    return upload_body(form(fields), "multipart/form-data; boundary=" + boundary);
  }
  http_reply upload_body(const std::string& body, const std::string& content_type) const {
    http_request r;
    r.method = "POST";
    r.path = "/upload/image";
    r.body = body;
    r.content_type = content_type;
    return routes().upload_image(r);
  }
  static std::string bytes(const http_reply& r) {
    return r.file ? read_fd(r.file->get()) : std::string("<no file>");
  }
  static std::string header(const http_reply& r, const std::string& name) {
    for (const auto& [n, v] : r.headers)
      if (n == name) return v;
    return {};
  }

  temp_tree t_;
};

TEST(serve_files, content_types_follow_the_extension) {
  EXPECT_EQ(content_type_of("a.png"), "image/png");
  EXPECT_EQ(content_type_of("a.JPG"), "image/jpeg");
  EXPECT_EQ(content_type_of("a.jpeg"), "image/jpeg");
  EXPECT_EQ(content_type_of("a.webp"), "image/webp");
  EXPECT_EQ(content_type_of("a.gif"), "image/gif");
  EXPECT_EQ(content_type_of("a.json"), "application/json");
  EXPECT_EQ(content_type_of("a.txt"), "text/plain");
  EXPECT_EQ(content_type_of("a.mp4"), "video/mp4");
  EXPECT_EQ(content_type_of("a.webm"), "video/webm");
  EXPECT_EQ(content_type_of("a.wav"), "audio/wav");
  EXPECT_EQ(content_type_of("a.flac"), "audio/flac");
  EXPECT_EQ(content_type_of("a.safetensors"), "application/octet-stream");
  EXPECT_EQ(content_type_of("png"), "application/octet-stream");
}

TEST_F(serve_files_test, view_answers_the_file_with_its_type_and_name) {
  t_.file("output/a.png", "png bytes");
  t_.file("output/sub/dir/b.webp", "webp bytes");
  t_.file("input/c.json", "{}");
  t_.file("temp/d.txt", "temp");
  auto r = view("/view?filename=a.png");
  EXPECT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.content_type, "image/png");
  EXPECT_EQ(header(r, "Content-Disposition"), "filename=\"a.png\"");
  EXPECT_EQ(header(r, "X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(bytes(r), "png bytes");
  EXPECT_EQ(bytes(view("/view?filename=b.webp&subfolder=sub/dir&type=output")), "webp bytes");
  EXPECT_EQ(bytes(view("/view?filename=b.webp&subfolder=sub%2Fdir")), "webp bytes");
  EXPECT_EQ(bytes(view("/view?filename=c.json&type=input")), "{}");
  EXPECT_EQ(bytes(view("/view?filename=d.txt&type=temp")), "temp");
  // ComfyUI's annotated names (preview= and channel=: test_view_image.cpp).
  EXPECT_EQ(bytes(view("/view?filename=c.json%20%5Binput%5D")), "{}");
  // ComfyUI serves the last component of a file name from the subfolder.
  EXPECT_EQ(bytes(view("/view?filename=sub/a.png")), "png bytes");
}

TEST_F(serve_files_test, view_refuses_bad_requests_with_400_and_absent_files_with_404) {
  t_.file("output/a.png", "x");
  t_.dir("output/adir");
  EXPECT_EQ(view("/view").status, 400u);
  EXPECT_EQ(view("/view?filename=").status, 400u);
  EXPECT_EQ(view("/view?filename=a.png&type=models").status, 400u);
  EXPECT_EQ(view("/view?filename=b.png").status, 404u);
  EXPECT_EQ(view("/view?filename=a.png&subfolder=nope").status, 404u);
  EXPECT_EQ(view("/view?filename=adir").status, 404u);
  EXPECT_EQ(view("/view?filename=a.png&type=input").status, 404u);
  const json body = json::parse(view("/view?filename=b.png").body);
  EXPECT_TRUE(body["error"].is_string());
}

TEST_F(serve_files_test, view_refuses_every_way_out_of_the_directory) {
  t_.file("secret.txt", "secret");
  t_.file("output/a.png", "x");
  t_.symlink(t_ / "secret.txt", "output/link.png");
  t_.symlink(t_.root(), "output/up");
  // The file name: '..', absolute, NUL (ComfyUI: 400); percent-encoded as a client may send it.
  for (const char* target : {"/view?filename=../secret.txt", "/view?filename=%2e%2e%2fsecret.txt",
                             "/view?filename=%2E%2E/secret.txt", "/view?filename=..",
                             "/view?filename=/etc/passwd", "/view?filename=%2fetc%2fpasswd",
                             "/view?filename=a.png%00.txt", "/view?filename=x/../../secret.txt"})
    EXPECT_EQ(view(target).status, 400u) << target;
  // The subfolder (ComfyUI: 403), and symlinks of either (403).
  for (const char* target :
       {"/view?filename=secret.txt&subfolder=..", "/view?filename=secret.txt&subfolder=%2e%2e",
        "/view?filename=passwd&subfolder=/etc", "/view?filename=passwd&subfolder=%2Fetc",
        "/view?filename=secret.txt&subfolder=a/../..", "/view?filename=x&subfolder=a%00b",
        "/view?filename=link.png", "/view?filename=secret.txt&subfolder=up",
        "/view?filename=a.png&subfolder=up/output"})
    EXPECT_EQ(view(target).status, 403u) << target;
}

TEST_F(serve_files_test, view_puts_no_client_bytes_into_a_header_line) {
  t_.file("output/a\"\r\nX-Injected: 1.png", "x");
  const auto r = view("/view?filename=a%22%0d%0aX-Injected:%201.png");
  EXPECT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(header(r, "Content-Disposition"), "filename=\"a___X-Injected: 1.png\"");
}

TEST_F(serve_files_test, an_upload_is_stored_and_answered_in_comfyuis_shape) {
  auto r = upload({{"image", "png bytes", "cat.png"}});
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(json::parse(r.body), (json{{"name", "cat.png"}, {"subfolder", ""}, {"type", "input"}}));
  EXPECT_EQ(t_.read("input/cat.png"), "png bytes");
  // Again with other bytes: renamed; with overwrite ("true" or "1"): the same name.
  EXPECT_EQ(json::parse(upload({{"image", "other", "cat.png"}}).body)["name"], "cat (1).png");
  EXPECT_EQ(
      json::parse(upload({{"image", "third", "cat.png"}, {"overwrite", "1", ""}}).body)["name"],
      "cat.png");
  EXPECT_EQ(
      json::parse(upload({{"image", "4th", "cat.png"}, {"overwrite", "true", ""}}).body)["name"],
      "cat.png");
  EXPECT_EQ(t_.read("input/cat.png"), "4th");
  EXPECT_EQ(
      json::parse(upload({{"image", "5th", "cat.png"}, {"overwrite", "false", ""}}).body)["name"],
      "cat (2).png");
  // Into a subfolder (made) of another directory.
  r = upload({{"image", "o", "o.png"}, {"subfolder", "new/deep", ""}, {"type", "output", ""}});
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(json::parse(r.body),
            (json{{"name", "o.png"}, {"subfolder", "new/deep"}, {"type", "output"}}));
  EXPECT_EQ(t_.read("output/new/deep/o.png"), "o");
  EXPECT_EQ(upload({{"image", "t", "t.png"}, {"type", "temp", ""}}).status, 200u);
  EXPECT_EQ(t_.read("temp/t.png"), "t");
  // What was uploaded is what /view answers.
  EXPECT_EQ(bytes(view("/view?filename=o.png&subfolder=new/deep")), "o");
}

TEST_F(serve_files_test, an_upload_that_is_no_form_with_an_image_file_gets_400) {
  EXPECT_EQ(upload_body("x", "application/json").status, 400u);
  EXPECT_EQ(upload_body(form({{"image", "x", "a.png"}}), "multipart/form-data").status, 400u);
  EXPECT_EQ(upload_body("--" + boundary + "\r\nContent-Disposition: form-data; name=\"image\"",
                        "multipart/form-data; boundary=" + boundary)
                .status,
            400u);
  EXPECT_EQ(upload({}).status, 400u);
  EXPECT_EQ(upload({{"image", "not a file", ""}}).status, 400u);
  EXPECT_EQ(upload({{"picture", "x", "a.png"}}).status, 400u);
  EXPECT_EQ(upload({{"image", "x", "a.png"}, {"type", "models", ""}}).status, 400u);
  EXPECT_EQ(t_.listing("input"), "");
}

TEST_F(serve_files_test, an_upload_refuses_every_way_out_of_the_directory) {
  t_.dir("outside");
  t_.symlink(t_ / "outside", "input/out");
  t_.symlink(t_ / "outside/x.png", "input/x.png");
  // The file name (400), with the names a client could send.
  for (const char* name : {"../x.png", "..", ".", "/tmp/x.png", "a/b.png"})
    EXPECT_EQ(upload({{"image", "x", name}}).status, 400u) << name;
  const std::string nul_name = "--" + boundary +
                               "\r\nContent-Disposition: form-data; name=\"image\"; "
                               "filename*=UTF-8''a%00b.png\r\n\r\nx\r\n--" +
                               boundary + "--";
  EXPECT_EQ(upload_body(nul_name, "multipart/form-data; boundary=" + boundary).status, 400u);
  // The subfolder (403): '..', absolute, a symlink out, a NUL.
  for (const std::string& sub : std::vector<std::string>{"..", "../outside", "a/../..", "/tmp",
                                                         "out", "out/deeper", "a\0b"s})
    EXPECT_EQ(upload({{"image", "x", "y.png"}, {"subfolder", sub, ""}}).status, 403u) << sub;
  EXPECT_EQ(t_.listing("outside"), "");
  // A symlink at the final name is a taken name, never followed.
  EXPECT_EQ(json::parse(upload({{"image", "x", "x.png"}}).body)["name"], "x (1).png");
  EXPECT_EQ(t_.listing("outside"), "");
  EXPECT_EQ(t_.listing("input"), "out,x (1).png,x.png");
}

}  // namespace
