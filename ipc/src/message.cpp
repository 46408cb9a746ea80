#include "orch/ipc/message.hpp"

#include <array>
#include <limits>
#include <string>

#include "orch/ipc/frame.hpp"
#include "orch/support/untrusted_text.hpp"

namespace orch::ipc {
namespace {

enum class kind { unsigned_int, text, boolean, descriptor, map, list };

struct field {
  std::string_view name;
  kind k;
};

struct schema {
  message_type type;
  std::string_view name;
  std::array<field, 4> fields;
  std::size_t count;
};

// The catalogue: required fields of each request/notification body (docs/protocol.md).
constexpr std::array<schema, 19> catalogue{{
    {message_type::hello,
     "hello",
     {{{"token", kind::text}, {"pid", kind::unsigned_int}, {"protocol", kind::unsigned_int}}},
     3},
    {message_type::segment_attach,
     "segment_attach",
     {{{"segment", kind::unsigned_int}, {"total_size", kind::unsigned_int}, {}}},
     2},
    {message_type::ping, "ping", {}, 0},
    {message_type::allocate, "allocate", {{{"size", kind::unsigned_int}, {}, {}}}, 1},
    {message_type::lease_grant, "lease_grant", {{{"descriptor", kind::descriptor}, {}, {}}}, 1},
    {message_type::lease_release, "lease_release", {{{"descriptor", kind::descriptor}, {}, {}}}, 1},
    {message_type::lease_free, "lease_free", {{{"descriptor", kind::descriptor}, {}, {}}}, 1},
    {message_type::free_memory,
     "free_memory",
     {{{"unload_models", kind::boolean}, {"free_memory", kind::boolean}, {}}},
     2},
    {message_type::evict, "evict", {{{"bytes", kind::unsigned_int}, {}, {}}}, 1},
    {message_type::node_end,
     "node_end",
     {{{"epoch", kind::unsigned_int}, {"node", kind::text}, {}}},
     2},
    {message_type::prompt_start, "prompt_start", {{{"epoch", kind::unsigned_int}, {}, {}}}, 1},
    {message_type::shutdown, "shutdown", {}, 0},
    {message_type::ready, "ready", {{{"nodes", kind::list}, {"plugins", kind::map}, {}}}, 2},
    {message_type::call,
     "call",
     // "epoch" is optional: a call without it is a prompt of its own (docs/memory-semantics.md).
     {{{"node", kind::text}, {"class_type", kind::text}, {"inputs", kind::map}, {}}},
     3},
    {message_type::progress,
     "progress",
     {{{"node", kind::text}, {"value", kind::unsigned_int}, {"max", kind::unsigned_int}}},
     3},
    {message_type::interrupt, "interrupt", {{{"epoch", kind::unsigned_int}, {}, {}}}, 1},
    {message_type::setup_failed,
     "setup_failed",
     {{{"code", kind::text}, {"message", kind::text}, {}}},
     2},
    {message_type::pinned_grant, "pinned_grant", {{{"bytes", kind::unsigned_int}, {}, {}}}, 1},
    // Its event is a name or a binary event's number: checked by the host (ui_messages.hpp).
    {message_type::ui_message, "ui_message", {}, 0},
}};

const schema* find_schema(std::uint16_t value) noexcept {
  for (const auto& s : catalogue) {
    if (static_cast<std::uint16_t>(s.type) == value) return &s;
  }
  return nullptr;
}

// A SAX handler that builds the DOM with two limits the stock one lacks:
//  - nesting deeper than max_body_depth stops the parse, so a body of a million nested arrays
//    stops at depth 17 instead of recursing a million times;
//  - a declared array or map length larger than the body (every element takes at least one
//    byte) stops it too. The stock handler throws out_of_range for a length above max_size()
//    even with exceptions off; fuzz_body found a 9-byte body that did so.
// And one repair: CBOR text strings are not checked for UTF-8 by nlohmann, and dump() throws on
// them later (type_error.316: a pack's STRING output "bad\xff\xfe" ended the host in an event
// sink). Every text string and map key is made valid UTF-8 here, where a peer's text enters.
class bounded_sax : public nlohmann::detail::json_sax_dom_parser<json> {
 public:
  using base = nlohmann::detail::json_sax_dom_parser<json>;
  bounded_sax(json& out, std::size_t body_size)
      : base(out, /*allow_exceptions=*/false), body_size_(body_size) {}
  bool start_object(std::size_t n) {
    if (++depth_ > max_body_depth) return too_deep_ = true, false;
    if (implausible(n)) return false;
    return base::start_object(n);
  }
  bool end_object() {
    --depth_;
    return base::end_object();
  }
  bool start_array(std::size_t n) {
    if (++depth_ > max_body_depth) return too_deep_ = true, false;
    if (implausible(n)) return false;
    return base::start_array(n);
  }
  bool end_array() {
    --depth_;
    return base::end_array();
  }
  bool string(json::string_t& value) {
    repair(value);
    return base::string(value);
  }
  bool key(json::string_t& value) {
    repair(value);
    return base::key(value);
  }
  bool too_deep() const noexcept { return too_deep_; }

