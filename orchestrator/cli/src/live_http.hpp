// live_http: the live views read over HTTP, for `comfy-orch status|top|diverge --url`: a serve's
// or a gateway's GET /orch/status and /orch/diverge (docs/cli.md, "--url"). A small synchronous
// Boost.Beast client: one request a connection, with a deadline on connect, write and read
// together, and a cap on the answer's size; the answer must be a JSON object. Every error names
// the URL and says what to do.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "orch/support/result.hpp"

namespace orch::cli {

struct live_server_url {
  std::string url;  // as given, "http://HOST:PORT"
  std::string host;
  std::uint16_t port = 0;
};

// "http://HOST:PORT" (a trailing "/" at most), else an error saying the form.
result<live_server_url> parse_live_url(const std::string& url);

// Reads the fleet secret from `file` with serve's checks (mode 600, its size), for a serve
// started with --fleet-secret-file.
result<std::string> read_live_secret(const std::string& file);

// GET `path` at `server`, with `Authorization: Bearer <secret>` when one is given; the answer,
// a JSON object, or why not (control_errc::connect_failed: no answer; bad_response: an
// answer that is not a 200 with a JSON object).
result<nlohmann::json> get_live_document(const live_server_url& server, const std::string& path,
                                         const std::optional<std::string>& secret);

}  // namespace orch::cli
