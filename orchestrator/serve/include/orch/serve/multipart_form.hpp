// multipart_form: a multipart/form-data body (RFC 7578, over RFC 2046's multipart syntax) read
// into its parts, for `POST /upload/image` (serve_files.hpp). The body is untrusted and read
// strictly, so that no two readers could see different fields in it: lines end in CRLF, every
// part has a Content-Disposition of type form-data with a name, no header or parameter appears
// twice in a part, a delimiter is always followed by `--` or the end of its line, and the body
// ends with the close delimiter. What is not so is refused as a whole, never half-read.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "orch/support/result.hpp"

namespace orch::serve {

struct form_part {
  std::string name;                     // Content-Disposition's name
  std::optional<std::string> filename;  // its filename* (RFC 5987, UTF-8) or else filename
  std::string content_type;             // the part's Content-Type; empty when it has none
  std::string_view data;                // the part's bytes, inside the parsed body
};

struct form_limits {
  std::size_t max_parts = 64;
  std::size_t max_part_header = std::size_t{8} << 10;  // one part's header block, in bytes
};

// The boundary of a `multipart/form-data; boundary=...` Content-Type (its value unquoted; 1 to
// 70 of RFC 2046's boundary characters). Errors: invalid_form.
result<std::string> form_boundary(std::string_view content_type);

// Every part of `body`, in the order sent; each part's data views `body`, which must outlive
// them. Errors: invalid_form, with what is wrong and where.
result<std::vector<form_part>> parse_form(std::string_view content_type, std::string_view body,
                                          const form_limits& limits = {});

// The first part named `name`, or null. A field sent twice is read as ComfyUI reads it: its
// form is aiohttp's MultiDict, whose get() answers the first.
const form_part* first_part(const std::vector<form_part>& parts, std::string_view name);

}  // namespace orch::serve
