// view_image: /view's preview= and channel= read in server.py's order (ComfyUI 0.8), and the
// image each asks for, as Pillow makes it.
#include "orch/serve/view_image.hpp"

#include <gtest/gtest.h>

#include "orch/serve/errc.hpp"
#include "png_fixture.hpp"

namespace view_image_tests {

using namespace orch::serve;
using orch::testing::bytes_of;
using orch::testing::png_file;
using orch::testing::png_spec;
namespace errc = orch::serve::serve_errc;
using kind = view_request::kind;

view_request asked(const std::map<std::string, std::string>& query) {
  return view_request_of(query);
}

decoded_image decoded(const std::string& file) {
  auto d = decode_image(file);
  EXPECT_TRUE(d.ok()) << d.err().message;
  return d.ok() ? std::move(*d) : decoded_image{};
}

decoded_image decoded(const encoded_view& v) {
  return decoded(v.body);
}

// A 2 x 1 RGBA image: one half-transparent red pixel, one opaque blue.
decoded_image two_pixels() {
  return decoded(png_file({2, 1, 8, 6, {bytes_of({255, 0, 0, 128, 0, 0, 255, 255})}}));
}

TEST(view_image, preview_is_read_before_channel_and_only_webp_or_jpeg_are_kept) {
  auto r = asked({{"preview", "webp;90"}});
  EXPECT_EQ(r.what, kind::preview);
  EXPECT_FALSE(r.jpeg);
  EXPECT_EQ(r.quality, "90");
  r = asked({{"preview", "jpeg;50"}, {"channel", "rgb"}});
  EXPECT_EQ(r.what, kind::preview);
  EXPECT_TRUE(r.jpeg);
  EXPECT_TRUE(r.as_rgb);
  EXPECT_EQ(r.quality, "50");
  // A channel with an `a` anywhere (rgba too) makes it WebP.
  EXPECT_FALSE(asked({{"preview", "jpeg;50"}, {"channel", "a"}}).jpeg);
  EXPECT_FALSE(asked({{"preview", "jpeg"}, {"channel", "rgba"}}).jpeg);
  // Any other format is WebP; the quality is the text after the last ';' when all digits.
  EXPECT_FALSE(asked({{"preview", "png;10"}}).jpeg);
  EXPECT_EQ(asked({{"preview", "50"}}).quality, "50");
  EXPECT_EQ(asked({{"preview", "jpeg;1e"}}).quality, "");
  EXPECT_EQ(asked({{"preview", "jpeg;5;70"}}).quality, "70");
  EXPECT_EQ(asked({{"preview", ""}}).what, kind::preview);
}

TEST(view_image, channel_rgb_and_a_are_images_and_any_other_channel_is_the_file) {
  EXPECT_EQ(asked({{"channel", "rgb"}}).what, kind::rgb);
  EXPECT_EQ(asked({{"channel", "a"}}).what, kind::alpha);
  EXPECT_EQ(asked({{"channel", "rgba"}}).what, kind::file_as_is);
  EXPECT_EQ(asked({{"channel", "alpha"}}).what, kind::file_as_is);
  EXPECT_EQ(asked({}).what, kind::file_as_is);
}

TEST(view_image, channel_rgb_is_a_png_of_the_rgb_and_channel_a_black_with_the_alpha) {
  const auto image = two_pixels();
  auto rgb = render_view(asked({{"channel", "rgb"}}), image);
  ASSERT_TRUE(rgb.ok()) << rgb.err().message;
  EXPECT_EQ(rgb->content_type, "image/png");
  auto d = decoded(*rgb);
  EXPECT_EQ(d.mode, pil_mode::rgb);
  EXPECT_EQ(d.rgba, (std::vector<std::uint8_t>{255, 0, 0, 255, 0, 0, 255, 255}));

  auto alpha = render_view(asked({{"channel", "a"}}), image);
  ASSERT_TRUE(alpha.ok()) << alpha.err().message;
  EXPECT_EQ(alpha->content_type, "image/png");
  d = decoded(*alpha);
  EXPECT_EQ(d.mode, pil_mode::rgba);
  EXPECT_EQ(d.rgba, (std::vector<std::uint8_t>{0, 0, 0, 128, 0, 0, 0, 255}));
}

TEST(view_image, channel_a_of_an_image_pillow_opens_without_rgba_is_opaque_black) {
  // LA and a palette with transparency have alpha, but not in Pillow's mode RGBA.
  png_spec la{1, 1, 8, 4, {bytes_of({200, 10})}};
  png_spec palette{1, 1, 8, 3, {bytes_of({0})}};
  palette.before = {{"PLTE", bytes_of({1, 2, 3})}, {"tRNS", bytes_of({0})}};
  for (const auto& spec : {la, palette}) {
    auto alpha = render_view(asked({{"channel", "a"}}), decoded(png_file(spec)));
    ASSERT_TRUE(alpha.ok()) << alpha.err().message;
    EXPECT_EQ(decoded(*alpha).rgba, (std::vector<std::uint8_t>{0, 0, 0, 255}));
  }
}

TEST(view_image, a_jpeg_preview_is_the_rgb_at_the_quality_given_as_pillow_passes_it) {
  const auto image = two_pixels();
  const auto jpeg = [&](const std::string& preview) {
    auto v = render_view(asked({{"preview", preview}}), image);
    EXPECT_TRUE(v.ok()) << v.err().message;
    EXPECT_EQ(v->content_type, "image/jpeg");
    return v->body;
  };
  const auto rgb = rgb_of(image);
  const auto at = [&](int q) {
    const auto b = *encode_jpeg(rgb.data(), 2, 1, q);
    return std::string(b.begin(), b.end());
  };
  EXPECT_EQ(jpeg("jpeg;50"), at(50));
  EXPECT_EQ(jpeg("jpeg"), at(90));
  EXPECT_EQ(jpeg("jpeg;0"), at(1));
  EXPECT_EQ(jpeg("jpeg;101"), at(100));
  // A C int: 2^32 - 1 is -1, Pillow's "libjpeg's default" (75); 2^31 is negative, so 1.
  EXPECT_EQ(jpeg("jpeg;4294967295"), at(75));
  EXPECT_EQ(jpeg("jpeg;2147483648"), at(1));
  const auto refused = render_view(asked({{"preview", "jpeg;9223372036854775808"}}), image);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.err().code, errc::image_unwritable);
}

