// PNG through libpng (image_codec.hpp). libpng reports an error by longjmp'ing to the last
// setjmp on its png_struct, past every frame between: so each call into it that may fail runs
// inside one of the read_*/write_* functions below, which call setjmp themselves and hold
// nothing but plain data and pointers (no destructor can be skipped), and libpng's callbacks are
// plain too (a C++ exception never crosses libpng; one a callback meets is turned into a
// png_error). The png_structs, buffers and vectors are owned by the C++ callers, whose frames the
// longjmp never leaves, and which free them whatever happened.
#include <png.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "image_codec_parts.hpp"
#include "png_metadata.hpp"

namespace orch::serve {

namespace {

using image_parts::unreadable;
using image_parts::unwritable;

// What libpng's callbacks reach: plain data, so that a longjmp out of them skips nothing.
struct png_job {
  const unsigned char* data = nullptr;  // reading: the file, and how far it was read
  std::size_t size = 0;
  std::size_t at = 0;
  png_metadata_reader* metadata = nullptr;   // reading: its text chunks go here
  std::vector<std::uint8_t>* out = nullptr;  // writing: the encoded bytes
  bool truncated = false;                    // reading: the file ended early
  char message[256] = {};                    // libpng's error, or a callback's
};

void on_error(png_structp png, png_const_charp message) {
  auto* job = static_cast<png_job*>(png_get_error_ptr(png));
  if (job->message[0] == '\0') std::snprintf(job->message, sizeof job->message, "%s", message);
  png_longjmp(png, 1);
}

// libpng goes on after a warning (an ancillary chunk it drops); the image is still read.
void on_warning(png_structp, png_const_charp) {}

void read_bytes(png_structp png, png_bytep into, std::size_t n) {
  auto* job = static_cast<png_job*>(png_get_io_ptr(png));
  if (n > job->size - job->at) {
    job->truncated = true;
    png_error(png, "the file ends early (truncated)");
  }
  std::memcpy(into, job->data + job->at, n);
  job->at += n;
}

// Text chunks and iCCP, handed over raw (png_metadata.hpp); every other unknown chunk is dropped
// (1: handled), as Pillow skips what it does not know.
int take_chunk(png_structp png, png_unknown_chunkp chunk) {
  auto* job = static_cast<png_job*>(png_get_user_chunk_ptr(png));
  if (job->metadata->take(reinterpret_cast<const char*>(chunk->name), chunk->data, chunk->size))
    return 1;
  std::snprintf(job->message, sizeof job->message, "%s", job->metadata->failure().c_str());
  return -1;  // libpng raises a chunk error, which on_error turns into this message
}

void write_bytes(png_structp png, png_bytep data, std::size_t n) {
  auto* job = static_cast<png_job*>(png_get_io_ptr(png));
  bool failed = false;
  try {
    job->out->insert(job->out->end(), data, data + n);
  } catch (const std::bad_alloc&) {
    failed = true;
  }
  if (failed) png_error(png, "no memory for the encoded image");
}

void flush_bytes(png_structp) {}

// The header. 0 after a libpng error (job->message).
int read_header(png_structp png, png_infop info) {
  if (setjmp(png_jmpbuf(png))) return 0;
  png_read_info(png, info);
  return 1;
}

// The transformations chosen, and the row size they give. 0 after a libpng error.
int read_layout(png_structp png, png_infop info, bool keep_16_bit_grey, std::size_t* row_bytes) {
  if (setjmp(png_jmpbuf(png))) return 0;
  const png_byte type = png_get_color_type(png, info);
  const png_byte depth = png_get_bit_depth(png, info);
  if (type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (type == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (png_get_valid(png, info, PNG_INFO_tRNS) != 0) png_set_tRNS_to_alpha(png);
  if (!keep_16_bit_grey) {
    // Pillow keeps a 16-bit channel's high byte (its RGB;16B, RGBA;16B and LA;16B raw modes).
    if (depth == 16) png_set_strip_16(png);
    if (type == PNG_COLOR_TYPE_GRAY || type == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
    png_set_add_alpha(png, 0xFF, PNG_FILLER_AFTER);
  }
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  *row_bytes = png_get_rowbytes(png, info);
  return 1;
}

// The pixels. 0 after a libpng error.
int read_pixels(png_structp png, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return 0;
  png_read_image(png, rows);
  return 1;
}

// The chunks after the pixels, to IEND. 0 after a libpng error.
int read_end(png_structp png, png_infop info) {
  if (setjmp(png_jmpbuf(png))) return 0;
  png_read_end(png, info);
  return 1;
}

struct png_write_request {
  const std::uint8_t* pixels;
  std::uint32_t width;
  std::uint32_t height;
  int channels;
  int level;
  const png_unknown_chunk* chunks;
  int chunk_count;
};

// The whole file, written through write_bytes. 0 after a libpng error.
int write_png(png_structp png, png_infop info, const png_write_request* r) {
  if (setjmp(png_jmpbuf(png))) return 0;
  png_set_IHDR(png, info, r->width, r->height, 8,
               r->channels == 4 ? PNG_COLOR_TYPE_RGB_ALPHA : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_compression_level(png, r->level);
  if (r->chunk_count > 0) {
    // iCCP is not safe to copy: libpng writes an unknown chunk of that kind only when told.
    png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_ALWAYS,
                                reinterpret_cast<png_const_bytep>("iCCP"), 1);
    png_set_unknown_chunks(png, info, r->chunks, r->chunk_count);
  }
  png_write_info(png, info);
  const std::size_t stride = std::size_t{r->width} * static_cast<std::size_t>(r->channels);
  for (std::uint32_t y = 0; y < r->height; ++y) png_write_row(png, r->pixels + stride * y);
  png_write_end(png, info);
  return 1;
}

struct read_structs {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~read_structs() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

struct write_structs {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~write_structs() { png_destroy_write_struct(&png, info ? &info : nullptr); }
};

std::string failure_of(const png_job& job) {
  return job.message[0] != '\0' ? std::string(job.message) : std::string("libpng failed");
}

// Pillow's mode for a PNG (its PngImagePlugin._MODES).
pil_mode mode_of(png_byte type, png_byte depth) {
  switch (type) {
    case PNG_COLOR_TYPE_GRAY:
      return depth == 1 ? pil_mode::bilevel : depth == 16 ? pil_mode::i : pil_mode::l;
    case PNG_COLOR_TYPE_PALETTE:
      return pil_mode::p;
    case PNG_COLOR_TYPE_GRAY_ALPHA:
      return depth == 16 ? pil_mode::rgba : pil_mode::la;
    case PNG_COLOR_TYPE_RGB_ALPHA:
      return pil_mode::rgba;
    default:
      return pil_mode::rgb;
  }
}

// Pillow's "I" (16-bit grey) to RGBA, as its convert("RGBA") makes it: each value clipped at
// 255, not scaled; a tRNS colour already made alpha by libpng (0 or 65535: its high byte).
void clip_16_bit_grey(const std::vector<std::uint8_t>& grey, bool with_alpha,
                      std::vector<std::uint8_t>& rgba) {
  const std::size_t step = with_alpha ? 4 : 2;
  for (std::size_t i = 0, o = 0; o < rgba.size(); i += step, o += 4) {
    const unsigned v = (unsigned{grey[i]} << 8) | grey[i + 1];
    const auto c = static_cast<std::uint8_t>(v > 255 ? 255 : v);
    rgba[o] = rgba[o + 1] = rgba[o + 2] = c;
    rgba[o + 3] = with_alpha ? grey[i + 2] : 0xFF;
  }
}

}  // namespace

namespace image_parts {

result<decoded_image> decode_png(std::string_view bytes, std::uint64_t max_pixels) {
  png_job job;
  job.data = reinterpret_cast<const unsigned char*>(bytes.data());
  job.size = bytes.size();
  png_metadata_reader metadata;
  job.metadata = &metadata;
  read_structs s;
  s.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &job, on_error, on_warning);
  if (s.png != nullptr) s.info = png_create_info_struct(s.png);
  if (s.info == nullptr) return unreadable("PNG", "libpng could not start (no memory)");
  png_set_read_fn(s.png, &job, read_bytes);
  // One ancillary chunk may take 8 MiB in memory (libpng's default, said here so it stays).
  png_set_chunk_malloc_max(s.png, 8u << 20);
  png_set_keep_unknown_chunks(s.png, PNG_HANDLE_CHUNK_ALWAYS,
                              reinterpret_cast<png_const_bytep>(png_metadata_reader::chunk_list),
                              png_metadata_reader::chunk_count);
  png_set_read_user_chunk_fn(s.png, &job, take_chunk);

  if (read_header(s.png, s.info) == 0) return unreadable("PNG", failure_of(job));
  decoded_image image;
  image.format = image_format::png;
  image.width = png_get_image_width(s.png, s.info);
  image.height = png_get_image_height(s.png, s.info);
  if (auto refused = image_parts::size_refused("PNG", image.width, image.height, max_pixels))
    return *refused;
  const png_byte type = png_get_color_type(s.png, s.info);
  const png_byte depth = png_get_bit_depth(s.png, s.info);
  image.mode = mode_of(type, depth);
  const bool has_trns = png_get_valid(s.png, s.info, PNG_INFO_tRNS) != 0;
  image.has_transparency = has_trns && (type == PNG_COLOR_TYPE_GRAY || type == PNG_COLOR_TYPE_RGB ||
                                        type == PNG_COLOR_TYPE_PALETTE);
  const bool grey_16 = image.mode == pil_mode::i;
  std::size_t row_bytes = 0;
  if (read_layout(s.png, s.info, grey_16, &row_bytes) == 0)
    return unreadable("PNG", failure_of(job));
  const std::size_t pixels = std::size_t{image.width} * image.height;
  const std::size_t expected = std::size_t{image.width} * (grey_16 ? (has_trns ? 4 : 2) : 4);
  if (row_bytes != expected)
    return unreadable("PNG", "libpng gives rows of " + std::to_string(row_bytes) + " bytes where " +
                                 std::to_string(expected) + " were expected");
  try {
    std::vector<std::uint8_t> buffer(row_bytes * image.height);
    std::vector<png_bytep> rows(image.height);
    for (std::uint32_t y = 0; y < image.height; ++y) rows[y] = buffer.data() + row_bytes * y;
    if (read_pixels(s.png, rows.data()) == 0) return unreadable("PNG", failure_of(job));
    // Pillow reads a file that ends once its pixels are whole (no IEND), with the text chunks
    // it met; anything else wrong after the pixels refuses it.
    if (read_end(s.png, s.info) == 0 && !job.truncated) return unreadable("PNG", failure_of(job));
    if (grey_16) {
      image.rgba.resize(pixels * 4);
      clip_16_bit_grey(buffer, has_trns, image.rgba);
    } else {
      image.rgba = std::move(buffer);
    }
  } catch (const std::bad_alloc&) {
    return unreadable("PNG", "no memory for its " + std::to_string(pixels) + " pixels");
  }
  image.metadata = metadata.release();
  return image;
}

}  // namespace image_parts

result<std::vector<std::uint8_t>> encode_png(const std::uint8_t* pixels, std::uint32_t width,
                                             std::uint32_t height, int channels, int compress_level,
                                             const image_metadata* metadata) {
  if (pixels == nullptr || width == 0 || height == 0 || (channels != 3 && channels != 4))
    return unwritable("PNG", "it needs pixels, a size of at least 1 x 1 and 3 or 4 channels");
  if (compress_level < 0 || compress_level > 9)
    return unwritable("PNG",
                      "compress_level must be 0 to 9, not " + std::to_string(compress_level));
  std::vector<std::uint8_t> out;
  png_job job;
  job.out = &out;
  try {
    std::vector<std::pair<std::string, std::string>> chunks;
    if (metadata != nullptr) chunks = png_metadata_chunks(*metadata);
    std::vector<png_unknown_chunk> unknown(chunks.size());
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      std::memcpy(unknown[i].name, chunks[i].first.data(), 4);
      unknown[i].name[4] = 0;
      unknown[i].data = reinterpret_cast<png_byte*>(chunks[i].second.data());
      unknown[i].size = chunks[i].second.size();
      unknown[i].location = PNG_HAVE_IHDR;  // after IHDR, before the pixels, as Pillow puts them
    }
    write_structs s;
    s.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &job, on_error, on_warning);
    if (s.png != nullptr) s.info = png_create_info_struct(s.png);
    if (s.info == nullptr) return unwritable("PNG", "libpng could not start (no memory)");
    png_set_write_fn(s.png, &job, write_bytes, flush_bytes);
    out.reserve(std::size_t{width} * height / 2 + 1024);
    const png_write_request request{pixels,
                                    width,
                                    height,
                                    channels,
                                    compress_level,
                                    unknown.data(),
                                    static_cast<int>(unknown.size())};
    if (write_png(s.png, s.info, &request) == 0) return unwritable("PNG", failure_of(job));
  } catch (const std::bad_alloc&) {
    return unwritable("PNG", "no memory for the encoded image");
  }
  return out;
}

}  // namespace orch::serve
