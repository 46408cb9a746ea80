// png_fixture: PNG files written byte by byte for the image codec's tests (test_image_codec.cpp,
// test_view_image.cpp, test_masked_image.cpp), so that a test can make exactly the file a case
// needs (a bit depth, a tRNS chunk, a text chunk, a lying header) without the libraries serve
// reads them with. Deflate streams are "stored" blocks (no compression), which every inflater
// reads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace orch::testing {

inline std::uint32_t crc32_of(const std::string& bytes) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (const char ch : bytes) {
    c ^= static_cast<unsigned char>(ch);
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return c ^ 0xFFFFFFFFu;
}

inline std::string be32(std::uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

// `data` as a zlib stream of stored blocks (RFC 1950/1951).
inline std::string zlib_stored(const std::string& data) {
  std::string out = "\x78\x01";
  std::size_t at = 0;
  do {
    const std::size_t n = std::min<std::size_t>(data.size() - at, 65535);
    const bool last = at + n == data.size();
    out.push_back(last ? 1 : 0);
    out.push_back(static_cast<char>(n & 0xFF));
    out.push_back(static_cast<char>(n >> 8));
    out.push_back(static_cast<char>(~n & 0xFF));
    out.push_back(static_cast<char>((~n >> 8) & 0xFF));
    out.append(data, at, n);
    at += n;
  } while (at < data.size());
  std::uint32_t a = 1, b = 0;
  for (const char ch : data) {
    a = (a + static_cast<unsigned char>(ch)) % 65521;
    b = (b + a) % 65521;
  }
  return out + be32((b << 16) | a);
}

inline std::string png_chunk(const std::string& type, const std::string& data) {
  return be32(static_cast<std::uint32_t>(data.size())) + type + data + be32(crc32_of(type + data));
}

struct png_spec {
  png_spec(std::uint32_t w, std::uint32_t h, int depth, int type, std::vector<std::string> r = {})
      : width(w), height(h), bit_depth(depth), color_type(type), rows(std::move(r)) {}
  std::uint32_t width;
  std::uint32_t height;
  int bit_depth;
  int color_type;                 // 0 grey, 2 RGB, 3 palette, 4 grey+alpha, 6 RGBA
  std::vector<std::string> rows;  // each row's bytes, without the filter byte
  std::vector<std::pair<std::string, std::string>> before;  // chunks before IDAT (PLTE, tRNS)
  std::vector<std::pair<std::string, std::string>> after;   // chunks after IDAT
};

inline std::string png_file(const png_spec& s) {
  std::string ihdr = be32(s.width) + be32(s.height);
  ihdr += {static_cast<char>(s.bit_depth), static_cast<char>(s.color_type), 0, 0, 0};
  std::string raw;
  for (const auto& row : s.rows) raw += '\0' + row;
  std::string file = "\x89PNG\r\n\x1a\n" + png_chunk("IHDR", ihdr);
  for (const auto& [type, data] : s.before) file += png_chunk(type, data);
  file += png_chunk("IDAT", zlib_stored(raw));
  for (const auto& [type, data] : s.after) file += png_chunk(type, data);
  return file + png_chunk("IEND", "");
}

// A byte string of the given values.
inline std::string bytes_of(std::initializer_list<int> values) {
  std::string s;
  for (const int v : values) s.push_back(static_cast<char>(v));
  return s;
}

}  // namespace orch::testing
