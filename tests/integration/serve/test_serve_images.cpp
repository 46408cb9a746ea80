// `comfy-orch serve`'s images (docs/serve.md, "/view's preview= and channel=" and
// "/upload/mask"), on a real server: what ComfyUI 0.8's server.py answers, read back with the
// image codec (orch/serve/image_codec.hpp). The figures were checked against the real server.py
// running on the same file (its JPEG and WebP answers are byte for byte what encode_jpeg and
// encode_webp make: the same libjpeg-turbo and libwebp, the same settings as Pillow's).
#include <gtest/gtest.h>

#include "../cli/command_runner.hpp"
#include "orch/serve/image_codec.hpp"
#include "serve_fixture.hpp"

namespace serve_images_tests {

using namespace orch::serve_testing;
using namespace orch::serve;
using orch::testing::slurp;

// A 40 x 30 RGBA picture: colour gradients, and an alpha that differs from pixel to pixel.
std::vector<std::uint8_t> picture(unsigned seed) {
  std::vector<std::uint8_t> px;
  for (unsigned y = 0; y < 30; ++y)
    for (unsigned x = 0; x < 40; ++x)
      for (const unsigned v : {x * 6 + seed, y * 8, (x + y) * 3 + seed, (x * 7 + y * 13 + seed)})
        px.push_back(static_cast<std::uint8_t>(v));
  return px;
}

std::string text_of(const std::vector<std::uint8_t>& bytes) {
  return {bytes.begin(), bytes.end()};
}

std::string png_of(const std::vector<std::uint8_t>& rgba,
                   const image_metadata* metadata = nullptr) {
  return text_of(*encode_png(rgba.data(), 40, 30, 4, 6, metadata));
}

decoded_image decoded(const std::string& bytes) {
  auto d = decode_image(bytes);
  EXPECT_TRUE(d.ok()) << d.err().message;
  return d.ok() ? std::move(*d) : decoded_image{};
}

class serve_images : public serve_test {};

orch::testing::reply upload_mask(const serve_process& s, const std::string& filename,
                                 const std::string& bytes,
                                 const std::vector<std::pair<std::string, std::string>>& fields) {
  return s.send(orch::testing::http::verb::post, "/upload/mask",
                upload_form(filename, bytes, fields), form_type);
}

TEST_F(serve_images, view_previews_an_image_as_webp_or_jpeg_under_its_own_name) {
  auto s = serve();
  const auto rgba = picture(0);
  ASSERT_EQ(upload(*s, "x.png", png_of(rgba), {{"type", "output"}}).status, 200u);
  auto d = decoded(png_of(rgba));
  const auto rgb = rgb_of(d);

  auto r = s->get("/view?filename=x.png&preview=webp;90");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.header("content-type"), "image/webp");
  // server.py keeps the file's own name (it does not give it the new extension).
  EXPECT_EQ(r.header("content-disposition"), "filename=\"x.png\"");
  EXPECT_EQ(r.body, text_of(*encode_webp(rgba.data(), 40, 30, 4, 90)));
  auto back = decoded(r.body);
  EXPECT_EQ(back.width, 40u);
  EXPECT_EQ(back.height, 30u);
  EXPECT_EQ(back.mode, pil_mode::rgba);

  r = s->get("/api/view?filename=x.png&type=output&preview=jpeg;50");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.header("content-type"), "image/jpeg");
  EXPECT_EQ(r.header("content-disposition"), "filename=\"x.png\"");
  EXPECT_EQ(r.body, text_of(*encode_jpeg(rgb.data(), 40, 30, 50)));
  back = decoded(r.body);
  EXPECT_EQ(back.width, 40u);
  EXPECT_EQ(back.height, 30u);

  // A channel with an `a` makes the preview WebP; any other format is WebP; quality 90 unless
  // the text after the last ';' is digits.
  r = s->get("/view?filename=x.png&preview=jpeg;50&channel=a");
  EXPECT_EQ(r.header("content-type"), "image/webp");
  EXPECT_EQ(r.body, text_of(*encode_webp(rgba.data(), 40, 30, 4, 50)));
  EXPECT_EQ(s->get("/view?filename=x.png&preview=png").body,
            s->get("/view?filename=x.png&preview=webp;90").body);
  EXPECT_EQ(s->get("/view?filename=x.png&preview=jpeg;50&channel=rgb").body,
            text_of(*encode_jpeg(rgb.data(), 40, 30, 50)));
  // Past WebP's quality range Pillow raises: 500.
  EXPECT_EQ(s->get("/view?filename=x.png&preview=webp;101").status, 500u);
  EXPECT_EQ(s->stop(), 0);
}

