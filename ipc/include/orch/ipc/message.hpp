// message: the body encoding and the message catalogue of the framed channel. Bodies are CBOR
// maps (RFC 8949) through nlohmann::json: self-describing, compact, and decodable without
// generated code on the Python side. docs/protocol.md is the catalogue's reference; the schema
// table in message.cpp is what the decoder enforces.
//
// The decoder never trusts its input: a nesting limit stops recursion before it can exhaust the
// stack, the body must be a map, and every field a message type requires must be present with
// the right kind. The fuzz target drives decode_body.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/ipc/descriptor.hpp"
#include "orch/ipc/errc.hpp"
#include "orch/ipc/frame.hpp"
#include "orch/support/result.hpp"

namespace orch::ipc {

using json = nlohmann::json;

enum class message_type : std::uint16_t {
  hello = 1,           // worker -> host, request: who I am
  segment_attach = 2,  // host -> worker, request: a segment fd was just sent on the fd socket
  ping = 3,            // either way, request: liveness and round-trip measurement
  allocate = 4,        // worker -> host, request: a pinned-pool block
  lease_grant = 5,     // host -> worker, request: you now hold a lease on this block
  lease_release = 6,   // worker -> host, notification: drop my lease
  lease_free = 7,      // worker -> host, notification: I produced it and am done with it
  free_memory = 8,     // host -> worker, request: ComfyUI's POST /free
  evict = 9,           // host -> worker, request: free this many bytes; answered with a receipt
  node_end = 10,       // host -> worker, notification: the host's node boundary
  prompt_start = 11,   // host -> worker, notification: a new prompt epoch
  shutdown = 12,       // host -> worker, request: exit cleanly
  ready = 13,          // worker -> host, request: set up; here are my node classes
  call = 14,           // host -> worker, request: run one node
  progress = 15,       // worker -> host, notification: a node's progress
  interrupt = 16,      // host -> worker, notification: stop the running prompt
  setup_failed = 17,   // worker -> host, request: my set-up cannot succeed; I exit once answered
  pinned_grant = 18,   // worker -> host, request: grow my pinned-budget grant by `bytes`
  ui_message = 19,     // worker -> host, notification: a message for ComfyUI's clients
};

// The name used in logs and docs; "unknown" for values outside the catalogue.
std::string_view to_string(message_type type) noexcept;
// The catalogue entry for a wire value, if any.
std::optional<message_type> known_type(std::uint16_t value) noexcept;

inline constexpr std::size_t max_body_depth = 16;

std::vector<std::uint8_t> encode_body(const json& body);

// A frame as received: its header and its decoded body.
struct message {
  frame_header header;
  json body;
};

// Decodes a body for a frame of `type` with `flags` (frame_flags). Requests and notifications
// are checked against the catalogue; responses must be maps, and error responses must carry
// {code: text, message: text}. Errors: body_errc::*.
result<json> decode_body(std::uint16_t type, std::uint16_t flags,
                         std::span<const std::uint8_t> bytes);

// Descriptor <-> body field. Errors from from_json: body_errc::missing_field / bad_field.
json descriptor_to_json(const buffer_descriptor& d);
result<buffer_descriptor> descriptor_from_json(const json& value);

// The body of an error response.
json error_body(const error& e);
error error_from_body(const json& body);

}  // namespace orch::ipc
