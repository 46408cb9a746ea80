// view_image: what ComfyUI's `GET /view` answers for an image file when the query has
// `preview=` or `channel=` (server.py's view_image, ComfyUI 0.8, which re-encodes with Pillow),
// over image_codec.hpp. server.py reads them in this order:
//
// - `preview=FORMAT[;QUALITY]`, whatever `channel=` says: the image re-encoded as `webp` or
//   `jpeg` (any other FORMAT, or a `channel=` that contains an `a` anywhere, as `rgba` does, is
//   `webp`), at QUALITY when the text after the last `;` is all digits (the whole value when it
//   has none: `preview=50` is a WebP of quality 50), else 90. A JPEG, or anything with
//   `channel=rgb`, is converted to RGB first; a WebP otherwise keeps the alpha Pillow's WebP
//   writer keeps (an RGBA or LA image's, a palette image's with transparency).
// - else `channel=rgb`: the image's RGB, as a PNG (its alpha dropped).
// - else `channel=a`: a PNG that is black with the image's alpha, or opaque black when Pillow
//   opens the image in a mode other than RGBA (an LA or palette PNG, a JPEG, a WebP without
//   alpha).
// - else (no `channel=`, `rgba`, or anything else): the file as it is (serve_files.cpp).
//
// Each answer is `Content-Type: image/webp`, `image/jpeg` or `image/png`, and keeps the file's
// own name in Content-Disposition, as server.py does (it does not change the extension).
#pragma once

#include <map>
#include <string>

#include "orch/serve/image_codec.hpp"
#include "orch/support/result.hpp"

namespace orch::serve {

struct view_request {
  enum class kind { file_as_is, preview, rgb, alpha };
  kind what = kind::file_as_is;
  bool jpeg = false;         // preview: JPEG, else WebP
  bool as_rgb = false;       // preview: converted to RGB first
  std::string quality = "";  // preview: the quality's digits as sent; empty for 90
};

// What a /view query asks for (its decoded fields).
view_request view_request_of(const std::map<std::string, std::string>& query);

struct encoded_view {
  std::string content_type;
  std::string body;
};

// The answer for `request` (not file_as_is) about `image`. Errors, where Pillow raises (a 500
// from server.py): image_unwritable for a WebP quality over 100 (libwebp's range) or a JPEG
// quality of 2^63 or more (past a C ssize_t), or a side past the format's limit.
result<encoded_view> render_view(const view_request& request, const decoded_image& image);

}  // namespace orch::serve
