// serve_json_streams: GET /history's and GET /queue's answers (serve_api.cpp), streamed from the
// texts written when each prompt was queued or finished (serve_queue.hpp).
#pragma once

#include "orch/serve/serve_http.hpp"
#include "orch/serve/serve_queue.hpp"

namespace orch::serve {

// The history as ComfyUI's dict keeps it, in the order it was written: {"id": entry, ...}.
http_reply streamed_history(const std::vector<prompt_queue::history_item>& items);

// ComfyUI's queue: {"queue_running": [item], "queue_pending": [item, ...]}.
http_reply streamed_queue(const prompt_queue::queue_texts& queue);

}  // namespace orch::serve
