#include "orch/serve/view_image.hpp"

#include <cstdint>
#include <optional>
#include <vector>

#include "orch/serve/errc.hpp"

namespace orch::serve {

namespace {

// Pillow's default compress_level (-1: zlib's default, 6).
constexpr int view_png_level = 6;

std::string query_value(const std::map<std::string, std::string>& query, const char* key) {
  const auto it = query.find(key);
  return it == query.end() ? std::string() : it->second;
}

// Python's str.isdigit() for the ASCII digits (what a client sends).
bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (const char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// The digits' value, or nullopt from 2^63 on (past Python's conversion to a C ssize_t).
std::optional<std::uint64_t> value_of(const std::string& digits) {
  constexpr std::uint64_t limit = std::uint64_t{1} << 63;
  std::uint64_t v = 0;
  for (const char c : digits) {
    const auto d = static_cast<std::uint64_t>(c - '0');
    if (v > (limit - 1 - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

error view_unwritable(const std::string& why) {
  return error{serve_errc::image_unwritable, why};
}

encoded_view view_of(const char* type, const std::vector<std::uint8_t>& bytes) {
  return {type, std::string(bytes.begin(), bytes.end())};
}

result<encoded_view> preview(const view_request& r, const decoded_image& image) {
  const std::optional<std::uint64_t> q =
      r.quality.empty() ? std::optional<std::uint64_t>(90) : value_of(r.quality);
  const bool rgb = r.jpeg || r.as_rgb;
  // Pillow's WebP writer keeps RGB and RGBA as they are, and converts any other mode to RGBA
  // when it has alpha ("A" in the mode, or a palette with transparency), else to RGB.
  const bool alpha = !rgb && (image.mode == pil_mode::rgba || image.mode == pil_mode::la ||
                              (image.mode == pil_mode::p && image.has_transparency));
  const std::vector<std::uint8_t> pixels = alpha ? image.rgba : rgb_of(image);
  if (r.jpeg) {
    if (!q)
      return view_unwritable(
          "preview quality " + r.quality +
          " is too large (Pillow: Python int too large to convert to C ssize_t)");
    // Pillow hands the quality to libjpeg as a C int (truncated), and -1 means its default, 75.
    const auto as_int = static_cast<std::int32_t>(static_cast<std::uint32_t>(*q & 0xFFFFFFFFu));
    auto bytes = encode_jpeg(pixels.data(), image.width, image.height, as_int == -1 ? 75 : as_int);
    if (!bytes) return bytes.err();
    return view_of("image/jpeg", *bytes);
  }
  if (!q || *q > 100)
    return view_unwritable("preview quality " + r.quality + " is not 0 to 100, as WebP's is");
  auto bytes =
      encode_webp(pixels.data(), image.width, image.height, alpha ? 4 : 3, static_cast<float>(*q));
  if (!bytes) return bytes.err();
  return view_of("image/webp", *bytes);
}

}  // namespace

view_request view_request_of(const std::map<std::string, std::string>& query) {
  view_request r;
  const std::string channel = query_value(query, "channel");
  if (query.count("preview") != 0) {
    const std::string preview = query.at("preview");
    const auto first = preview.find(';');
    const std::string format = preview.substr(0, first);
    const auto last = preview.rfind(';');
    const std::string tail = last == std::string::npos ? preview : preview.substr(last + 1);
    r.what = view_request::kind::preview;
    r.jpeg = format == "jpeg" && channel.find('a') == std::string::npos;
    r.as_rgb = channel == "rgb";
    if (all_digits(tail)) r.quality = tail;
    return r;
  }
  if (channel == "rgb") r.what = view_request::kind::rgb;
  if (channel == "a") r.what = view_request::kind::alpha;
  return r;
}

result<encoded_view> render_view(const view_request& request, const decoded_image& image) {
  switch (request.what) {
    case view_request::kind::preview:
      return preview(request, image);
    case view_request::kind::rgb: {
      const auto rgb = rgb_of(image);
      auto png = encode_png(rgb.data(), image.width, image.height, 3, view_png_level);
      if (!png) return png.err();
      return view_of("image/png", *png);
    }
    case view_request::kind::alpha: {
      // Image.new("RGBA") is transparent black; putalpha gives it the image's alpha, or 255
      // where Pillow's mode has none of its own.
      std::vector<std::uint8_t> pixels(image.rgba.size(), 0);
      for (std::size_t i = 3; i < pixels.size(); i += 4)
        pixels[i] = image.mode == pil_mode::rgba ? image.rgba[i] : 0xFF;
      auto png = encode_png(pixels.data(), image.width, image.height, 4, view_png_level);
      if (!png) return png.err();
      return view_of("image/png", *png);
    }
    case view_request::kind::file_as_is:
      break;
  }
  return view_unwritable("the file is answered as it is, not re-encoded");
}

}  // namespace orch::serve
