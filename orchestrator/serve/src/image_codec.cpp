// image_codec (image_codec.hpp): the format told from the signature, files read within their
// cap, and WebP through libwebp (whose API returns errors, so it needs no setjmp frame).
#include "orch/serve/image_codec.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <webp/decode.h>
#include <webp/demux.h>
#include <webp/encode.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <new>

#include "image_codec_parts.hpp"
#include "orch/support/errno_error.hpp"

namespace orch::serve {

namespace {

using image_parts::unreadable;
using image_parts::unwritable;

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

struct demuxer_deleter {
  void operator()(WebPDemuxer* d) const { WebPDemuxDelete(d); }
};
struct anim_decoder_deleter {
  void operator()(WebPAnimDecoder* d) const { WebPAnimDecoderDelete(d); }
};

// The first frame of an animated WebP on its canvas, as Pillow opens one (WebPAnimDecoder, its
// frames composited in RGBA).
bool first_frame(const WebPData& data, std::vector<std::uint8_t>& rgba) {
  WebPAnimDecoderOptions options;
  if (!WebPAnimDecoderOptionsInit(&options)) return false;
  options.color_mode = MODE_RGBA;
  options.use_threads = 0;
  std::unique_ptr<WebPAnimDecoder, anim_decoder_deleter> decoder(
      WebPAnimDecoderNew(&data, &options));
  std::uint8_t* frame = nullptr;
  int timestamp = 0;
  if (!decoder || !WebPAnimDecoderGetNext(decoder.get(), &frame, &timestamp)) return false;
  std::copy(frame, frame + rgba.size(), rgba.begin());
  return true;
}

}  // namespace

namespace image_parts {

result<decoded_image> decode_webp(std::string_view bytes, std::uint64_t max_pixels) {
  const auto* data = reinterpret_cast<const std::uint8_t*>(bytes.data());
  WebPBitstreamFeatures features;
  const VP8StatusCode status = WebPGetFeatures(data, bytes.size(), &features);
  if (status != VP8_STATUS_OK)
    return unreadable("WebP", status == VP8_STATUS_NOT_ENOUGH_DATA
                                  ? "the file ends early (truncated)"
                                  : "libwebp refuses its header (status " +
                                        std::to_string(static_cast<int>(status)) + ")");
  decoded_image image;
  image.format = image_format::webp;
  image.width = static_cast<std::uint32_t>(features.width);
  image.height = static_cast<std::uint32_t>(features.height);
  if (auto refused = size_refused("WebP", image.width, image.height, max_pixels)) return *refused;
  image.mode = features.has_alpha ? pil_mode::rgba : pil_mode::rgb;
  const std::size_t stride = std::size_t{image.width} * 4;
  try {
    image.rgba.resize(stride * image.height);
  } catch (const std::bad_alloc&) {
    return unreadable("WebP", "no memory for its pixels");
  }
  const WebPData whole{data, bytes.size()};
  if (features.has_animation) {
    if (!first_frame(whole, image.rgba))
      return unreadable("WebP", "libwebp cannot decode its first frame (malformed or truncated)");
  } else if (WebPDecodeRGBAInto(data, bytes.size(), image.rgba.data(), image.rgba.size(),
                                static_cast<int>(stride)) == nullptr) {
    return unreadable("WebP", "libwebp cannot decode its pixels (malformed or truncated)");
  }
  // Its ICC profile, which Pillow keeps in info["icc_profile"] (and /upload/mask in the PNG).
  std::unique_ptr<WebPDemuxer, demuxer_deleter> demux(WebPDemux(&whole));
  WebPChunkIterator chunk;
  if (demux && (WebPDemuxGetI(demux.get(), WEBP_FF_FORMAT_FLAGS) & ICCP_FLAG) != 0 &&
      WebPDemuxGetChunk(demux.get(), "ICCP", 1, &chunk)) {
    image.metadata.icc_profile.assign(reinterpret_cast<const char*>(chunk.chunk.bytes),
                                      chunk.chunk.size);
    WebPDemuxReleaseChunkIterator(&chunk);
  }
  return image;
}

}  // namespace image_parts

result<decoded_image> decode_image(std::string_view bytes, std::uint64_t max_pixels) {
  // The signatures Pillow's plugins accept: PNG's eight bytes, JPEG's SOI and a marker, and a
  // RIFF file of form WEBP.
  if (starts_with(bytes, "\x89PNG\r\n\x1a\n")) return image_parts::decode_png(bytes, max_pixels);
  if (starts_with(bytes, "\xFF\xD8\xFF")) return image_parts::decode_jpeg(bytes, max_pixels);
  if (starts_with(bytes, "RIFF") && bytes.size() >= 12 && bytes.substr(8, 4) == "WEBP")
    return image_parts::decode_webp(bytes, max_pixels);
  return error{serve_errc::image_unreadable,
               "the file is not a PNG, JPEG or WebP image (serve reads those three formats)"};
}

result<decoded_image> decode_image_file(int fd, std::uint64_t max_pixels) {
  const auto too_large = [] {
    return error{serve_errc::image_too_large,
                 "the file is larger than the " + std::to_string(max_image_file_bytes >> 20) +
                     " MiB serve reads to decode an image (max_image_file_bytes)"};
  };
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errno_error(serve_errc::file_io_failed, "fstat of the image");
  if (static_cast<std::uint64_t>(st.st_size) > max_image_file_bytes) return too_large();
  std::string bytes;
  try {
    // Its size once, rather than a string that doubles as it grows.
    bytes.resize(static_cast<std::size_t>(st.st_size) + 1);
  } catch (const std::bad_alloc&) {
    return error{serve_errc::image_too_large, "no memory to read the image"};
  }
  std::size_t at = 0;
  for (;;) {
    if (at == bytes.size()) {
      if (bytes.size() > max_image_file_bytes) return too_large();  // it grew meanwhile
      bytes.resize(std::min(bytes.size() * 2, max_image_file_bytes + 1));
    }
    const ssize_t n = ::read(fd, bytes.data() + at, bytes.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error(serve_errc::file_io_failed, "reading the image");
    if (n == 0) break;
    at += static_cast<std::size_t>(n);
  }
  bytes.resize(at);
  return decode_image(bytes, max_pixels);
}

result<std::vector<std::uint8_t>> encode_webp(const std::uint8_t* pixels, std::uint32_t width,
                                              std::uint32_t height, int channels, float quality) {
  if (pixels == nullptr || width == 0 || height == 0 || (channels != 3 && channels != 4))
    return unwritable("WebP", "it needs pixels, a size of at least 1 x 1 and 3 or 4 channels");
  if (width > WEBP_MAX_DIMENSION || height > WEBP_MAX_DIMENSION)
    return unwritable("WebP", "it is " + std::to_string(width) + " x " + std::to_string(height) +
                                  " and a WebP's sides are at most 16383 pixels");
  // Pillow's WebPEncode: the default preset at this quality, lossy, method 4, not exact.
  WebPConfig config;
  if (!WebPConfigPreset(&config, WEBP_PRESET_DEFAULT, quality))
    return unwritable("WebP", "libwebp's configuration could not start");
  config.lossless = 0;
  config.quality = quality;
  config.method = 4;
  config.exact = 0;
  if (!WebPValidateConfig(&config))
    return unwritable("WebP", "the quality must be 0 to 100, not " + std::to_string(quality));
  WebPPicture picture;
  if (!WebPPictureInit(&picture)) return unwritable("WebP", "libwebp's picture could not start");
  picture.width = static_cast<int>(width);
  picture.height = static_cast<int>(height);
  picture.use_argb = 1;
  WebPMemoryWriter writer;
  WebPMemoryWriterInit(&writer);
  struct cleanup {
    WebPPicture& picture;
    WebPMemoryWriter& writer;
    ~cleanup() {
      WebPPictureFree(&picture);
      WebPMemoryWriterClear(&writer);
    }
  } done{picture, writer};
  const int stride = static_cast<int>(width) * channels;
  const int imported = channels == 4 ? WebPPictureImportRGBA(&picture, pixels, stride)
                                     : WebPPictureImportRGB(&picture, pixels, stride);
  if (!imported) return unwritable("WebP", "no memory for its pixels");
  picture.writer = WebPMemoryWrite;
  picture.custom_ptr = &writer;
  if (!WebPEncode(&config, &picture))
    return unwritable("WebP", "libwebp's encoder failed (error " +
                                  std::to_string(static_cast<int>(picture.error_code)) + ")");
  try {
    return std::vector<std::uint8_t>(writer.mem, writer.mem + writer.size);
  } catch (const std::bad_alloc&) {
    return unwritable("WebP", "no memory for the encoded image");
  }
}

std::vector<std::uint8_t> rgb_of(const decoded_image& image) {
  std::vector<std::uint8_t> rgb(image.rgba.size() / 4 * 3);
  for (std::size_t i = 0, o = 0; i + 3 < image.rgba.size(); i += 4, o += 3) {
    rgb[o] = image.rgba[i];
    rgb[o + 1] = image.rgba[i + 1];
    rgb[o + 2] = image.rgba[i + 2];
  }
  return rgb;
}

}  // namespace orch::serve
