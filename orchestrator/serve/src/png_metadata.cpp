#include "png_metadata.hpp"

#include <zlib.h>

#include <cstring>
#include <new>
#include <string_view>

#include "orch/serve/errc.hpp"

namespace orch::serve {

namespace {

// Pillow's ImageFile.SAFEBLOCK, its MAX_TEXT_CHUNK, and its MAX_TEXT_MEMORY (64 of them).
constexpr std::size_t max_text_chunk = std::size_t{1} << 20;
constexpr std::size_t max_text_memory = 64 * max_text_chunk;

enum class inflated { ok, too_large, corrupt };

// zlib.decompressobj().decompress(data, max_text_chunk) as Pillow's _safe_zlib_decompress uses
// it: what inflates within the limit; too_large when input is left over once the limit is
// reached (Python's unconsumed_tail), corrupt for zlib's errors. A stream that ends early gives
// what it held, and bytes after its end are ignored (unused_data), as in Python.
inflated inflate_at_most(std::string_view data, std::string& out) {
  out.assign(max_text_chunk, '\0');
  z_stream z{};
  if (inflateInit(&z) != Z_OK) return inflated::corrupt;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  int r = Z_OK;
  while (z.avail_out > 0) {
    r = inflate(&z, Z_SYNC_FLUSH);
    if (r == Z_STREAM_END || r == Z_BUF_ERROR) break;
    if (r != Z_OK) break;
  }
  const bool ended = r == Z_STREAM_END;
  const bool left_over = !ended && z.avail_in > 0;
  out.resize(z.total_out);
  inflateEnd(&z);
  if (r != Z_OK && r != Z_STREAM_END && r != Z_BUF_ERROR) return inflated::corrupt;
  return left_over ? inflated::too_large : inflated::ok;
}

// Python's len() of UTF-8 text: its code points (what Pillow counts for an iTXt).
std::size_t code_points(std::string_view utf8) {
  std::size_t n = 0;
  for (const char c : utf8)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  return n;
}

// Whether `s` is UTF-8 as Python's strict decoder takes it: no overlong form, no surrogate,
// nothing past U+10FFFF.
bool is_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if (c >= 0xC2 && c <= 0xDF) {
      n = 1;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 2;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (n >= s.size() - i) return false;  // cut short
    for (std::size_t k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    if ((n == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
      return false;
    i += n + 1;
  }
  return true;
}

// `s` split at its first NUL: (all of it, "") when it has none.
std::pair<std::string_view, std::string_view> split_at_nul(std::string_view s) {
  const auto nul = s.find('\0');
  if (nul == std::string_view::npos) return {s, {}};
  return {s.substr(0, nul), s.substr(nul + 1)};
}

}  // namespace

bool png_metadata_reader::refuse(std::string why) {
  failure_ = std::move(why);
  return false;
}

bool png_metadata_reader::take_text(std::string keyword, std::string text, bool international,
                                    std::string language, std::string translated,
                                    std::size_t counted) {
  png_text t{std::move(keyword), std::move(text), international, std::move(language),
             std::move(translated)};
  if (const auto it = index_.find(t.keyword); it != index_.end()) {
    metadata_.texts[it->second] = std::move(t);
  } else {
    index_.emplace(t.keyword, metadata_.texts.size());
    metadata_.texts.push_back(std::move(t));
  }
  text_memory_ += counted;
  if (text_memory_ > max_text_memory)
    return refuse("its text chunks hold more than 64 MiB of text (Pillow's MAX_TEXT_MEMORY)");
  return true;
}

bool png_metadata_reader::take(const char* type, const std::uint8_t* data,
                               std::size_t size) noexcept {
  try {
    const std::string_view chunk(reinterpret_cast<const char*>(data), size);
    const std::string_view name(type, 4);
    std::string out;
    if (name == "tEXt") {
      const auto [k, v] = split_at_nul(chunk);
      if (k.empty()) return true;
      return take_text(std::string(k), std::string(v), false, {}, {}, v.size());
    }
    if (name == "zTXt") {
      const auto [k, v] = split_at_nul(chunk);
      if (!v.empty() && v[0] != '\0')
        return refuse("a zTXt chunk has an unknown compression method (" +
                      std::to_string(static_cast<unsigned char>(v[0])) + ")");
      const auto r = inflate_at_most(v.empty() ? v : v.substr(1), out);
      if (r == inflated::too_large)
        return refuse("a zTXt chunk inflates past 1 MiB (Pillow's MAX_TEXT_CHUNK)");
      if (r == inflated::corrupt) out.clear();
      if (k.empty()) return true;
      const std::size_t n = out.size();
      return take_text(std::string(k), std::move(out), false, {}, {}, n);
    }
    if (name == "iTXt") {
      const auto nul = chunk.find('\0');
      if (nul == std::string_view::npos) return true;
      std::string_view rest = chunk.substr(nul + 1);
      if (rest.size() < 2) return true;
      const auto flag = static_cast<unsigned char>(rest[0]);
      const auto method = static_cast<unsigned char>(rest[1]);
      rest.remove_prefix(2);
      const auto first = rest.find('\0');
      const auto second = first == std::string_view::npos ? first : rest.find('\0', first + 1);
      if (second == std::string_view::npos) return true;
      const std::string_view language = rest.substr(0, first);
      const std::string_view translated = rest.substr(first + 1, second - first - 1);
      std::string_view text = rest.substr(second + 1);
      if (flag != 0) {
        if (method != 0) return true;
        const auto r = inflate_at_most(text, out);
        if (r == inflated::too_large)
          return refuse("an iTXt chunk inflates past 1 MiB (Pillow's MAX_TEXT_CHUNK)");
        if (r == inflated::corrupt) return true;
        text = out;
      }
      if (!is_utf8(language) || !is_utf8(translated) || !is_utf8(text)) return true;
      return take_text(std::string(chunk.substr(0, nul)), std::string(text), true,
                       std::string(language), std::string(translated), code_points(text));
    }
    if (name == "iCCP") {
      // Pillow reads the method byte at the NUL's own index, so only a chunk without a NUL
      // (whose last byte it reads instead) is refused.
      const auto nul = chunk.find('\0');
      if (nul == std::string_view::npos)
        return refuse("an iCCP chunk has no NUL after its profile name");
      const auto r = inflate_at_most(nul + 2 <= chunk.size() ? chunk.substr(nul + 2) : "", out);
      if (r == inflated::too_large)
        return refuse("an iCCP chunk inflates past 1 MiB (Pillow's MAX_TEXT_CHUNK)");
      metadata_.icc_profile = r == inflated::corrupt ? std::string() : std::move(out);
      return true;
    }
    return true;
  } catch (const std::bad_alloc&) {
    failure_ = "no memory for its text chunks";
    return false;
  }
}

image_metadata png_metadata_reader::release() {
  index_.clear();
  text_memory_ = 0;
  return std::exchange(metadata_, {});
}

std::vector<std::pair<std::string, std::string>> png_metadata_chunks(
    const image_metadata& metadata) {
  std::vector<std::pair<std::string, std::string>> chunks;
  if (!metadata.icc_profile.empty()) {
    uLongf size = compressBound(static_cast<uLong>(metadata.icc_profile.size()));
    std::string deflated(size, '\0');
    // zlib.compress's defaults: level 6, a 32 KiB window, memLevel 8.
    if (compress2(reinterpret_cast<Bytef*>(deflated.data()), &size,
                  reinterpret_cast<const Bytef*>(metadata.icc_profile.data()),
                  static_cast<uLong>(metadata.icc_profile.size()), Z_DEFAULT_COMPRESSION) == Z_OK) {
      deflated.resize(size);
      chunks.emplace_back("iCCP", std::string("ICC Profile\0\0", 13) + deflated);
    }
  }
  for (const auto& t : metadata.texts) {
    if (t.international)
      chunks.emplace_back("iTXt", t.keyword + std::string("\0\0\0", 3) + t.language + '\0' +
                                      t.translated_keyword + '\0' + t.text);
    else
      chunks.emplace_back("tEXt", t.keyword + '\0' + t.text);
  }
  return chunks;
}

}  // namespace orch::serve