TEST_F(serve_images, view_channel_rgb_and_a_split_an_image_and_leave_other_files_alone) {
  auto s = serve();
  const auto rgba = picture(5);
  ASSERT_EQ(upload(*s, "x.png", png_of(rgba)).status, 200u);

  auto r = s->get("/view?filename=x.png&type=input&channel=rgb");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.header("content-type"), "image/png");
  EXPECT_EQ(r.header("content-disposition"), "filename=\"x.png\"");
  auto d = decoded(r.body);
  EXPECT_EQ(d.mode, pil_mode::rgb);
  EXPECT_EQ(rgb_of(d), rgb_of(decoded(png_of(rgba))));

  r = s->get("/view?filename=x.png&type=input&channel=a");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.header("content-type"), "image/png");
  d = decoded(r.body);
  ASSERT_EQ(d.rgba.size(), rgba.size());
  for (std::size_t i = 0; i < rgba.size(); i += 4) {
    ASSERT_EQ(d.rgba[i] | d.rgba[i + 1] | d.rgba[i + 2], 0) << "pixel " << i / 4 << " not black";
    ASSERT_EQ(d.rgba[i + 3], rgba[i + 3]) << "pixel " << i / 4;
  }
  // An image without alpha of its own: opaque black.
  const auto rgb = rgb_of(decoded(png_of(rgba)));
  ASSERT_EQ(upload(*s, "y.jpg", text_of(*encode_jpeg(rgb.data(), 40, 30, 90))).status, 200u);
  d = decoded(s->get("/view?filename=y.jpg&type=input&channel=a").body);
  EXPECT_EQ(d.width, 40u);
  for (std::size_t i = 0; i < d.rgba.size(); i += 4)
    ASSERT_EQ(d.rgba[i] + d.rgba[i + 1] + d.rgba[i + 2] + (255 - d.rgba[i + 3]), 0);

  // rgba, or anything else, is the file as it is; a file that is no image is so too without
  // preview= and channel=, and 500 with them (Pillow cannot open it).
  EXPECT_EQ(s->get("/view?filename=x.png&type=input&channel=rgba").body, png_of(rgba));
  const std::string mp4 = std::string("\0\0\0\x18", 4) + "ftypmp42";  // an MP4's first box
  ASSERT_EQ(upload(*s, "v.mp4", mp4).status, 200u);
  ASSERT_EQ(upload(*s, "t.json", "{\"a\": 1}").status, 200u);
  r = s->get("/view?filename=t.json&type=input&channel=x");
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(r.body, "{\"a\": 1}");
  EXPECT_EQ(r.header("content-type"), "application/json");
  for (const char* target : {"/view?filename=v.mp4&type=input&preview=webp",
                             "/view?filename=t.json&type=input&channel=rgb",
                             "/view?filename=t.json&type=input&channel=a"}) {
    r = s->get(target);
    EXPECT_EQ(r.status, 500u) << target;
    EXPECT_NE(r.json()["error"].get<std::string>().find("not a PNG, JPEG or WebP"),
              std::string::npos)
        << r.body;
  }
  EXPECT_EQ(s->get("/view?filename=absent.png&preview=webp").status, 404u);
  EXPECT_EQ(s->stop(), 0);
}

