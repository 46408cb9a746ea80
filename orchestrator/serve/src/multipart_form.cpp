#include "orch/serve/multipart_form.hpp"

#include <algorithm>
#include <utility>

#include "orch/serve/errc.hpp"
#include "orch/support/ascii_lower.hpp"

namespace orch::serve {

namespace {

constexpr std::string_view crlf = "\r\n";

error refused(const std::string& why) {
  return error{serve_errc::invalid_form, "the multipart/form-data body " + why};
}

bool blank(char c) {
  return c == ' ' || c == '\t';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

// A control byte in a header line (HTAB aside): a NUL or a bare CR or LF there is how a
// header is smuggled past one reader and not another.
bool has_control(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\t') || u == 0x7f;
  });
}

// `value; key=token; key="quoted \" string"` (RFC 9110's parameters): the value and each
// parameter, keys lower-cased. A key given twice is refused: which one counts is ambiguous.
struct parameterised {
  std::string value;
  std::vector<std::pair<std::string, std::string>> params;
  const std::string* find(std::string_view key) const {
    for (const auto& [k, v] : params)
      if (k == key) return &v;
    return nullptr;
  }
};

result<parameterised> parse_parameters(std::string_view text, const std::string& what) {
  parameterised out;
  const auto semi = text.find(';');
  out.value = std::string(trim(text.substr(0, semi)));
  std::size_t i = semi == std::string_view::npos ? text.size() : semi;
  while (i < text.size()) {
    ++i;  // past ';'
    while (i < text.size() && blank(text[i])) ++i;
    if (i == text.size()) break;  // a trailing ';'
    const auto eq = text.find('=', i);
    if (eq == std::string_view::npos) return refused(what + " has a parameter without '='");
    const std::string key = ascii_lower(trim(text.substr(i, eq - i)));
    if (key.empty() || key.find_first_of(" \t;\"") != std::string::npos)
      return refused(what + " has a malformed parameter name");
    i = eq + 1;
    while (i < text.size() && blank(text[i])) ++i;
    std::string value;
    if (i < text.size() && text[i] == '"') {
      bool closed = false;
      for (++i; i < text.size(); ++i) {
        if (text[i] == '\\' && i + 1 < text.size()) {
          value.push_back(text[++i]);
        } else if (text[i] == '"') {
          closed = true;
          ++i;
          break;
        } else {
          value.push_back(text[i]);
        }
      }
      if (!closed) return refused(what + "'s parameter " + key + " has an unclosed quote");
    } else {
      const auto start = i;
      while (i < text.size() && text[i] != ';' && !blank(text[i])) {
        if (text[i] == '"') return refused(what + "'s parameter " + key + " has a stray quote");
        ++i;
      }
      value = std::string(text.substr(start, i - start));
    }
    while (i < text.size() && blank(text[i])) ++i;
    if (i < text.size() && text[i] != ';')
      return refused(what + "'s parameter " + key + " has text after its value");
    if (out.find(key) != nullptr) return refused(what + " gives the parameter " + key + " twice");
    out.params.emplace_back(key, std::move(value));
  }
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// RFC 5987's ext-value, `UTF-8''%e2%82%ac.png` (the form a browser or curl uses for a name that
// is not ASCII), decoded; nullopt when it is not that. Only UTF-8: it is what every client
// sends, and what a file name here is.
std::optional<std::string> extended_value(const std::string& text) {
  const auto first = text.find('\'');
  const auto second = first == std::string::npos ? first : text.find('\'', first + 1);
  if (second == std::string::npos || ascii_lower(text.substr(0, first)) != "utf-8")
    return std::nullopt;
  std::string out;
  for (std::size_t i = second + 1; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    const int hi = i + 2 < text.size() ? hex_digit(text[i + 1]) : -1;
    const int lo = hi >= 0 ? hex_digit(text[i + 2]) : -1;
    if (lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

// RFC 2046's bchars: what a boundary may be made of (a space, but not last).
bool boundary_char(char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return std::string_view("'()+_,-./:=? ").find(c) != std::string_view::npos;
}

// One part's header block (without the blank line that ends it) into `part`.
status read_part_header(std::string_view block, form_part& part, const std::string& where) {
  bool disposition = false;
  bool type = false;
  while (!block.empty()) {
    const auto end = block.find(crlf);
    const std::string_view line = block.substr(0, end);
    block = end == std::string_view::npos ? std::string_view() : block.substr(end + 2);
    if (has_control(line)) return refused(where + " has a control byte in a header line");
    if (!line.empty() && blank(line.front()))
      return refused(where +
                     " has a folded header line (obsolete, and read differently by "
                     "different servers)");
    const auto colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0)
      return refused(where + " has a header line that is not 'Name: value'");
    const std::string name = ascii_lower(line.substr(0, colon));
    const std::string_view value = trim(line.substr(colon + 1));
    if (name == "content-disposition") {
      if (disposition) return refused(where + " has two Content-Disposition headers");
      disposition = true;
      auto p = parse_parameters(value, where + "'s Content-Disposition");
      if (!p) return p.err();
      if (ascii_lower(p->value) != "form-data")
        return refused(where + "'s Content-Disposition is '" + p->value + "', not form-data");
      const std::string* n = p->find("name");
      if (n == nullptr || n->empty()) return refused(where + " has no name");
      part.name = *n;
      if (const std::string* ext = p->find("filename*")) {
        auto decoded = extended_value(*ext);
        if (!decoded)
          return refused(where + " has a filename* that is not UTF-8''<percent-encoded>");
        part.filename = std::move(*decoded);
      } else if (const std::string* f = p->find("filename")) {
        part.filename = *f;
      }
    } else if (name == "content-type") {
      if (type) return refused(where + " has two Content-Type headers");
      type = true;
      part.content_type = std::string(value);
    }
    // Other headers (Content-Transfer-Encoding, which RFC 7578 deprecates) are not read.
  }
  if (!disposition) return refused(where + " has no Content-Disposition (so no name)");
  return ok_status();
}

}  // namespace

result<std::string> form_boundary(std::string_view content_type) {
  if (has_control(content_type)) return refused("has a control byte in its Content-Type");
  auto p = parse_parameters(content_type, "Content-Type");
  if (!p) return p.err();
  if (ascii_lower(p->value) != "multipart/form-data")
    return refused("is not one: its Content-Type is '" + p->value + "'");
  const std::string* b = p->find("boundary");
  if (b == nullptr || b->empty()) return refused("has no boundary in its Content-Type");
  if (b->size() > 70) return refused("has a boundary longer than 70 characters (RFC 2046)");
  if (!std::all_of(b->begin(), b->end(), boundary_char) || b->back() == ' ')
    return refused("has a boundary with characters RFC 2046 does not allow");
  return *b;
}

result<std::vector<form_part>> parse_form(std::string_view content_type, std::string_view body,
                                          const form_limits& limits) {
  auto boundary = form_boundary(content_type);
  if (!boundary) return boundary.err();
  const std::string delimiter = "--" + *boundary;
  const std::string inner = std::string(crlf) + delimiter;  // every delimiter but a first one
  // The first delimiter opens the body or follows a preamble (ignored, as RFC 2046 says).
  std::size_t pos = 0;
  if (body.substr(0, delimiter.size()) == delimiter) {
    pos = delimiter.size();
  } else {
    const auto at = body.find(inner);
    if (at == std::string_view::npos) return refused("has no line with its boundary");
    pos = at + inner.size();
  }
  std::vector<form_part> parts;
  while (true) {
    if (body.substr(pos, 2) == "--") return parts;  // the close delimiter; an epilogue is ignored
    while (pos < body.size() && blank(body[pos])) ++pos;  // RFC 2046's transport padding
    const std::string where = "part " + std::to_string(parts.size() + 1);
    if (body.substr(pos, 2) != crlf) {
      if (pos >= body.size()) return refused("ends after a boundary line (truncated)");
      return refused("has text after the boundary that opens " + where +
                     " (the boundary appears inside a part, or a CRLF is missing)");
    }
    pos += 2;
    if (parts.size() == limits.max_parts)
      return refused("has more than " + std::to_string(limits.max_parts) + " parts");
    // The header block ends at the first empty line; it may itself be empty.
    std::size_t header_end = pos;
    if (body.substr(pos, 2) != crlf) {
      const std::size_t window = std::min(body.size() - pos, limits.max_part_header + 4);
      const auto at = body.substr(pos, window).find("\r\n\r\n");
      if (at == std::string_view::npos) {
        if (window > limits.max_part_header)
          return refused(where + "'s header is larger than " +
                         std::to_string(limits.max_part_header) + " bytes");
        return refused("ends inside the header of " + where +
                       " (truncated, or its header "
                       "does not end in an empty CRLF line)");
      }
      header_end = pos + at + 2;
    }
    form_part part;
    if (auto read = read_part_header(body.substr(pos, header_end - pos), part, where); !read)
      return read.err();
    const std::size_t data_start = header_end + 2;
    const auto next = body.find(inner, data_start);
    if (next == std::string_view::npos)
      return refused("ends inside " + where + " (truncated: no boundary closes it)");
    part.data = body.substr(data_start, next - data_start);
    parts.push_back(std::move(part));
    pos = next + inner.size();
  }
}

const form_part* first_part(const std::vector<form_part>& parts, std::string_view name) {
  for (const auto& p : parts)
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace orch::serve
