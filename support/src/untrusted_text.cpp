#include "orch/support/untrusted_text.hpp"

#include <cstdint>

namespace orch {
namespace {

// One decoding step: a code point and its length, or (valid == false) the length of the maximal
// subpart of an ill-formed sequence, at least 1 (Unicode §3.9, table 3-7 for the ranges).
struct step {
  bool valid;
  std::uint32_t code_point;
  std::size_t length;
};

step decode(std::string_view text, std::size_t at) noexcept {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[at + i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return {true, lead, 1};
  std::size_t need = 0;                   // continuation bytes after the lead
  unsigned char low = 0x80, high = 0xBF;  // the allowed range of the second byte
  std::uint32_t cp = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 1, cp = lead & 0x1Fu;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 2, cp = lead & 0x0Fu;
    if (lead == 0xE0) low = 0xA0;   // no overlong forms
    if (lead == 0xED) high = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 3, cp = lead & 0x07u;
    if (lead == 0xF0) low = 0x90;   // no overlong forms
    if (lead == 0xF4) high = 0x8F;  // nothing above U+10FFFF
  } else {
    return {false, 0, 1};  // a stray continuation byte, C0/C1 (overlong) or F5..FF
  }
  for (std::size_t i = 1; i <= need; ++i) {
    if (at + i >= text.size()) return {false, 0, i};
    const unsigned char b = byte(i);
    const bool in_range = i == 1 ? (b >= low && b <= high) : (b >= 0x80 && b <= 0xBF);
    if (!in_range) return {false, 0, i};
    cp = (cp << 6) | (b & 0x3Fu);
  }
  return {true, cp, need + 1};
}

constexpr std::string_view replacement = "\xEF\xBF\xBD";  // U+FFFD

// Whether printable() writes `cp` otherwise than as itself.
bool needs_escape(std::uint32_t cp) noexcept {
  if (cp == '\t') return false;
  return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

void append_escape(std::string& out, std::uint32_t cp) {
  static constexpr char hex[] = "0123456789abcdef";
  switch (cp) {
    case '\n':
      out += "\\n";
      return;
    case '\r':
      out += "\\r";
      return;
    case 0x1B:
      out += "\\e";
      return;
    default:
      break;
  }
  if (cp < 0x80) {
    out += "\\x";
    out += hex[cp >> 4];
    out += hex[cp & 0xF];
    return;
  }
  out += "\\u{";
  for (int shift = 12; shift >= 0; shift -= 4) out += hex[(cp >> shift) & 0xF];
  out += '}';
}

}  // namespace

bool is_valid_utf8(std::string_view text) noexcept {
  for (std::size_t at = 0; at < text.size();) {
    const step s = decode(text, at);
    if (!s.valid) return false;
    at += s.length;
  }
  return true;
}

std::string valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t at = 0; at < text.size();) {
    const step s = decode(text, at);
    if (s.valid) {
      out.append(text.substr(at, s.length));
    } else {
      out.append(replacement);
    }
    at += s.length;
  }
  return out;
}

bool is_printable(std::string_view text) noexcept {
  for (std::size_t at = 0; at < text.size();) {
    const step s = decode(text, at);
    if (!s.valid || needs_escape(s.code_point)) return false;
    at += s.length;
  }
  return true;
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t at = 0; at < text.size();) {
    const step s = decode(text, at);
    if (!s.valid) {
      out.append(replacement);
    } else if (needs_escape(s.code_point)) {
      append_escape(out, s.code_point);
    } else {
      out.append(text.substr(at, s.length));
    }
    at += s.length;
  }
  return out;
}

}  // namespace orch
