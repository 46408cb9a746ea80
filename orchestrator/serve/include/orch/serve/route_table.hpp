// route_table: serve's routes, each written once (docs/serve.md, "Routes"): its method and path,
// the thread that answers it, how its body is taken, and its handler. The server answers from it
// on the io thread (at_once), on the API thread (answer), and chooses a body's cap from it
// (takes_upload); a wrong method on one of its paths is a 405. ComfyUI's routes had been listed in
// comfy_api's dispatch, again for the io thread and again for the 405s and the upload cap, and the
// CLI had wired the live views' routes in front of them through lambdas.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "orch/serve/serve_http.hpp"

namespace orch::serve {

// Where a route is answered: on the io thread, for what needs no wait (an interrupt must never
// queue behind a request that waits for the node it stops), else on the API thread.
enum class answered_on { api_thread, io_thread };

struct route {
  std::string method;  // GET, POST, ...
  // Without ComfyUI's /api prefix: every route is also served under /api, as ComfyUI's are.
  std::string path;
  bool subpaths = false;  // path/... too (/history/{prompt_id}, /object_info/{class})
  answered_on where = answered_on::api_thread;
  bool upload = false;  // its body is an upload's: --max-upload's cap, spooled to a file
  // After its answer, what it freed goes back to the system (malloc_trim): a queue or history
  // cleared had left its parsed documents in glibc's free lists.
  bool trims = false;
  std::function<http_reply(const http_request&)> answer;
};

class route_table {
 public:
  // Requests matched by rules of their own (the jobs API, a pack's aiohttp routes, the frontend's
  // files and data): nullopt for a request that is not theirs. Asked after the routes, in the
  // order they were added, as ComfyUI's main.py adds them.
  using fallback = std::function<std::optional<http_reply>(const http_request&)>;

  void add(route r) { routes_.push_back(std::move(r)); }
  void add_fallback(fallback f) { fallbacks_.push_back(std::move(f)); }

  // On the io thread: the answer of a route answered there; nullopt for every other request,
  // which goes to the API thread.
  std::optional<http_reply> at_once(const http_request& req) const;
  // On the API thread: the route's answer, else the first fallback's, else 405 for a path that
  // has a route for another method, else 404.
  http_reply answer(const http_request& req) const;
  // Whether the route of `method` and (decoded) `path` takes an upload.
  bool takes_upload(const std::string& method, const std::string& path) const;

 private:
  // The route of `method` on `path` (without /api); with `path_known`, whether any method has one.
  const route* find(const std::string& method, const std::string& path,
                    bool* path_known = nullptr) const;

  std::vector<route> routes_;
  std::vector<fallback> fallbacks_;
};

// `path` without ComfyUI's /api prefix.
std::string route_path(const std::string& path);

}  // namespace orch::serve
