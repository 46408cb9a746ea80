// A worker's messages for ComfyUI's clients (docs/comfyui.md, "A pack's messages"): what a pack
// sends through PromptServer.instance in its worker (send_sync, send, send_progress_text) and
// its nodes' previews, checked as they arrive. Everything in them is the worker's: a name is
// bounded text, a binary event a 32-bit number with bytes, a preview an RGB image whose pixels
// are exactly width * height * 3 bytes.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "orch/support/result.hpp"

namespace orch::runtime {

// ComfyUI's BinaryEventTypes (server.py): the binary messages a client tells apart by their first
// four bytes.
inline constexpr std::uint32_t preview_image_event = 1;
inline constexpr std::uint32_t unencoded_preview_image_event = 2;
inline constexpr std::uint32_t text_event = 3;
inline constexpr std::uint32_t preview_image_with_metadata_event = 4;

// The largest preview side a worker may send (ComfyUI's --preview-size is 512 by default).
inline constexpr std::uint32_t max_preview_side = 4096;

// The message, as the host passes it on: {"event": name or number, "data", "sid": text or
// null} or {"preview": {"format", "width", "height", "max_size", "pixels"}, "node", "value",
// "max"}. Errors (code "bad_ui_message") say what is wrong.
result<nlohmann::json> checked_ui_message(const nlohmann::json& body);

}  // namespace orch::runtime
