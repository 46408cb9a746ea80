// serve_origin: ComfyUI's defence against cross-site requests to a server on loopback
// (server.py's origin_only_middleware, a125cd84). A web page on any site can make a browser
// POST a prompt to http://127.0.0.1:8188 (a "simple" request needs no preflight) or open a
// WebSocket there; the browser then sends the page's Origin, whose host differs from the Host it
// addressed. docs/security.md.
#pragma once

#include <string_view>

namespace orch::serve {

// Whether a request with these Host and Origin headers (empty: absent) is refused with 403:
// both present, Host names a loopback address, and their hosts differ (ports compared only when
// both carry one). Loopback is an IPv4 127/8 or IPv6 ::1 literal, or "localhost" (and
// *.localhost); other names are not resolved, so that no request can make the server wait on DNS.
// ComfyUI lets `Origin: null` through (its host is empty); it is refused here, since a sandboxed
// frame of any site sends it.
bool cross_origin_refused(std::string_view host, std::string_view origin);

}  // namespace orch::serve
