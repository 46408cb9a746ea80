// image_codec: PNG, JPEG and WebP read into the pixels Pillow's convert("RGBA") makes and the
// mode Pillow opens them in (ComfyUI's server.py reads them so), written back as Pillow writes
// them; and every malformed, truncated or oversized file refused with an error, never a crash and
// never an allocation its header asked for.
#include "orch/serve/image_codec.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "orch/serve/errc.hpp"
#include "png_fixture.hpp"

namespace image_codec_tests {

using namespace orch::serve;
using namespace std::string_literals;
using orch::testing::bytes_of;
using orch::testing::png_file;
using orch::testing::png_spec;
using orch::testing::zlib_stored;
namespace errc = orch::serve::serve_errc;

std::vector<std::uint8_t> noise(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<std::uint8_t> v(n);
  for (auto& b : v) b = static_cast<std::uint8_t>(gen());
  return v;
}

// A smooth picture a lossy codec keeps close: gradients, and an alpha ramp.
std::vector<std::uint8_t> gradient(std::uint32_t w, std::uint32_t h, int channels) {
  std::vector<std::uint8_t> v;
  for (std::uint32_t y = 0; y < h; ++y)
    for (std::uint32_t x = 0; x < w; ++x) {
      v.push_back(static_cast<std::uint8_t>(x * 255 / w));
      v.push_back(static_cast<std::uint8_t>(y * 255 / h));
      v.push_back(128);
      if (channels == 4) v.push_back(static_cast<std::uint8_t>((x + y) * 255 / (w + h)));
    }
  return v;
}

std::string text_of(const std::vector<std::uint8_t>& bytes) {
  return {bytes.begin(), bytes.end()};
}

decoded_image decoded(const std::string& file) {
  auto d = decode_image(file);
  EXPECT_TRUE(d.ok()) << d.err().message;
  return d.ok() ? std::move(*d) : decoded_image{};
}

int max_difference(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
  int worst = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
    worst = std::max(worst, std::abs(int{a[i]} - int{b[i]}));
  return worst;
}

TEST(image_codec, a_png_round_trips_rgba_and_rgb_pixels_exactly) {
  const auto rgba = noise(37 * 23 * 4, 1);
  auto png = encode_png(rgba.data(), 37, 23, 4, 6);
  ASSERT_TRUE(png.ok()) << png.err().message;
  auto d = decoded(text_of(*png));
  EXPECT_EQ(d.format, image_format::png);
  EXPECT_EQ(d.mode, pil_mode::rgba);
  EXPECT_EQ(d.width, 37u);
  EXPECT_EQ(d.height, 23u);
  EXPECT_EQ(d.rgba, rgba);

  auto rgb = encode_png(rgb_of(d).data(), 37, 23, 3, 0);
  ASSERT_TRUE(rgb.ok()) << rgb.err().message;
  auto e = decoded(text_of(*rgb));
  EXPECT_EQ(e.mode, pil_mode::rgb);
  EXPECT_EQ(rgb_of(e), rgb_of(d));
  for (std::size_t i = 3; i < e.rgba.size(); i += 4) ASSERT_EQ(e.rgba[i], 255);
}

TEST(image_codec, jpeg_and_webp_round_trips_keep_the_size_and_stay_close) {
  const auto rgb = gradient(64, 48, 3);
  auto jpeg = encode_jpeg(rgb.data(), 64, 48, 95);
  ASSERT_TRUE(jpeg.ok()) << jpeg.err().message;
  auto j = decoded(text_of(*jpeg));
  EXPECT_EQ(j.format, image_format::jpeg);
  EXPECT_EQ(j.mode, pil_mode::rgb);
  EXPECT_EQ(j.width, 64u);
  EXPECT_EQ(j.height, 48u);
  EXPECT_LE(max_difference(rgb_of(j), rgb), 16);

  const auto rgba = gradient(64, 48, 4);
  auto webp = encode_webp(rgba.data(), 64, 48, 4, 90);
  ASSERT_TRUE(webp.ok()) << webp.err().message;
  auto w = decoded(text_of(*webp));
  EXPECT_EQ(w.format, image_format::webp);
  EXPECT_EQ(w.mode, pil_mode::rgba);
  EXPECT_EQ(w.width, 64u);
  EXPECT_EQ(w.height, 48u);
  EXPECT_LE(max_difference(w.rgba, rgba), 24);

  auto opaque = encode_webp(rgb.data(), 64, 48, 3, 50);
  ASSERT_TRUE(opaque.ok()) << opaque.err().message;
  EXPECT_EQ(decoded(text_of(*opaque)).mode, pil_mode::rgb);
}

TEST(image_codec, a_jpeg_is_written_with_pillows_defaults_and_a_clamped_quality) {
  const auto rgb = gradient(40, 30, 3);
  const auto at = [&](int q) { return *encode_jpeg(rgb.data(), 40, 30, q); };
  // jpeg_set_quality's clamp, which Pillow's quality passes through.
  EXPECT_EQ(at(0), at(1));
  EXPECT_EQ(at(1000), at(100));
  EXPECT_NE(at(50), at(90));
  // A baseline JFIF: SOI, then APP0 "JFIF".
  const auto j = at(75);
  EXPECT_EQ(text_of({j.begin(), j.begin() + 11}), "\xFF\xD8\xFF\xE0\x00\x10JFIF\x00"s);
}

TEST(image_codec, png_grey_palette_and_16_bit_files_read_as_pillow_converts_them) {
  // 16-bit grey is Pillow's "I": its values clipped at 255, not scaled.
  png_spec grey16{6, 1, 16, 0, {bytes_of({0, 0, 0, 100, 0, 255, 1, 0, 3, 232, 255, 255})}};
  auto d = decoded(png_file(grey16));
  EXPECT_EQ(d.mode, pil_mode::i);
  std::vector<int> reds;
  for (std::size_t i = 0; i < d.rgba.size(); i += 4) reds.push_back(d.rgba[i]);
  EXPECT_EQ(reds, (std::vector<int>{0, 100, 255, 255, 255, 255}));
  // 2-bit grey is "L", scaled (0, 85, 170, 255).
  d = decoded(png_file({4, 1, 2, 0, {bytes_of({0b00011011})}}));
  EXPECT_EQ(d.mode, pil_mode::l);
  EXPECT_EQ(d.rgba, (std::vector<std::uint8_t>{0, 0, 0, 255, 85, 85, 85, 255, 170, 170, 170, 255,
                                               255, 255, 255, 255}));
  // 1-bit grey is "1".
  EXPECT_EQ(decoded(png_file({8, 1, 1, 0, {bytes_of({0xF0})}})).mode, pil_mode::bilevel);
  // 16-bit RGBA keeps each channel's high byte; 16-bit grey+alpha is Pillow's "RGBA".
  d = decoded(
      png_file({1, 1, 16, 6, {bytes_of({0x12, 0xAB, 0x34, 0xCD, 0x56, 0xEF, 0x78, 0x01})}}));
  EXPECT_EQ(d.mode, pil_mode::rgba);
  EXPECT_EQ(d.rgba, (std::vector<std::uint8_t>{0x12, 0x34, 0x56, 0x78}));
  d = decoded(png_file({1, 1, 16, 4, {bytes_of({0x9A, 0x00, 0x40, 0xFF})}}));
  EXPECT_EQ(d.mode, pil_mode::rgba);
  EXPECT_EQ(d.rgba, (std::vector<std::uint8_t>{0x9A, 0x9A, 0x9A, 0x40}));
  // 8-bit grey+alpha is "LA".
  EXPECT_EQ(decoded(png_file({1, 1, 8, 4, {bytes_of({7, 9})}})).mode, pil_mode::la);
}

TEST(image_codec, a_trns_chunk_is_transparency_and_becomes_alpha_as_in_convert_rgba) {
  // A palette of three colours, the second half transparent.
  png_spec palette{3, 1, 8, 3, {bytes_of({0, 1, 2})}};
  palette.before = {{"PLTE", bytes_of({255, 0, 0, 0, 255, 0, 0, 0, 255})},
                    {"tRNS", bytes_of({255, 128})}};
  auto d = decoded(png_file(palette));
  EXPECT_EQ(d.mode, pil_mode::p);
  EXPECT_TRUE(d.has_transparency);
  EXPECT_EQ(d.rgba, (std::vector<std::uint8_t>{255, 0, 0, 255, 0, 255, 0, 128, 0, 0, 255, 255}));
  // Grey 8-bit whose value 7 is transparent.
  png_spec grey{2, 1, 8, 0, {bytes_of({7, 8})}};
  grey.before = {{"tRNS", bytes_of({0, 7})}};
  d = decoded(png_file(grey));
  EXPECT_EQ(d.mode, pil_mode::l);
  EXPECT_TRUE(d.has_transparency);
  EXPECT_EQ(d.rgba, (std::vector<std::uint8_t>{7, 7, 7, 0, 8, 8, 8, 255}));
  // Without tRNS there is none.
  EXPECT_FALSE(decoded(png_file({2, 1, 8, 0, {bytes_of({7, 8})}})).has_transparency);
}

TEST(image_codec, png_texts_and_icc_are_read_by_pillows_rules_and_written_back) {
  png_spec s{1, 1, 8, 2, {bytes_of({1, 2, 3})}};
  s.before = {{"iCCP", std::string("ICC Profile\0\0", 13) + zlib_stored("icc-bytes")},
              {"tEXt", std::string("prompt\0{\"1\": {}}", 17)},
              {"tEXt", std::string("\0no keyword", 11)},  // an empty keyword: dropped
              {"zTXt", std::string("workflow\0\0", 10) + zlib_stored("w\xe9")},
              {"iTXt", std::string("intl\0\0\0fr\0clef\0", 15) + "\xe2\x82\xac uro"},
              {"iTXt", std::string("bad\0\0\0\0\0", 8) + "\xff"}};  // not UTF-8: dropped
  s.after = {{"tEXt", std::string("prompt\0second", 13)}};  // its first place, its last text
  const auto d = decoded(png_file(s));
  EXPECT_EQ(d.metadata.icc_profile, "icc-bytes");
  ASSERT_EQ(d.metadata.texts.size(), 3u);
  EXPECT_EQ(d.metadata.texts[0].keyword, "prompt");
  EXPECT_EQ(d.metadata.texts[0].text, "second");
  EXPECT_EQ(d.metadata.texts[1].keyword, "workflow");
  EXPECT_EQ(d.metadata.texts[1].text, "w\xe9");
  EXPECT_FALSE(d.metadata.texts[1].international);
  EXPECT_TRUE(d.metadata.texts[2].international);
  EXPECT_EQ(d.metadata.texts[2].language, "fr");
  EXPECT_EQ(d.metadata.texts[2].translated_keyword, "clef");
  EXPECT_EQ(d.metadata.texts[2].text, "\xe2\x82\xac uro");

  auto again = encode_png(d.rgba.data(), 1, 1, 4, 4, &d.metadata);
  ASSERT_TRUE(again.ok()) << again.err().message;
  const std::string file = text_of(*again);
  // Pillow's order: IHDR, iCCP, the texts (a zTXt's as tEXt), then the pixels.
  const auto at = [&](const std::string& what) {
    const auto where = file.find(what);
    EXPECT_NE(where, std::string::npos) << "no " << what;
    return where;
  };
  EXPECT_LT(at("IHDR"), at("iCCPICC Profile"));
  EXPECT_LT(at("iCCP"), at("tEXtprompt"s + '\0' + "second"));
  EXPECT_LT(at("tEXtprompt"), at("tEXtworkflow"s + '\0' + "w\xe9"));
  EXPECT_LT(at("tEXtworkflow"), at("iTXtintl"s + std::string("\0\0\0fr\0clef\0", 11)));
  EXPECT_LT(at("iTXtintl"), at("IDAT"));
  const auto e = decoded(file);
  EXPECT_EQ(e.metadata.icc_profile, "icc-bytes");
  ASSERT_EQ(e.metadata.texts.size(), 3u);
  EXPECT_EQ(e.metadata.texts[1].text, "w\xe9");
}

TEST(image_codec, text_chunks_pillow_refuses_refuse_the_file) {
  png_spec s{1, 1, 8, 2, {bytes_of({1, 2, 3})}};
  s.before = {{"zTXt", std::string("k\0\x01", 3) + zlib_stored("x")}};
  auto d = decode_image(png_file(s));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.err().code, errc::image_unreadable);
  EXPECT_NE(d.err().message.find("compression method"), std::string::npos) << d.err().message;
  // Inflated past Pillow's 1 MiB a chunk.
  s.before = {{"zTXt", std::string("k\0\0", 3) + zlib_stored(std::string((1 << 20) + 1, 'a'))}};
  d = decode_image(png_file(s));
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.err().message.find("1 MiB"), std::string::npos) << d.err().message;
}

