// user_data: ComfyUI's user manager for its one local user, `default` (app/user_manager.py at
// ComfyUI a125cd84; docs/serve.md): the files of `<user directory>/default/` that the frontend
// keeps its workflows, settings and templates in, and the settings file itself.
//
//   GET  /users                      {"storage": "server", "migrated": true}
//   GET  /settings, /settings/{id}   comfy.settings.json, or one value of it (null if unset)
//   POST /settings, /settings/{id}   merges an object into it, or sets one value
//   GET  /userdata?dir=&recurse=&full_info=&split=   the files under dir (404 if it is absent)
//   GET, POST, DELETE /userdata/{file}              a file; POST ?overwrite=false is 409 on a
//                                                    taken name, ?full_info=true answers its info
//   POST /userdata/{file}/move/{dest}?overwrite=     renames it
//
// {file} is one segment of the request's path, in which %2F is a directory separator
// (http_request::segments), as aiohttp decodes it. Every path is walked as confined_path walks it
// (no `..`, no symlink, nothing outside the user's directory: 403), and every file is written
// whole or not at all (upload_store).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "orch/serve/serve_http.hpp"

namespace orch::serve {

class user_data {
 public:
  // `users`: ComfyUI's user directory (its --user-directory; `<root>/user`); the default user's
  // directory is made in it.
  explicit user_data(std::filesystem::path users);

  // The answer to a request whose route (its segments without a leading "api") is one of the
  // above, or nullopt for any other route.
  std::optional<http_reply> handle(const http_request& req,
                                   const std::vector<std::string>& route) const;

 private:
  http_reply list(const http_request& req) const;
  http_reply read(const std::string& file) const;
  http_reply write(const std::string& file, const http_request& req) const;
  http_reply remove(const std::string& file) const;
  http_reply move(const std::string& file, const std::string& dest,
                  const http_request& req) const;
  http_reply settings(const http_request& req, const std::optional<std::string>& id) const;

  std::filesystem::path user_;  // <users>/default
};

}  // namespace orch::serve
