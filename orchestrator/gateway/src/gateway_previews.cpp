// A host's binary frames at the gateway (docs/fleet.md, "The frontend at the gateway"): ComfyUI's
// previews and progress texts, relayed to the client of the prompt they belong to, as serve sends
// them to its own clients. The gateway asks each host for previews with metadata (host_link.hpp),
// which name their prompt: such a frame goes to that prompt's client when the host runs it, with
// metadata to a client that asked for it (its feature_flags) and as ComfyUI's PREVIEW_IMAGE to any
// other (http_server::send_preview). Any other frame (a progress text names its node, not its
// prompt) goes to the client of the one prompt the host runs. A frame is at most host_link's 8
// MiB; one that is not in ComfyUI's shape is dropped.
#include "orch/executor/prompt.hpp"
#include "orch/gateway/gateway_api.hpp"
#include "orch/runtime/ui_messages.hpp"

namespace orch::gateway {

namespace {

std::uint32_t big_endian_at(const std::string& bytes, std::size_t at) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

std::string big_endian(std::uint32_t v) {
  std::string out;
  for (int shift : {24, 16, 8, 0}) out += static_cast<char>((v >> shift) & 0xff);
  return out;
}

// The largest preview metadata taken: its few ids and type are a few hundred bytes.
constexpr std::size_t max_metadata_bytes = 64 * 1024;

}  // namespace

void gateway_api::on_host_frame(const std::string& name, const std::string& frame) {
  if (stopped_ || frame.size() < 4) return;
  const running_prompt* r = queue_.running_on(name);
  if (r == nullptr) return;
  const auto relay = relay_.find(r->prompt.prompt_id);
  if (relay == relay_.end() || relay->second.empty()) return;
  const std::string& client = relay->second;
  if (big_endian_at(frame, 0) != runtime::preview_image_with_metadata_event) {
    server_.send(client, frame, true);
    return;
  }
  // [event][metadata length][metadata JSON][image]
  if (frame.size() < 8) return;
  const std::size_t length = big_endian_at(frame, 4);
  if (length > max_metadata_bytes || frame.size() < 8 + length) return;
  const auto metadata = executor::parse_bounded_json(frame.substr(8, length));
  if (!metadata || !metadata->is_object()) return;
  const auto id = metadata->find("prompt_id");
  if (id == metadata->end() || *id != r->prompt.prompt_id) return;
  const auto type = metadata->find("image_type");
  const bool png = type != metadata->end() && *type == "image/png";
  const std::string legacy = big_endian(runtime::preview_image_event) + big_endian(png ? 2 : 1) +
                             frame.substr(8 + length);
  server_.send_preview(client, legacy, frame);
}

}  // namespace orch::gateway
