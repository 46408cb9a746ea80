#include "orch/serve/route_table.hpp"

#include <malloc.h>

#include "orch/serve/json_reply.hpp"

namespace orch::serve {

std::string route_path(const std::string& path) {
  return path.rfind("/api/", 0) == 0 ? path.substr(4) : path;
}

const route* route_table::find(const std::string& method, const std::string& path,
                               bool* path_known) const {
  for (const auto& r : routes_) {
    const bool on_path = path == r.path || (r.subpaths && path.rfind(r.path + "/", 0) == 0);
    if (!on_path) continue;
    if (r.method == method) return &r;
    if (path_known != nullptr) *path_known = true;
  }
  return nullptr;
}

std::optional<http_reply> route_table::at_once(const http_request& req) const {
  const route* r = find(req.method, route_path(req.path));
  if (r == nullptr || r->where != answered_on::io_thread) return std::nullopt;
  return r->answer(req);
}

http_reply route_table::answer(const http_request& req) const {
  const std::string path = route_path(req.path);
  bool path_known = false;
  const route* r = find(req.method, path, &path_known);
  http_reply reply;
  if (r != nullptr) {
    reply = r->answer(req);
  } else {
    std::optional<http_reply> other;
    for (const auto& f : fallbacks_)
      if ((other = f(req))) break;
    if (other)
      reply = std::move(*other);
    else if (path_known)
      reply = json_reply({{"error", req.method + " is not allowed on " + path}}, 405);
    else
      reply = json_reply({{"error", "no route " + req.method + " " + path}}, 404);
  }
  // After a large request or answer too: a queue of 64 MiB of prompts and its GET /queue had
  // left the server at 269 MiB after it was cleared.
  constexpr std::size_t large = std::size_t{8} << 20;
  if ((r != nullptr && r->trims) || req.body.size() > large || reply.body.size() > large)
    ::malloc_trim(0);
  return reply;
}

bool route_table::takes_upload(const std::string& method, const std::string& path) const {
  const route* r = find(method, route_path(path));
  return r != nullptr && r->upload;
}

}  // namespace orch::serve
