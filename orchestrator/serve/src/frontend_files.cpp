#include "orch/serve/frontend_files.hpp"

#include <algorithm>
#include <memory>
#include <system_error>
#include <utility>
#include <vector>

#include "orch/serve/confined_path.hpp"
#include "orch/serve/serve_files.hpp"
#include "orch/support/ascii_lower.hpp"

namespace orch::orchestrator {

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
      {"glb", "model/gltf-binary"}};
  for (const auto& [e, type] : types)
    if (ext == e) return type;
  return content_type_of(filename);
}

std::optional<http_reply> frontend_files::get(const std::string& path) const {
  const bool index = path == "/" || path == "/index.html";
  if (!root_) {
    if (!index) return std::nullopt;
    return http_reply{404, "text/html; charset=utf-8", no_frontend_page};
  }
  auto parts = relative_components(index ? std::string("index.html") : path.substr(1));
  if (!parts || parts->empty()) return std::nullopt;
  const std::string name = parts->back();
  parts->pop_back();
  auto dir = open_confined_directory(*root_, *parts, false);
  if (!dir) return std::nullopt;
  auto file = open_confined_file(dir->get(), name);
  if (!file) return std::nullopt;
  http_reply reply;
  reply.content_type = frontend_content_type(name);
  if (index) reply.headers.emplace_back("Cache-Control", "no-store, must-revalidate");
  reply.file = std::make_shared<ipc::unique_fd>(std::move(*file));
  return reply;
}

nlohmann::json frontend_files::extensions() const {
  std::vector<std::string> urls;
  if (root_) {
    std::error_code ec;
    const fs::path base = *root_ / "extensions";
    // Symlinks are not followed: what is listed is what get() would serve.
    for (fs::recursive_directory_iterator it(base, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->is_regular_file(ec) && !it->is_symlink(ec) && it->path().extension() == ".js")
        urls.push_back("/extensions/" + it->path().lexically_relative(base).generic_string());
    }
  }
  std::sort(urls.begin(), urls.end());
  return urls;
}

}  // namespace orch::orchestrator
