// The input, output and temp directories of a live `comfy-orch serve` (docs/serve.md, "Files"):
// uploads viewed back byte for byte, renamed or overwritten, every way out of the directories
// refused, the upload's and the prompt's body caps, curl's upload, and a directory serve cannot
// make.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../cli/command_runner.hpp"
#include "serve_fixture.hpp"

namespace {

using namespace orch::serve_testing;

// GET /view and POST /upload/image (docs/serve.md "Files"): the deployment's input/, output/ and
// temp/ beside its file, made by serve at start.
// Bytes no text codec survives: every byte value, CRLFs, and the boundary's own dashes.
std::string binary_image() {
  std::string png = "\x89PNG\r\n\x1a\n";
  for (int round = 0; round < 64; ++round)
    for (int b = 0; b < 256; ++b) png.push_back(static_cast<char>(b));
  return png + "\r\n--" + form_boundary.substr(0, 10) + "\r\n";
}

TEST_F(serve_test, an_uploaded_image_is_viewed_back_byte_for_byte) {
  auto s = serve();
  for (const char* d : {"input", "output", "temp"})
    EXPECT_TRUE(std::filesystem::is_directory(dir_ / d)) << d << " was not made at start";
  const std::string png = binary_image();
  auto r = upload(*s, "x.png", png);
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.json(), (json{{"name", "x.png"}, {"subfolder", ""}, {"type", "input"}}));
  EXPECT_EQ(orch::testing::slurp(dir_ / "input/x.png"), png);
  const auto v = s->get("/view?filename=x.png&type=input");
  ASSERT_EQ(v.status, 200u) << v.body;
  EXPECT_TRUE(v.body == png) << "the viewed bytes differ from the uploaded ones";
  EXPECT_EQ(v.header("content-type"), "image/png");
  EXPECT_EQ(v.header("content-disposition"), "filename=\"x.png\"");
  // Into a new subfolder of the output directory, viewed under /api with the default type.
  r = upload(*s, "y.png", png, {{"subfolder", "a/b"}, {"type", "output"}});
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.json(), (json{{"name", "y.png"}, {"subfolder", "a/b"}, {"type", "output"}}));
  EXPECT_TRUE(s->get("/api/view?filename=y.png&subfolder=a%2Fb").body == png);
  EXPECT_EQ(upload(*s, "t.json", "{}", {{"type", "temp"}}).status, 200u);
  const auto t = s->get("/view?filename=t.json&type=temp");
  EXPECT_EQ(t.body, "{}");
  EXPECT_EQ(t.header("content-type"), "application/json");
  EXPECT_EQ(s->get("/view?filename=nothing.png").status, 404u);
  EXPECT_EQ(s->get("/view").status, 400u);
  EXPECT_EQ(s->get("/view?filename=x.png&type=models").status, 400u);
  EXPECT_EQ(s->call(orch::testing::http::verb::post, "/view").status, 405u);
  EXPECT_EQ(s->stop(), 0);
}

TEST_F(serve_test, an_upload_under_a_taken_name_is_renamed_unless_it_overwrites) {
  auto s = serve();
  const auto name = [&](const std::string& bytes, const std::string& overwrite) {
    std::vector<std::pair<std::string, std::string>> fields;
    if (!overwrite.empty()) fields.emplace_back("overwrite", overwrite);
    const auto r = upload(*s, "x.png", bytes, fields);
    EXPECT_EQ(r.status, 200u) << r.body;
    return r.json().value("name", "");
  };
  EXPECT_EQ(name("one", ""), "x.png");
  EXPECT_EQ(name("two", ""), "x (1).png");
  EXPECT_EQ(name("one", ""), "x.png");  // the same bytes again: ComfyUI's duplicate check
  EXPECT_EQ(name("three", "true"), "x.png");
  EXPECT_EQ(name("four", "1"), "x.png");
  EXPECT_EQ(s->get("/view?filename=x.png&type=input").body, "four");
  EXPECT_EQ(s->get("/view?filename=x%20(1).png&type=input").body, "two");
  EXPECT_EQ(s->stop(), 0);
}

TEST_F(serve_test, no_request_reaches_outside_the_input_and_output_directories) {
  auto s = serve();
  write(dir_ / "secret.txt", "secret");
  std::filesystem::create_symlink(dir_ / "secret.txt", dir_ / "output/link.txt");
  std::filesystem::create_symlink(dir_, dir_ / "output/up");
  std::filesystem::create_symlink(dir_, dir_ / "input/up");
  // A bad file name: 400 (ComfyUI's), also percent-encoded.
  for (const char* target :
       {"/view?filename=../secret.txt", "/view?filename=..%2Fsecret.txt",
        "/view?filename=%2e%2e%2fsecret.txt", "/view?filename=%2Fetc%2Fpasswd",
        "/view?filename=/etc/passwd", "/view?filename=secret.txt%00.png",
        "/api/view?filename=%2E%2E/secret.txt&type=input"})
    EXPECT_EQ(s->get(target).status, 400u) << target;
  // A subfolder that leaves the directory, or a symlink anywhere: 403.
  for (const char* target :
       {"/view?filename=secret.txt&subfolder=..", "/view?filename=secret.txt&subfolder=%2e%2e",
        "/view?filename=passwd&subfolder=/etc", "/view?filename=passwd&subfolder=%2Fetc",
        "/view?filename=link.txt", "/view?filename=secret.txt&subfolder=up",
        "/view?filename=secret.txt&subfolder=up&type=input"})
    EXPECT_EQ(s->get(target).status, 403u) << target;
  EXPECT_EQ(upload(*s, "../evil.png", "x").status, 400u);
  EXPECT_EQ(upload(*s, "/tmp/evil.png", "x").status, 400u);
  EXPECT_EQ(upload(*s, "evil.png", "x", {{"subfolder", ".."}}).status, 403u);
  EXPECT_EQ(upload(*s, "evil.png", "x", {{"subfolder", "up"}}).status, 403u);
  EXPECT_EQ(upload(*s, "evil.png", "x", {{"subfolder", "/tmp"}}).status, 403u);
  EXPECT_EQ(s->send(orch::testing::http::verb::post, "/upload/image", "x", "text/plain").status,
            400u);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "evil.png"));
  EXPECT_FALSE(std::filesystem::exists("/tmp/evil.png"));
  EXPECT_EQ(orch::testing::slurp(dir_ / "secret.txt"), "secret");
  EXPECT_EQ(s->get("/prompt").status, 200u);
  EXPECT_EQ(s->stop(), 0);
}

