// json_reply: an HTTP answer whose body is JSON, as every route of serve answers. The text a
// body holds comes from clients and workers: what is not valid UTF-8 is replaced (U+FFFD) when
// it is written, never thrown on.
#pragma once

#include <nlohmann/json.hpp>

#include "orch/serve/serve_http.hpp"

namespace orch::serve {

inline http_reply json_reply(const nlohmann::json& body, unsigned status = 200) {
  return {status, "application/json",
          body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
}

}  // namespace orch::serve
