// JPEG through libjpeg-turbo (image_codec.hpp). libjpeg reports an error through its error
// manager's error_exit, which must not return: ours longjmps to the setjmp in the read_*/write_*
// function that made the call. Those functions hold nothing but plain data and pointers, so the
// jump skips no destructor; the jpeg structs are plain C structs owned by the C++ callers, whose
// frames the jump never leaves, and which destroy them (and free libjpeg's malloc'ed outputs)
// whatever happened.
#include <csetjmp>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

// jpeglib.h needs size_t and FILE declared first, and jerror.h's codes come after it.
#include <jpeglib.h>

#include <jerror.h>

#include "image_codec_parts.hpp"

namespace orch::serve {

namespace {

using image_parts::unreadable;
using image_parts::unwritable;

// libjpeg-turbo's own limit for untrusted progressive JPEGs (turbojpeg's TJFLAG_LIMITSCANS): each
// scan may walk the whole image, so thousands of tiny scans cost far more than their bytes.
constexpr int max_scans = 500;

// The error manager first, so that libjpeg's pointer to it is a pointer to the whole.
struct jpeg_failure {
  jpeg_error_mgr manager;
  jpeg_progress_mgr progress;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

jpeg_failure* failure_of(j_common_ptr cinfo) {
  return reinterpret_cast<jpeg_failure*>(cinfo->err);
}

[[noreturn]] void fail(j_common_ptr cinfo) {
  jpeg_failure* f = failure_of(cinfo);
  (*cinfo->err->format_message)(cinfo, f->message);
  std::longjmp(f->jump, 1);
}

// Warnings (corrupt data libjpeg works around) are let go, as Pillow lets them go, but for the
// end of the data: Pillow refuses a truncated file, and libjpeg would fill the rest with grey.
void note(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) fail(cinfo);
}

void count_scans(j_common_ptr cinfo) {
  if (cinfo->is_decompressor &&
      reinterpret_cast<j_decompress_ptr>(cinfo)->input_scan_number > max_scans) {
    jpeg_failure* f = failure_of(cinfo);
    std::snprintf(f->message, sizeof f->message,
                  "it is a progressive JPEG of more than %d scans (libjpeg-turbo's limit)",
                  max_scans);
    std::longjmp(f->jump, 1);
  }
}

void install(jpeg_failure& f) {
  jpeg_std_error(&f.manager);
  f.manager.error_exit = fail;
  f.manager.emit_message = note;
  f.progress.progress_monitor = count_scans;
  f.message[0] = '\0';
}

// The header and any ICC profile (malloc'ed, for the caller to free). 0 after an error.
int read_header(j_decompress_ptr cinfo, jpeg_failure* f, const unsigned char* data,
                unsigned long size, JOCTET** icc, unsigned int* icc_size) {
  if (setjmp(f->jump)) return 0;
  jpeg_create_decompress(cinfo);
  cinfo->progress = &f->progress;
  jpeg_mem_src(cinfo, data, size);
  jpeg_save_markers(cinfo, JPEG_APP0 + 2, 0xFFFF);
  jpeg_read_header(cinfo, TRUE);
  if (!jpeg_read_icc_profile(cinfo, icc, icc_size)) *icc = nullptr;
  return 1;
}

// The pixels, `row_bytes` a row, into `out`. 0 after an error.
int read_pixels(j_decompress_ptr cinfo, jpeg_failure* f, unsigned char* out,
                std::size_t row_bytes) {
  if (setjmp(f->jump)) return 0;
  jpeg_start_decompress(cinfo);
  while (cinfo->output_scanline < cinfo->output_height) {
    JSAMPROW row = out + row_bytes * cinfo->output_scanline;
    jpeg_read_scanlines(cinfo, &row, 1);
  }
  jpeg_finish_decompress(cinfo);
  return 1;
}

struct jpeg_write_request {
  const unsigned char* rgb;
  std::uint32_t width;
  std::uint32_t height;
  int quality;
};

// The whole file into a buffer jpeg_mem_dest mallocs (*out, for the caller to free). 0 after an
// error.
int write_jpeg(j_compress_ptr cinfo, jpeg_failure* f, const jpeg_write_request* r,
               unsigned char** out, unsigned long* out_size) {
  if (setjmp(f->jump)) return 0;
  jpeg_create_compress(cinfo);
  jpeg_mem_dest(cinfo, out, out_size);
  cinfo->image_width = r->width;
  cinfo->image_height = r->height;
  cinfo->input_components = 3;
  cinfo->in_color_space = JCS_RGB;
  // Pillow's JpegEncode: libjpeg's defaults (4:2:0, standard Huffman tables, a JFIF header),
  // then the quality as a baseline-compatible scale.
  jpeg_set_defaults(cinfo);
  jpeg_set_quality(cinfo, r->quality, TRUE);
  jpeg_start_compress(cinfo, TRUE);
  const std::size_t stride = std::size_t{r->width} * 3;
  while (cinfo->next_scanline < cinfo->image_height) {
    // libjpeg's row type is not const; it only reads the rows it is given.
    JSAMPROW row = const_cast<unsigned char*>(r->rgb + stride * cinfo->next_scanline);
    jpeg_write_scanlines(cinfo, &row, 1);
  }
  jpeg_finish_compress(cinfo);
  return 1;
}

// Pillow's CMYK JPEG: stored inverted (it assumes Adobe's polarity for every CMYK JPEG), then
// its cmyk2rgb: each of R, G, B is (255 - K) less C (M, Y) scaled by (255 - K) / 255.
void cmyk_to_rgba(std::vector<std::uint8_t>& px) {
  const auto times = [](unsigned a, unsigned b) {
    const unsigned t = a * b + 128;
    return ((t >> 8) + t) >> 8;
  };
  for (std::size_t i = 0; i + 3 < px.size(); i += 4) {
    const unsigned nk = px[i + 3];  // 255 - (255 - stored K)
    for (std::size_t c = 0; c < 3; ++c) {
      const unsigned v = 255u - px[i + c];
      px[i + c] = static_cast<std::uint8_t>(nk - times(v, nk));
    }
    px[i + 3] = 0xFF;
  }
}

}  // namespace

namespace image_parts {

result<decoded_image> decode_jpeg(std::string_view bytes, std::uint64_t max_pixels) {
  jpeg_failure f;
  install(f);
  jpeg_decompress_struct cinfo{};
  cinfo.err = &f.manager;
  JOCTET* icc = nullptr;
  unsigned int icc_size = 0;
  struct cleanup {
    jpeg_decompress_struct& cinfo;
    JOCTET*& icc;
    ~cleanup() {
      jpeg_destroy_decompress(&cinfo);
      std::free(icc);
    }
  } done{cinfo, icc};
  if (read_header(&cinfo, &f, reinterpret_cast<const unsigned char*>(bytes.data()),
                  static_cast<unsigned long>(bytes.size()), &icc, &icc_size) == 0)
    return unreadable("JPEG", f.message);
  decoded_image image;
  image.format = image_format::jpeg;
  image.width = cinfo.image_width;
  image.height = cinfo.image_height;
  if (auto refused = image_parts::size_refused("JPEG", image.width, image.height, max_pixels))
    return *refused;
  // Pillow's modes by the number of components (JpegImagePlugin's SOF): 1 L, 3 RGB, 4 CMYK.
  switch (cinfo.num_components) {
    case 1:
      image.mode = pil_mode::l;
      cinfo.out_color_space = JCS_EXT_RGBA;
      break;
    case 3:
      image.mode = pil_mode::rgb;
      cinfo.out_color_space = JCS_EXT_RGBA;
      break;
    case 4:
      image.mode = pil_mode::cmyk;
      cinfo.out_color_space = JCS_CMYK;
      break;
    default:
      return unreadable("JPEG", "it has " + std::to_string(cinfo.num_components) +
                                    " components; a JPEG of 1, 3 or 4 is read");
  }
  // Whole-image buffers (a progressive JPEG's coefficients) within what its pixels justify;
  // past this libjpeg stops rather than ask for more.
  cinfo.mem->max_memory_to_use = static_cast<long>(max_pixels) * 16 + (64L << 20);
  try {
    image.rgba.resize(std::size_t{image.width} * image.height * 4);
  } catch (const std::bad_alloc&) {
    return unreadable("JPEG", "no memory for its pixels");
  }
  if (read_pixels(&cinfo, &f, image.rgba.data(), std::size_t{image.width} * 4) == 0)
    return unreadable("JPEG", f.message);
  if (image.mode == pil_mode::cmyk) cmyk_to_rgba(image.rgba);
  if (icc != nullptr) image.metadata.icc_profile.assign(reinterpret_cast<char*>(icc), icc_size);
  return image;
}

}  // namespace image_parts

result<std::vector<std::uint8_t>> encode_jpeg(const std::uint8_t* rgb, std::uint32_t width,
                                              std::uint32_t height, int quality) {
  if (rgb == nullptr || width == 0 || height == 0)
    return unwritable("JPEG", "it needs pixels and a size of at least 1 x 1");
  if (width > JPEG_MAX_DIMENSION || height > JPEG_MAX_DIMENSION)
    return unwritable("JPEG", "it is " + std::to_string(width) + " x " + std::to_string(height) +
                                  " and a JPEG's sides are at most 65500 pixels");
  jpeg_failure f;
  install(f);
  jpeg_compress_struct cinfo{};
  cinfo.err = &f.manager;
  unsigned char* out = nullptr;
  unsigned long out_size = 0;
  struct cleanup {
    jpeg_compress_struct& cinfo;
    unsigned char*& out;
    ~cleanup() {
      jpeg_destroy_compress(&cinfo);
      std::free(out);
    }
  } done{cinfo, out};
  const jpeg_write_request request{rgb, width, height, quality};
  if (write_jpeg(&cinfo, &f, &request, &out, &out_size) == 0) return unwritable("JPEG", f.message);
  try {
    return std::vector<std::uint8_t>(out, out + out_size);
  } catch (const std::bad_alloc&) {
    return unwritable("JPEG", "no memory for the encoded image");
  }
}

}  // namespace orch::serve
