// masked_image: /upload/mask's file is the original's pixels with the mask's alpha, written in
// the format of the upload's extension, keeping the original's text and ICC profile in a PNG
// (server.py's upload_mask, ComfyUI 0.8).
#include "orch/serve/masked_image.hpp"

#include <gtest/gtest.h>

#include "orch/serve/errc.hpp"
#include "png_fixture.hpp"

namespace masked_image_tests {

using namespace orch::serve;
using orch::testing::bytes_of;
using orch::testing::png_file;
using orch::testing::png_spec;
using orch::testing::zlib_stored;
namespace errc = orch::serve::serve_errc;

decoded_image decoded(const std::string& file) {
  auto d = decode_image(file);
  EXPECT_TRUE(d.ok()) << d.err().message;
  return d.ok() ? std::move(*d) : decoded_image{};
}

decoded_image decoded(const std::vector<std::uint8_t>& file) {
  return decoded(std::string(file.begin(), file.end()));
}

// A 2 x 1 RGB original with a workflow and an ICC profile.
decoded_image original() {
  png_spec s{2, 1, 8, 2, {bytes_of({10, 20, 30, 40, 50, 60})}};
  s.before = {{"iCCP", std::string("p\0\0", 3) + zlib_stored("profile")},
              {"tEXt", std::string("workflow\0{}", 11)}};
  return decoded(png_file(s));
}

TEST(masked_image, a_png_has_the_originals_rgb_and_text_and_the_masks_alpha) {
  const auto mask = decoded(png_file({2, 1, 8, 6, {bytes_of({9, 9, 9, 0, 9, 9, 9, 200})}}));
  auto file = masked_image(original(), mask, "clipspace-mask-1.png");
  ASSERT_TRUE(file.ok()) << file.err().message;
  const auto d = decoded(*file);
  EXPECT_EQ(d.mode, pil_mode::rgba);
  EXPECT_EQ(d.rgba, (std::vector<std::uint8_t>{10, 20, 30, 0, 40, 50, 60, 200}));
  EXPECT_EQ(d.metadata.icc_profile, "profile");
  ASSERT_EQ(d.metadata.texts.size(), 1u);
  EXPECT_EQ(d.metadata.texts[0].keyword, "workflow");
  EXPECT_EQ(d.metadata.texts[0].text, "{}");
}

TEST(masked_image, a_mask_without_alpha_makes_the_image_opaque) {
  const auto grey = decoded(png_file({2, 1, 8, 0, {bytes_of({0, 255})}}));
  const auto d = decoded(*masked_image(original(), grey, "m.PNG"));
  EXPECT_EQ(d.rgba, (std::vector<std::uint8_t>{10, 20, 30, 255, 40, 50, 60, 255}));
}

TEST(masked_image, a_webp_name_is_written_as_webp_with_alpha) {
  const auto mask = decoded(png_file({2, 1, 8, 6, {bytes_of({0, 0, 0, 0, 0, 0, 0, 255})}}));
  const auto d = decoded(*masked_image(original(), mask, "m.webp"));
  EXPECT_EQ(d.format, image_format::webp);
  EXPECT_EQ(d.mode, pil_mode::rgba);
  EXPECT_EQ(d.rgba[3], 0);
  EXPECT_EQ(d.rgba[7], 255);
}

TEST(masked_image, sizes_that_differ_and_names_pillow_cannot_write_rgba_as_are_refused) {
  const auto small = decoded(png_file({1, 1, 8, 6, {bytes_of({0, 0, 0, 0})}}));
  auto r = masked_image(original(), small, "m.png");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, errc::image_size_mismatch);
  const auto mask = decoded(png_file({2, 1, 8, 6, {bytes_of({0, 0, 0, 0, 0, 0, 0, 0})}}));
  for (const char* name : {"m.jpg", "m.jpeg", "mask", ".png", "m.gif"}) {
    r = masked_image(original(), mask, name);
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_EQ(r.err().code, errc::image_unwritable) << name;
  }
}

}  // namespace masked_image_tests