TEST(view_image, a_webp_preview_keeps_the_alpha_pillows_webp_writer_keeps) {
  const auto image = two_pixels();
  auto v = render_view(asked({{"preview", "webp;100"}}), image);
  ASSERT_TRUE(v.ok()) << v.err().message;
  EXPECT_EQ(v->content_type, "image/webp");
  EXPECT_EQ(decoded(*v).mode, pil_mode::rgba);
  // channel=rgb converts first; channel=a does not pick the alpha for a preview.
  EXPECT_EQ(decoded(*render_view(asked({{"preview", "webp"}, {"channel", "rgb"}}), image)).mode,
            pil_mode::rgb);
  EXPECT_EQ(decoded(*render_view(asked({{"preview", "jpeg"}, {"channel", "a"}}), image)).mode,
            pil_mode::rgba);
  // A palette with transparency keeps it; a grey image's tRNS colour does not.
  png_spec palette{1, 1, 8, 3, {bytes_of({0})}};
  palette.before = {{"PLTE", bytes_of({1, 2, 3})}, {"tRNS", bytes_of({0})}};
  png_spec grey{1, 1, 8, 0, {bytes_of({5})}};
  grey.before = {{"tRNS", bytes_of({0, 5})}};
  EXPECT_EQ(decoded(*render_view(asked({{"preview", "webp"}}), decoded(png_file(palette)))).mode,
            pil_mode::rgba);
  EXPECT_EQ(decoded(*render_view(asked({{"preview", "webp"}}), decoded(png_file(grey)))).mode,
            pil_mode::rgb);
  // libwebp's quality is 0 to 100: Pillow raises past it.
  const auto refused = render_view(asked({{"preview", "webp;101"}}), image);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.err().code, errc::image_unwritable);
}

}  // namespace view_image_tests
