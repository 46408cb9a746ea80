// masked_image: the file ComfyUI's `POST /upload/mask` saves (server.py's upload_mask, ComfyUI
// 0.8): the original image's pixels, as Pillow's convert("RGBA") makes them, given the uploaded
// image's alpha channel (its own convert("RGBA")'s: a mask without alpha is opaque), written in
// the format Pillow's save() picks from the name's extension. A `.png` (or `.apng`) is deflated
// at compress_level 4 and keeps the original's text chunks and ICC profile, as server.py copies
// them; a `.webp` is lossy at Pillow's default quality, 80, without them. Pillow would refuse
// `.jpg` (RGBA cannot be JPEG) and a name without a known extension; it would write a few more
// formats (GIF, BMP, TIFF) that serve does not.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "orch/serve/image_codec.hpp"
#include "orch/support/result.hpp"

namespace orch::serve {

// The file for `name` (the upload's name). `original` is taken, and its pixels given the mask's
// alpha in place, so that no third image is held. Errors: image_size_mismatch (the two sizes
// differ, as Pillow's putalpha refuses), image_unwritable (an extension other than .png, .apng
// or .webp; a WebP side past 16,383 pixels).
result<std::vector<std::uint8_t>> masked_image(decoded_image original, const decoded_image& mask,
                                               std::string_view name);

}  // namespace orch::serve