// The body's cap is chosen from the route once the header is read: an upload may be 64 MiB, a
// prompt 8 MiB. A refused body gets a 413 the client reads (not a reset), and the server goes on.
TEST_F(serve_test, an_upload_has_a_64_mib_cap_while_a_prompt_keeps_8_mib) {
  auto s = serve();
  std::string big(std::size_t{60} << 20, '\0');
  for (std::size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>(i >> 12);
  const auto r = upload(*s, "big.bin", big);
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(std::filesystem::file_size(dir_ / "input/big.bin"), big.size());
  const auto v = s->get("/view?filename=big.bin&type=input");
  EXPECT_EQ(v.header("content-type"), "application/octet-stream");
  EXPECT_TRUE(v.body == big) << "the viewed file differs (" << v.body.size() << " bytes)";

  const json prompt = {{"prompt", quick_prompt}, {"pad", std::string(std::size_t{9} << 20, 'x')}};
  const auto refused = s->post("/prompt", prompt);
  EXPECT_EQ(refused.status, 413u) << refused.body;
  EXPECT_NE(refused.body.find("8388608"), std::string::npos) << refused.body;
  const auto chunked =
      s->send(orch::testing::http::verb::post, "/prompt", prompt.dump(), "application/json", true);
  EXPECT_EQ(chunked.status, 413u) << chunked.body;
  // An upload whose Content-Length is past 64 MiB is refused from its header alone, before the
  // client sent any of the body (as curl stops sending when the answer comes first).
  {
    boost::asio::io_context io;
    orch::testing::tcp::socket sock(io);
    sock.connect({boost::asio::ip::make_address("127.0.0.1"), s->port()});
    boost::asio::write(sock, boost::asio::buffer("POST /upload/image HTTP/1.1\r\nHost: x\r\n"
                                                 "Content-Type: " + form_type +
                                                 "\r\nContent-Length: " +
                                                 std::to_string((std::size_t{64} << 20) + 1) +
                                                 "\r\n\r\n"));
    std::string answer(512, '\0');
    boost::system::error_code ec;
    answer.resize(sock.read_some(boost::asio::buffer(answer), ec));
    EXPECT_EQ(answer.rfind("HTTP/1.1 413", 0), 0u) << answer;
    EXPECT_NE(answer.find("67108864"), std::string::npos) << answer;
  }
  EXPECT_EQ(s->get("/prompt").status, 200u);
  EXPECT_EQ(upload(*s, "small.png", "small").status, 200u);
  EXPECT_EQ(s->stop(), 0);
}

// curl, as people test ComfyUI's upload: it sends `Expect: 100-continue` before a body past
// 1 MiB and waits for the server's go-ahead.
TEST_F(serve_test, curl_uploads_an_image_and_downloads_it_back) {
  if (!std::filesystem::exists("/usr/bin/curl")) GTEST_SKIP() << "no /usr/bin/curl";
  auto s = serve();
  std::string bytes = binary_image();
  while (bytes.size() < (std::size_t{2} << 20)) bytes += bytes;
  write(dir_ / "local.png", bytes);
  const std::string url = "http://127.0.0.1:" + std::to_string(s->port());
  const auto up = orch::testing::run_command(
      "/usr/bin/curl -sS -v -F 'image=@" + (dir_ / "local.png").string() +
      "' -F overwrite=true -F subfolder=curl " + url + "/upload/image");
  EXPECT_EQ(up.exit_code, 0) << up.err;
  EXPECT_EQ(json::parse(up.out),
            (json{{"name", "local.png"}, {"subfolder", "curl"}, {"type", "input"}}));
  EXPECT_NE(up.err.find("HTTP/1.1 100 Continue"), std::string::npos) << up.err;
  const auto down = orch::testing::run_command(
      "/usr/bin/curl -sS -D - -o '" + (dir_ / "back.png").string() + "' '" + url +
      "/view?filename=local.png&subfolder=curl&type=input'");
  EXPECT_EQ(down.exit_code, 0) << down.err;
  EXPECT_NE(down.out.find("filename=\"local.png\""), std::string::npos) << down.out;
  EXPECT_TRUE(orch::testing::slurp(dir_ / "back.png") == bytes);
  EXPECT_EQ(s->stop(), 0);
}

TEST_F(serve_test, serve_stops_at_start_with_the_reason_when_it_cannot_make_a_directory) {
  const auto file = write_deployment();
  write(dir_ / "blocker", "a file, not a directory");
  std::ofstream(file, std::ios::app) << "\n[server]\noutput_directory = \"blocker/output\"\n";
  const auto r = orch::testing::run_command(std::string(ORCH_TEST_COMFY_ORCH) + " serve '" +
                                            file.string() + "' --port 0");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("cannot create the output directory " + (dir_ / "blocker/output").string()),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("fix:"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("listening"), std::string::npos) << r.out;
}

}  // namespace
