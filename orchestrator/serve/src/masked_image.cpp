#include "orch/serve/masked_image.hpp"

#include <string>

#include "orch/serve/errc.hpp"
#include "orch/support/ascii_lower.hpp"

namespace orch::serve {

namespace {

// server.py saves the mask with compress_level=4; Pillow's WebP writer's default quality is 80.
constexpr int mask_png_level = 4;
constexpr float mask_webp_quality = 80.0f;

// os.path.splitext's extension, lower-cased as Pillow looks it up: from the last '.' that is not
// leading; empty when there is none.
std::string extension_of(std::string_view name) {
  const auto dot = name.rfind('.');
  if (dot == std::string_view::npos || name.find_first_not_of('.') >= dot) return {};
  return ascii_lower(name.substr(dot));
}

}  // namespace

result<std::vector<std::uint8_t>> masked_image(decoded_image original, const decoded_image& mask,
                                               std::string_view name) {
  if (original.width != mask.width || original.height != mask.height)
    return error{serve_errc::image_size_mismatch,
                 "the mask is " + std::to_string(mask.width) + " x " + std::to_string(mask.height) +
                     " and the original image " + std::to_string(original.width) + " x " +
                     std::to_string(original.height) + ": upload a mask of the original's size"};
  const std::string ext = extension_of(name);
  const bool png = ext == ".png" || ext == ".apng";
  if (!png && ext != ".webp")
    return error{serve_errc::image_unwritable,
                 "the mask's file name '" + std::string(name) +
                     "' must end in .png or .webp: its image is RGBA, which serve writes "
                     "as PNG or WebP (ComfyUI picks the format from the extension too)"};
  std::vector<std::uint8_t>& pixels = original.rgba;
  for (std::size_t i = 3; i < pixels.size(); i += 4) pixels[i] = mask.rgba[i];
  if (png)
    return encode_png(pixels.data(), original.width, original.height, 4, mask_png_level,
                      &original.metadata);
  return encode_webp(pixels.data(), original.width, original.height, 4, mask_webp_quality);
}

}  // namespace orch::serve