TEST(image_codec, bytes_that_are_no_image_are_refused) {
  for (const std::string& bytes :
       {std::string(), std::string("hello"), std::string("GIF89a\x01\x00\x01\x00", 10),
        std::string("\x89PNG\r\n\x1a\n", 8), std::string("\xFF\xD8\xFF", 3),
        std::string("RIFF\0\0\0\0WEBP", 12)}) {
    const auto d = decode_image(bytes);
    ASSERT_FALSE(d.ok()) << bytes;
    EXPECT_EQ(d.err().code, errc::image_unreadable) << d.err().message;
  }
}

TEST(image_codec, a_file_cut_short_is_refused_as_pillow_refuses_it) {
  const auto rgba = gradient(24, 16, 4);
  const auto rgb = gradient(24, 16, 3);
  for (const auto& file : {text_of(*encode_jpeg(rgb.data(), 24, 16, 80)),
                           text_of(*encode_webp(rgba.data(), 24, 16, 4, 80))}) {
    ASSERT_TRUE(decode_image(file).ok());
    for (std::size_t n = 0; n < file.size(); ++n) {
      const auto d = decode_image(std::string_view(file).substr(0, n));
      ASSERT_FALSE(d.ok()) << "a file cut to " << n << " of " << file.size() << " bytes was read";
      ASSERT_EQ(d.err().code, errc::image_unreadable) << d.err().message;
    }
  }
  // A PNG is refused until its pixels are whole; after them (IEND missing), Pillow reads it.
  const auto png = text_of(*encode_png(rgba.data(), 24, 16, 4, 9));
  const auto idat = png.find("IDAT");
  ASSERT_NE(idat, std::string::npos);
  const std::size_t idat_data_end =
      idat + 4 +
      (std::uint8_t(png[idat - 4]) << 24 | std::uint8_t(png[idat - 3]) << 16 |
       std::uint8_t(png[idat - 2]) << 8 | std::uint8_t(png[idat - 1]));
  ASSERT_EQ(png.find("IDAT", idat + 4), std::string::npos) << "one IDAT chunk expected";
  for (std::size_t n = 0; n < idat_data_end; ++n) {
    const auto d = decode_image(std::string_view(png).substr(0, n));
    ASSERT_FALSE(d.ok()) << "a PNG cut to " << n << " of " << png.size() << " bytes was read";
    ASSERT_EQ(d.err().code, errc::image_unreadable) << d.err().message;
  }
  for (std::size_t n = idat_data_end + 4; n <= png.size(); ++n) {
    const auto d = decode_image(std::string_view(png).substr(0, n));
    ASSERT_TRUE(d.ok()) << "a PNG cut to " << n << " bytes, its pixels whole: " << d.err().message;
    ASSERT_EQ(d->rgba, rgba);
  }
}