 private:
  static void repair(json::string_t& value) {
    if (!is_valid_utf8(value)) value = valid_utf8(value);
  }
  bool implausible(std::size_t n) const noexcept {
    return n != static_cast<std::size_t>(-1) && n > body_size_;  // -1: indefinite length
  }
  std::size_t body_size_;
  std::size_t depth_ = 0;
  bool too_deep_ = false;
};

bool has_kind(const json& value, kind k) {
  switch (k) {
    case kind::unsigned_int:
      return value.is_number_unsigned();
    case kind::text:
      return value.is_string();
    case kind::boolean:
      return value.is_boolean();
    case kind::descriptor:
      return descriptor_from_json(value).ok();
    case kind::map:
      return value.is_object();
    case kind::list:
      return value.is_array();
  }
  return false;
}

}  // namespace

std::string_view to_string(message_type type) noexcept {
  const schema* s = find_schema(static_cast<std::uint16_t>(type));
  return s == nullptr ? std::string_view("unknown") : s->name;
}

std::optional<message_type> known_type(std::uint16_t value) noexcept {
  const schema* s = find_schema(value);
  if (s == nullptr) return std::nullopt;
  return s->type;
}

std::vector<std::uint8_t> encode_body(const json& body) {
  return json::to_cbor(body);
}

result<json> decode_body(std::uint16_t type, std::uint16_t flags,
                         std::span<const std::uint8_t> bytes) {
  const bool response = (flags & frame_flags::response) != 0;
  const schema* s = find_schema(type);
  if (s == nullptr) {
    return error{body_errc::unknown_type,
                 "message type " + std::to_string(type) + " is not in the catalogue"};
  }
  json body;
  if (bytes.empty()) {
    body = json::object();  // an empty body is an empty map
  } else {
    bounded_sax sax(body, bytes.size());
    bool parsed = false;
    try {
      parsed = json::sax_parse(bytes.begin(), bytes.end(), &sax,
                               nlohmann::detail::input_format_t::cbor, /*strict=*/true);
    } catch (const json::exception& e) {
      // Backstop: decode_body must never throw on hostile input.
      return error{body_errc::not_cbor, std::string("body is not valid CBOR: ") + e.what()};
    }
    if (sax.too_deep()) {
      return error{body_errc::too_deep, "body nests deeper than " + std::to_string(max_body_depth)};
    }
    if (!parsed || sax.is_errored()) return error{body_errc::not_cbor, "body is not one CBOR item"};
  }
  if (!body.is_object()) return error{body_errc::not_a_map, "body is not a CBOR map"};
  if (response) {
    if ((flags & frame_flags::error) != 0) {
      auto code = body.find("code");
      auto message = body.find("message");
      if (code == body.end() || message == body.end() || !code->is_string() ||
          !message->is_string()) {
        return error{body_errc::bad_field, "error response lacks text fields code and message"};
      }
    }
    return body;
  }
  for (std::size_t i = 0; i < s->count; ++i) {
    const field& f = s->fields[i];
    auto it = body.find(std::string(f.name));
    if (it == body.end()) {
      return error{body_errc::missing_field,
                   std::string(s->name) + " lacks field " + std::string(f.name)};
    }
    if (!has_kind(*it, f.k)) {
      return error{body_errc::bad_field,
                   std::string(s->name) + " field " + std::string(f.name) + " has the wrong kind"};
    }
  }
  return body;
}

json descriptor_to_json(const buffer_descriptor& d) {
  return json{
      {"segment", d.segment}, {"offset", d.offset}, {"size", d.size}, {"generation", d.generation}};
}

result<buffer_descriptor> descriptor_from_json(const json& value) {
  if (!value.is_object()) return error{body_errc::bad_field, "descriptor is not a map"};
  auto read = [&](const char* name, std::uint64_t max) -> result<std::uint64_t> {
    auto it = value.find(name);
    if (it == value.end())
      return error{body_errc::missing_field, std::string("descriptor lacks ") + name};
    if (!it->is_number_unsigned() || it->get<std::uint64_t>() > max) {
      return error{body_errc::bad_field,
                   std::string("descriptor field ") + name + " is not an unsigned in range"};
    }
    return it->get<std::uint64_t>();
  };
  constexpr auto u32 = std::numeric_limits<std::uint32_t>::max();
  constexpr auto u64 = std::numeric_limits<std::uint64_t>::max();
  auto segment = read("segment", u32);
  if (!segment) return segment.err();
  auto offset = read("offset", u64);
  if (!offset) return offset.err();
  auto size = read("size", u64);
  if (!size) return size.err();
  auto generation = read("generation", u32);
  if (!generation) return generation.err();
  return buffer_descriptor{static_cast<std::uint32_t>(*segment),
                           static_cast<std::uint32_t>(*generation), *offset, *size};
}

json error_body(const error& e) {
  return json{{"code", e.code}, {"message", e.message}};
}

error error_from_body(const json& body) {
  return error{body.value("code", std::string("unknown")), body.value("message", std::string())};
}

}  // namespace orch::ipc
