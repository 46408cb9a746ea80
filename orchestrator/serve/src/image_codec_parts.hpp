// image_codec_parts: the decoders behind decode_image (image_codec.hpp), one per library, and
// the errors they share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "orch/serve/errc.hpp"
#include "orch/serve/image_codec.hpp"

namespace orch::serve::image_parts {

result<decoded_image> decode_png(std::string_view bytes, std::uint64_t max_pixels);   // png_codec
result<decoded_image> decode_jpeg(std::string_view bytes, std::uint64_t max_pixels);  // jpeg_codec
result<decoded_image> decode_webp(std::string_view bytes, std::uint64_t max_pixels);  // image_codec

inline error unreadable(const char* format, const std::string& why) {
  return error{serve_errc::image_unreadable,
               std::string("the ") + format + " image cannot be read: " + why};
}

inline error unwritable(const char* format, const std::string& why) {
  return error{serve_errc::image_unwritable,
               std::string("cannot encode the ") + format + " image: " + why};
}

// An image too large to decode, or nothing when width * height is within `max_pixels` (and
// neither side is 0).
inline std::optional<error> size_refused(const char* format, std::uint64_t width,
                                         std::uint64_t height, std::uint64_t max_pixels) {
  if (width == 0 || height == 0)
    return unreadable(format, "its header gives a size of " + std::to_string(width) + " x " +
                                  std::to_string(height));
  if (width * height <= max_pixels) return std::nullopt;
  return error{serve_errc::image_too_large,
               std::string("the ") + format + " image is " + std::to_string(width) + " x " +
                   std::to_string(height) + " pixels, more than the " + std::to_string(max_pixels) +
                   " serve decodes (max_image_pixels): resize it, or view it without preview= "
                   "and channel="};
}

}  // namespace orch::serve::image_parts
