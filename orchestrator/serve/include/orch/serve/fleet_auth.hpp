// fleet_auth: the channel between a fleet's `comfy-orch serve` hosts and its gateway (issue 58;
// docs/security.md, "Fleet hosts"). A host started with --fleet-secret-file answers only requests
// that carry `Authorization: Bearer <secret>`, the secret the fleet's operator wrote to that
// file; there is never a default. Every request, WebSocket upgrades included, is judged as soon
// as its header is read, before any route and before its body is read (serve_http_session.cpp);
// anything else is 401. The secret authenticates the gateway; it does not encrypt the channel.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "orch/serve/serve_http.hpp"
#include "orch/support/result.hpp"

namespace orch::serve {

// Why a request was refused: each is logged at most once a minute.
enum class fleet_refusal { no_header, several_headers, other_scheme, wrong_secret };

class fleet_secret {
 public:
  static constexpr std::size_t min_bytes = 32;
  static constexpr std::size_t max_bytes = 4096;  // a header field carries it
  // The realm a refusal's WWW-Authenticate names.
  static constexpr const char* realm = "comfy-orch-fleet";

  // The secret in `file`: its content, one trailing newline stripped.
  // Errors: invalid_config, naming the file and the fix, when it is missing or not a regular
  // file, group or others may read or write it (chmod 600), or it is empty, shorter than
  // min_bytes, longer than max_bytes, or holds a byte a header cannot carry (a space, a control
  // character, anything but printable ASCII: base64 is the way to write random bytes).
  static result<fleet_secret> read(const std::filesystem::path& file);

  // nullopt when the request's Authorization fields (`authorization`, their values in order;
  // empty: none) are exactly one, `Bearer <this secret>` (the scheme in any case); else why not.
  // The token is compared in time that depends on the secret's length alone, never on where
  // the first wrong byte is.
  std::optional<fleet_refusal> judge(std::span<const std::string_view> authorization) const;
  // The secret itself, for the gateway that sends it (never to be logged).
  const std::string& value() const noexcept { return secret_; }

 private:
  explicit fleet_secret(std::string secret) : secret_(std::move(secret)) {}
  std::string secret_;
};

// The answer to a request refused for `why`: 401 in serve's error shape ({"error": "this server
// is a comfy-orch fleet host and answers only its gateway: ..."}) with `WWW-Authenticate: Bearer
// realm="comfy-orch-fleet"`. Logs a warning naming the reason, the peer, the method and the
// path, at most once a minute per reason.
http_reply fleet_refusal_reply(fleet_refusal why, std::string_view peer, std::string_view method,
                               std::string_view path);

}  // namespace orch::serve
