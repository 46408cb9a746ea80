// untrusted_text: text that came from a process or a file we do not trust (a worker, a pack, a
// prompt from elsewhere), made safe for the two places it ends up.
//
//  - JSON. nlohmann::json::dump() throws type_error.316 on a string that is not UTF-8; a node
//    pack's STRING output of "bad\xff\xfe" once ended the host that way. valid_utf8() replaces
//    each ill-formed sequence with U+FFFD, so the result always dumps.
//  - A terminal or a log. A pack's message can hold ANSI escapes (recolour, move the cursor,
//    retitle the window) or a newline that forges a log line. printable() escapes control
//    characters (C0 but tab, DEL, C1) and the bidirectional overrides ("Trojan source") as
//    \n, \r, \e, \xHH or \u{HHHH}, after valid_utf8().
//
// Both are pure functions over bytes, allocate only their result and never throw but bad_alloc.
// Apply them where the text enters (the ipc body decoder, the node catalogue) and where it
// leaves (the event sinks, the log formatter).
#pragma once

#include <string>
#include <string_view>

namespace orch {

// True when `text` is well-formed UTF-8 in the sense of RFC 3629 (no overlong forms, no
// surrogates, nothing above U+10FFFF): exactly what nlohmann::json::dump() accepts.
bool is_valid_utf8(std::string_view text) noexcept;

// `text` with every ill-formed sequence replaced by U+FFFD, one per maximal subpart (Unicode
// §3.9, the W3C's practice): "a\xff\xfeb" -> "a\uFFFD\uFFFDb", a truncated "\xe2\x82" -> one.
// Well-formed text comes back unchanged.
std::string valid_utf8(std::string_view text);

// valid_utf8(text) with control characters escaped for a terminal or a log line: tab stays,
// \n \r \e are written so, other C0 and DEL as \xHH, C1 (U+0080..U+009F) and the bidi controls
// (U+202A..U+202E, U+2066..U+2069) as \u{HHHH}. Printable text comes back unchanged.
std::string printable(std::string_view text);

// True when printable(text) == text, without building it.
bool is_printable(std::string_view text) noexcept;

}  // namespace orch
