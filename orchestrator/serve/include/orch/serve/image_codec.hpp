// image_codec: PNG, JPEG and WebP read into 8-bit pixels and written back, through Debian's
// libpng, libjpeg-turbo and libwebp (their C APIs; no codec of our own), for serve's
// `GET /view?preview=&channel=` and `POST /upload/mask` (docs/serve.md), and for live previews.
//
// What serve mirrors is ComfyUI's server.py, which reads images with Pillow (9.4, Debian 12's):
// so a decoded image carries the mode Pillow would open the file in, and its pixels are what
// Pillow's convert("RGBA") makes of it (palette and tRNS expanded, 16-bit channels cut to their
// high byte, 16-bit grey clipped at 255, CMYK converted with Pillow's formula).
//
// Every input is untrusted. A malformed, truncated or hostile file is an error, never a crash:
// libpng's and libjpeg's errors longjmp back into small C-style functions that hold no C++
// object (src/png_codec.cpp, src/jpeg_codec.cpp), whose C++ callers free what the libraries
// allocated. Memory is bounded before it is spent: an image's size is read from its header and
// refused past `max_image_pixels`, before its pixels are allocated; text chunks are inflated at
// most 1 MiB each and 64 MiB in all (Pillow's limits); a progressive JPEG may have at most 500
// scans (libjpeg-turbo's own TJFLAG_LIMITSCANS).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "orch/support/result.hpp"

namespace orch::serve {

// The most pixels (width * height) serve decodes: 2^26 = 67,108,864, an 8192 x 8192 image (a 4x
// upscale of 2048 x 2048), 256 MiB as RGBA. Pillow warns of a decompression bomb past
// 89,478,485 pixels and refuses twice that; serve decodes on its one API thread, so at most one
// image (two for /upload/mask) of this size is held at once.
inline constexpr std::uint64_t max_image_pixels = std::uint64_t{1} << 26;
// The most bytes of a file read to decode it (a file past it is refused unread): 256 MiB, more
// than an 8192 x 8192 RGBA PNG needs uncompressed.
inline constexpr std::size_t max_image_file_bytes = std::size_t{256} << 20;

enum class image_format { png, jpeg, webp };

// The mode Pillow opens a file in (its `Image.mode`), which decides what server.py does with it:
// only an `rgba` image has an alpha channel of its own for `channel=a`, and a WebP preview keeps
// the alpha of `rgba`, `la` and a `p` with transparency. PNG: grey of 1 bit is `bilevel`, of 2
// to 8 bits `l`, of 16 bits `i`; grey with alpha of 8 bits `la`, of 16 bits `rgba` (Pillow's
// _MODES). JPEG: `l`, `rgb` or `cmyk`. WebP: `rgba` when its header says it has alpha.
enum class pil_mode { bilevel, l, i, p, la, rgb, rgba, cmyk };

// A PNG text chunk as Pillow reads it into `PngImageFile.text`: tEXt and zTXt (inflated) as
// Latin-1 bytes, iTXt (inflated) as UTF-8 with its language and translated keyword.
struct png_text {
  std::string keyword;
  std::string text;
  bool international = false;  // an iTXt chunk
  std::string language;
  std::string translated_keyword;
};

// What of a file serve carries into another (/upload/mask keeps it, as Pillow does).
struct image_metadata {
  std::vector<png_text> texts;  // PNG only, in the order of their first keyword; a keyword
                                // given twice keeps its first place and its last text (a dict)
  std::string icc_profile;      // the ICC profile, uncompressed (PNG iCCP, JPEG APP2, WebP ICCP)
};

struct decoded_image {
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  image_format format = image_format::png;
  pil_mode mode = pil_mode::rgb;
  // Pillow's info["transparency"]: a PNG tRNS chunk on a grey, RGB or palette image.
  bool has_transparency = false;
  std::vector<std::uint8_t> rgba;  // width * height * 4 bytes, rows top down
  image_metadata metadata;
};

// The image in `bytes` (PNG, JPEG or WebP, told by their signature; an animated WebP is its
// first frame, as Pillow opens it). Errors: image_unreadable (another format, or malformed or
// truncated; the message says which and where), image_too_large (more than `max_pixels`).
result<decoded_image> decode_image(std::string_view bytes,
                                   std::uint64_t max_pixels = max_image_pixels);

// The image in the open file `fd` (read from its current offset). Errors: as decode_image's,
// image_too_large for a file over max_image_file_bytes, file_io_failed when it cannot be read.
result<decoded_image> decode_image_file(int fd, std::uint64_t max_pixels = max_image_pixels);

// `pixels` (width * height * channels bytes, rows top down; channels 3 for RGB, 4 for RGBA)
// as a PNG of 8-bit channels, deflated at `compress_level` (0 to 9; zlib's, as Pillow's
// compress_level). With `metadata`, its ICC profile (as an iCCP chunk named "ICC Profile") and
// its texts (tEXt, or iTXt for an international one, uncompressed) come before the pixels, as
// Pillow's PngInfo.add_text writes them. Errors: image_unwritable (a bad argument; the
// message names it).
result<std::vector<std::uint8_t>> encode_png(const std::uint8_t* pixels, std::uint32_t width,
                                             std::uint32_t height, int channels, int compress_level,
                                             const image_metadata* metadata = nullptr);

// `rgb` (width * height * 3 bytes) as a baseline JPEG of `quality` (libjpeg's scale, clamped to
// 1..100 as jpeg_set_quality does), 4:2:0, standard Huffman tables: Pillow's defaults, so the
// bytes are those `Image.save(format="jpeg", quality=q)` writes with the same libjpeg.
// Errors: image_unwritable (a side past JPEG's 65,500 pixels, a bad argument).
result<std::vector<std::uint8_t>> encode_jpeg(const std::uint8_t* rgb, std::uint32_t width,
                                              std::uint32_t height, int quality);

// `pixels` (channels 3 or 4) as a lossy WebP of `quality` (0 to 100; method 4, Pillow's
// defaults). Errors: image_unwritable (a quality outside 0..100, as libwebp's
// WebPValidateConfig refuses it; a side past WebP's 16,383 pixels).
result<std::vector<std::uint8_t>> encode_webp(const std::uint8_t* pixels, std::uint32_t width,
                                              std::uint32_t height, int channels, float quality);

// The RGB of `image` (its alpha dropped): what Pillow's convert("RGB") makes of the file.
std::vector<std::uint8_t> rgb_of(const decoded_image& image);

}  // namespace orch::serve