TEST(image_codec, corrupted_files_are_read_or_refused_but_never_crash) {
  const auto rgba = gradient(24, 16, 4);
  const auto rgb = gradient(24, 16, 3);
  std::mt19937 gen(42);
  for (const auto& file : {text_of(*encode_png(rgba.data(), 24, 16, 4, 9)),
                           text_of(*encode_jpeg(rgb.data(), 24, 16, 80)),
                           text_of(*encode_webp(rgba.data(), 24, 16, 4, 80))}) {
    for (int round = 0; round < 2000; ++round) {
      std::string bad = file;
      for (int k = 0; k < 1 + round % 4; ++k) bad[gen() % bad.size()] = static_cast<char>(gen());
      const auto d = decode_image(bad);
      if (d.ok()) {
        EXPECT_EQ(d->rgba.size(), std::size_t{d->width} * d->height * 4);
      } else {
        // A corrupted size may be past the cap too.
        EXPECT_TRUE(d.err().code == errc::image_unreadable || d.err().code == errc::image_too_large)
            << d.err().message;
      }
    }
  }
}

TEST(image_codec, a_header_claiming_more_pixels_than_the_cap_is_refused_before_any_pixel) {
  // 100,000 x 100,000 (40 GB as RGBA), in a file of a few dozen bytes.
  auto d = decode_image(png_file({100000, 100000, 8, 6, {bytes_of({0, 0, 0, 0})}}));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.err().code, errc::image_too_large);
  EXPECT_NE(d.err().message.find("100000 x 100000"), std::string::npos) << d.err().message;
  // One pixel past the cap, of a file that holds almost nothing.
  d = decode_image(png_file({8193, 8192, 8, 0, {}}));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.err().code, errc::image_too_large);
  // A JPEG whose SOF says 60,000 x 60,000.
  const auto rgb = gradient(16, 16, 3);
  std::string jpeg = text_of(*encode_jpeg(rgb.data(), 16, 16, 80));
  const auto sof = jpeg.find("\xFF\xC0");
  ASSERT_NE(sof, std::string::npos);
  jpeg.replace(sof + 5, 4, bytes_of({0xEA, 0x60, 0xEA, 0x60}));
  d = decode_image(jpeg);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.err().code, errc::image_too_large);
  // Every format against a lower cap.
  const auto rgba = gradient(16, 16, 4);
  for (const auto& file : {text_of(*encode_png(rgba.data(), 16, 16, 4, 1)),
                           text_of(*encode_jpeg(rgb.data(), 16, 16, 80)),
                           text_of(*encode_webp(rgba.data(), 16, 16, 4, 80))}) {
    d = decode_image(file, 255);
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.err().code, errc::image_too_large);
    EXPECT_TRUE(decode_image(file, 256).ok());
  }
}