TEST_F(serve_images, upload_mask_saves_the_originals_pixels_and_text_with_the_masks_alpha) {
  auto s = serve();
  image_metadata workflow;
  png_text text;
  text.keyword = "workflow";
  text.text = "{\"nodes\": []}";
  workflow.texts.push_back(text);
  const auto original = picture(10);
  ASSERT_EQ(upload(*s, "orig.png", png_of(original, &workflow), {{"type", "output"}}).status, 200u);
  const auto mask = picture(99);
  const std::string ref = R"({"filename": "orig.png", "subfolder": "", "type": "output"})";

  auto r = upload_mask(*s, "clipspace-mask.png", png_of(mask), {{"original_ref", ref}});
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.json(), (json{{"name", "clipspace-mask.png"}, {"subfolder", ""}, {"type", "input"}}));
  auto saved = decoded(slurp(dir_ / "input/clipspace-mask.png"));
  ASSERT_EQ(saved.rgba.size(), original.size());
  for (std::size_t i = 0; i < original.size(); ++i)
    ASSERT_EQ(saved.rgba[i], (i % 4 == 3 ? mask : original)[i]) << "byte " << i;
  ASSERT_EQ(saved.metadata.texts.size(), 1u);
  EXPECT_EQ(saved.metadata.texts[0].keyword, "workflow");
  EXPECT_EQ(saved.metadata.texts[0].text, "{\"nodes\": []}");

  // The same mask again: its bytes are not the saved file's, so it takes the next name.
  r = upload_mask(*s, "clipspace-mask.png", png_of(mask), {{"original_ref", ref}});
  EXPECT_EQ(r.json().value("name", ""), "clipspace-mask (1).png");
  // Into a subfolder of temp, overwriting, from an annotated original, under /api.
  r = s->send(
      orch::testing::http::verb::post, "/api/upload/mask",
      upload_form("m.png", png_of(mask),
                  {{"original_ref", R"({"filename": "orig.png [output]", "type": "input"})"},
                   {"type", "temp"},
                   {"subfolder", "masks"},
                   {"overwrite", "true"}}),
      form_type);
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.json(), (json{{"name", "m.png"}, {"subfolder", "masks"}, {"type", "temp"}}));
  EXPECT_EQ(decoded(slurp(dir_ / "temp/masks/m.png")).rgba, saved.rgba);
  EXPECT_EQ(s->stop(), 0);
}

TEST_F(serve_images, upload_mask_answers_a_bad_original_ref_as_server_py_does) {
  auto s = serve();
  ASSERT_EQ(upload(*s, "orig.png", png_of(picture(1)), {{"type", "output"}}).status, 200u);
  const auto mask = png_of(picture(2));
  // server.py raises (500) for a missing or malformed original_ref, an original that is no
  // image, and a mask of another size; nothing is written.
  for (const auto& [name, ref] :
       std::vector<std::pair<std::string, std::string>>{{"a.png", ""},
                                                        {"b.png", "{"},
                                                        {"c.png", "[1]"},
                                                        {"d.png", R"({"type": "output"})"},
                                                        {"e.png", R"({"filename": 5})"}}) {
    std::vector<std::pair<std::string, std::string>> fields;
    if (!ref.empty()) fields.emplace_back("original_ref", ref);
    const auto r = upload_mask(*s, name, mask, fields);
    EXPECT_EQ(r.status, 500u) << ref << ": " << r.body;
    EXPECT_FALSE(std::filesystem::exists(dir_ / "input" / name)) << name;
  }
  const auto small = text_of(*encode_png(picture(2).data(), 20, 15, 4, 6));
  auto r = upload_mask(*s, "f.png", small, {{"original_ref", R"({"filename": "orig.png"})"}});
  EXPECT_EQ(r.status, 500u) << r.body;
  r = upload_mask(*s, "g.jpg", mask, {{"original_ref", R"({"filename": "orig.png"})"}});
  EXPECT_EQ(r.status, 500u) << r.body;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "input/f.png"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "input/g.jpg"));
  // An original that is not there, a path out of the directory, an unknown type: server.py's
  // save function returns early, and its caller answers 200 all the same; nothing is written.
  for (const char* ref : {R"({"filename": "absent.png"})", R"({"filename": "../orig.png"})",
                          R"({"filename": "orig.png", "subfolder": ".."})",
                          R"({"filename": "orig.png", "type": "models"})", R"({"filename": ""})"}) {
    r = upload_mask(*s, "h.png", mask, {{"original_ref", ref}});
    EXPECT_EQ(r.status, 200u) << ref << ": " << r.body;
    EXPECT_EQ(r.json(), (json{{"name", "h.png"}, {"subfolder", ""}, {"type", "input"}})) << ref;
    EXPECT_FALSE(std::filesystem::exists(dir_ / "input/h.png")) << ref;
  }
  // The upload's own name is refused as /upload/image refuses it.
  EXPECT_EQ(upload_mask(*s, "../x.png", mask, {{"original_ref", "{}"}}).status, 400u);
  EXPECT_EQ(s->stop(), 0);
}

}  // namespace serve_images_tests
