#include "orch/serve/frontend_files.hpp"

#include <fcntl.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <system_error>
#include <utility>
#include <vector>

#include "orch/serve/confined_path.hpp"
#include "orch/serve/serve_files.hpp"
#include "orch/support/ascii_lower.hpp"

namespace orch::serve {

namespace fs = std::filesystem;

namespace {

// Where serve has no frontend: the page says what to do instead of a bare 404.
constexpr const char* no_frontend_page =
    "<!doctype html><title>comfy-orch serve</title><h1>comfy-orch serve: no frontend</h1>"
    "<p>ComfyUI's API is served, but this server has no frontend to show. Run "
    "<code>scripts/install-deps</code> (it unpacks the pinned comfyui-frontend-package into "
    "<code>.deps/frontend</code>), or start serve with <code>--front-end-root DIR</code>, a "
    "directory holding the frontend's <code>index.html</code>.</p>";

}  // namespace

std::string frontend_content_type(std::string_view filename) {
  const auto dot = filename.rfind('.');
  const std::string ext =
      dot == std::string_view::npos ? "" : ascii_lower(filename.substr(dot + 1));
  // ComfyUI's own table (server.py adds the JavaScript and CSS types to mimetypes).
  static const std::pair<const char*, const char*> types[] = {
      {"js", "application/javascript; charset=utf-8"},
      {"mjs", "application/javascript; charset=utf-8"},
      {"css", "text/css; charset=utf-8"},
      {"html", "text/html; charset=utf-8"},
      {"svg", "image/svg+xml"},
      {"ico", "image/x-icon"},
      {"woff", "font/woff"},
      {"woff2", "font/woff2"},
      {"ttf", "font/ttf"},
      {"otf", "font/otf"},
      {"eot", "application/vnd.ms-fontobject"},
      {"wasm", "application/wasm"},
      {"map", "application/json"},
      {"glb", "model/gltf-binary"},
      {"mp3", "audio/mpeg"}};  // the workflow templates' audio previews
  for (const auto& [e, type] : types)
    if (ext == e) return type;
  return content_type_of(filename);
}

std::optional<http_reply> confined_file_reply(ipc::unique_fd root,
                                              std::vector<std::string> components) {
  if (components.empty()) return std::nullopt;
  const std::string name = components.back();
  components.pop_back();
  auto dir = open_confined_directory(std::move(root), components, false);
  if (!dir) return std::nullopt;
  auto file = open_confined_file(dir->get(), name);
  if (!file) return std::nullopt;
  http_reply reply;
  reply.content_type = frontend_content_type(name);
  reply.file = std::make_shared<ipc::unique_fd>(std::move(*file));
  return reply;
}

namespace {

std::optional<ipc::unique_fd> open_root(const fs::path& root) {
  ipc::unique_fd fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  return fd;
}

// Every .js file under `base` (opened), as `prefix` + its path there, walked as get() opens
// files, so what is listed is what get() serves.
void add_scripts(std::optional<ipc::unique_fd> base, const std::string& prefix,
                 std::vector<std::string>& urls) {
  if (!base) return;
  for_each_confined_file(base->get(), true, [&](const std::string& path, const struct stat&) {
    if (path.size() > 3 && path.compare(path.size() - 3, 3, ".js") == 0)
      urls.push_back(prefix + path);
  });
}

// urllib.parse.quote's: every byte but letters, digits and -._~/ percent-encoded.
std::string url_quoted(const std::string& text) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
      out.push_back(c);
    } else {
      out += {'%', hex[u >> 4], hex[u & 15]};
    }
  }
  return out;
}

}  // namespace

std::optional<http_reply> frontend_files::get(const std::string& path) const {
  const bool index = path == "/" || path == "/index.html";
  auto parts = relative_components(index ? std::string("index.html") : path.substr(1));
  if (!parts) return std::nullopt;
  // A pack's web directory (ComfyUI adds these static routes ahead of its web root's).
  if (parts->size() >= 3 && (*parts)[0] == "extensions") {
    for (const auto& pack : packs_) {
      if (pack.name != (*parts)[1]) continue;
      auto dir = open_web_dir(pack);
      if (!dir) return std::nullopt;
      return confined_file_reply(std::move(*dir),
                           std::vector<std::string>(parts->begin() + 2, parts->end()));
    }
  }
  if (!root_) {
    if (!index) return std::nullopt;
    return http_reply{404, "text/html; charset=utf-8", no_frontend_page};
  }
  auto root = open_root(*root_);
  if (!root) return std::nullopt;
  auto reply = confined_file_reply(std::move(*root), std::move(*parts));
  if (reply && index) {  // ComfyUI's get_root: a frontend updated in place is seen at once
    reply->headers.emplace_back("Cache-Control", "no-cache");
    reply->headers.emplace_back("Pragma", "no-cache");
    reply->headers.emplace_back("Expires", "0");
  }
  return reply;
}

nlohmann::json frontend_files::extensions() const {
  std::vector<std::string> core, packs;
  if (root_) add_scripts(open_root(*root_ / "extensions"), "/extensions/", core);
  std::sort(core.begin(), core.end());
  for (const auto& pack : packs_)
    add_scripts(open_web_dir(pack), "/extensions/" + url_quoted(pack.name) + "/", packs);
  std::sort(packs.begin(), packs.end());
  core.insert(core.end(), packs.begin(), packs.end());
  return core;
}

}  // namespace orch::serve