TEST(image_codec, encoders_refuse_what_their_format_cannot_hold) {
  const auto px = gradient(4, 4, 4);
  const auto code = [](const auto& r) { return r.ok() ? std::string("ok") : r.err().code; };
  EXPECT_EQ(code(encode_png(px.data(), 4, 4, 2, 6)), errc::image_unwritable);
  EXPECT_EQ(code(encode_png(px.data(), 4, 4, 4, 10)), errc::image_unwritable);
  EXPECT_EQ(code(encode_png(nullptr, 4, 4, 4, 6)), errc::image_unwritable);
  EXPECT_EQ(code(encode_jpeg(px.data(), 65501, 1, 90)), errc::image_unwritable);
  EXPECT_EQ(code(encode_jpeg(px.data(), 0, 4, 90)), errc::image_unwritable);
  EXPECT_EQ(code(encode_webp(px.data(), 4, 4, 4, 101)), errc::image_unwritable);
  EXPECT_EQ(code(encode_webp(px.data(), 4, 4, 4, -1)), errc::image_unwritable);
  EXPECT_EQ(code(encode_webp(px.data(), 16384, 1, 4, 90)), errc::image_unwritable);
  EXPECT_EQ(code(encode_webp(px.data(), 4, 4, 4, 0)), "ok");
}

}  // namespace image_codec_tests
