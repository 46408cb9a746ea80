// report_html: `comfy-orch report --html` (docs/cli.md, "report"), one self-contained HTML file
// with no script, no network and no external font: a summary of each process, SVG timelines of
// every process's memory (pager resident, pinned reserved, cast buffers, and the device's free
// view in a chart of its own) with markers for node boundaries, prompt epochs, evictions and
// frees with their receipts, restarts, state changes and divergences, then the table of the
// divergences. Drawn from the documents a live serve answers (status, diverge, timeline).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace orch::live {

std::string render_report_html(const nlohmann::json& status, const nlohmann::json& divergences,
                               const nlohmann::json& timeline);

// Text made safe inside HTML elements and attribute values.
std::string html_escape(const std::string& text);

}  // namespace orch::live
