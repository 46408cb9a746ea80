#include "serve_json_streams.hpp"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace orch::serve {
namespace {

using nlohmann::json;

// An answer made of `parts` in order, streamed: each piece is the next 64 KiB of them, as the
// client reads. The large parts are texts written once and shared (a history entry's, a queued
// prompt's), so neither the API thread nor the io thread serialises anything, and a client holds
// one piece (8 clients that never read a 125 MB history had taken 1.1 GB and 5.2 s of the API
// thread).
using text_part = std::shared_ptr<const std::string>;
http_reply streamed_json(std::vector<text_part> parts) {
  constexpr std::size_t piece_bytes = std::size_t{64} << 10;
  struct cursor {
    std::vector<text_part> parts;
    std::size_t part = 0;
    std::size_t offset = 0;  // in parts[part]
  };
  auto at = std::make_shared<cursor>();
  at->parts = std::move(parts);
  http_reply reply{200, "application/json", ""};
  reply.pieces = [at]() -> std::optional<std::string> {
    if (at->part == at->parts.size()) return std::nullopt;
    std::string piece;
    while (piece.size() < piece_bytes && at->part < at->parts.size()) {
      const std::string& text = *at->parts[at->part];
      const std::size_t n = std::min(piece_bytes - piece.size(), text.size() - at->offset);
      piece.append(text, at->offset, n);
      at->offset += n;
      if (at->offset == text.size()) {
        ++at->part;
        at->offset = 0;
      }
    }
    return piece;
  };
  return reply;
}

text_part literal(std::string text) { return std::make_shared<const std::string>(std::move(text)); }

}  // namespace

http_reply streamed_history(const std::vector<prompt_queue::history_item>& items) {
  std::vector<text_part> parts;
  parts.reserve(2 * items.size() + 2);
  parts.push_back(literal("{"));
  for (std::size_t i = 0; i < items.size(); ++i) {
    parts.push_back(literal((i > 0 ? "," : "") +
                            json(items[i].id).dump(-1, ' ', false, json::error_handler_t::replace) +
                            ":"));
    parts.push_back(items[i].text);
  }
  parts.push_back(literal("}"));
  return streamed_json(std::move(parts));
}

http_reply streamed_queue(const prompt_queue::queue_texts& queue) {
  std::vector<text_part> parts;
  const auto add_list = [&](const char* opening, const std::vector<text_part>& items) {
    parts.push_back(literal(opening));
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i > 0) parts.push_back(literal(","));
      parts.push_back(items[i]);
    }
  };
  add_list("{\"queue_running\":[", queue.running);
  add_list("],\"queue_pending\":[", queue.pending);
  parts.push_back(literal("]}"));
  return streamed_json(std::move(parts));
}

}  // namespace orch::serve
