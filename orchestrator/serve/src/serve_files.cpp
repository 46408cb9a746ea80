#include "orch/serve/serve_files.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "orch/serve/confined_path.hpp"
#include "orch/serve/errc.hpp"
#include "orch/serve/multipart_form.hpp"
#include "orch/serve/upload_store.hpp"
#include "orch/support/ascii_lower.hpp"
#include "spooled_body.hpp"

namespace orch::orchestrator {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The client's bytes are quoted in messages: invalid UTF-8 becomes U+FFFD, never an exception.
http_reply refusal(unsigned status, const std::string& message) {
  return {status, "application/json",
          json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace)};
}

// ComfyUI answers a bad file name 400 and a subfolder that leaves the directory 403; a symlink
// is refused as a way out of it.
unsigned status_of(const error& e, bool in_subfolder) {
  if (e.code == serve_errc::bad_path) return in_subfolder ? 403 : 400;
  if (e.code == serve_errc::symlink_refused) return 403;
  if (e.code == serve_errc::not_found) return 404;
  return 500;
}

// ComfyUI's annotated file name, `x.png [input]`: the annotation names the directory, and wins
// over type=.
std::optional<std::string> strip_annotation(std::string& filename) {
  for (const char* type : {"output", "input", "temp"}) {
    const std::string suffix = std::string(" [") + type + "]";
    if (filename.size() > suffix.size() &&
        filename.compare(filename.size() - suffix.size(), suffix.size(), suffix) == 0) {
      filename.resize(filename.size() - suffix.size());
      return type;
    }
  }
  return std::nullopt;
}

// A file name inside a quoted header parameter: a quote, a backslash or a control byte
// (CR LF would start a header of the client's choosing) becomes '_'.
std::string header_safe(std::string_view name) {
  std::string out(name);
  for (auto& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == '"' || c == '\\') c = '_';
  }
  return out;
}

std::string field(const std::vector<form_part>& parts, std::string_view name,
                  std::string fallback) {
  const form_part* p = first_part(parts, name);
  return p == nullptr ? fallback : std::string(p->data);
}

status make_directory(const fs::path& dir, const char* what) {
  fs::path at;
  for (const auto& c : dir) {
    at /= c;
    std::error_code ec;
    if (fs::is_directory(at, ec)) continue;
    if (::mkdir(at.c_str(), 0755) != 0 && errno != EEXIST)
      return error{serve_errc::directory_unusable,
                   std::string("cannot create the ") + what + " directory " + dir.string() +
                       ": mkdir(" + at.string() + "): " + std::strerror(errno)};
  }
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return error{serve_errc::directory_unusable,
                 std::string("the ") + what + " directory " + dir.string() + " is not a directory"};
  return ok_status();
}

}  // namespace

file_directories file_directories_of(const manifests::deployment& d) {
  const fs::path base = d.comfyui_root.value_or(fs::absolute(d.file).parent_path());
  return {fs::absolute(d.server.input_directory).lexically_normal(),
          fs::absolute(d.server.output_directory).lexically_normal(),
          fs::absolute(base / "temp").lexically_normal(),
          fs::absolute(base / "user").lexically_normal()};
}

status create_file_directories(const file_directories& dirs) {
  if (auto s = make_directory(dirs.input, "input"); !s) return s;
  if (auto s = make_directory(dirs.output, "output"); !s) return s;
  if (auto s = make_directory(dirs.temp, "temp"); !s) return s;
  return make_directory(dirs.user, "user");
}

std::string content_type_of(std::string_view filename) {
  const auto dot = filename.rfind('.');
  const std::string ext =
      dot == std::string_view::npos ? "" : ascii_lower(filename.substr(dot + 1));
  static const std::pair<const char*, const char*> types[] = {
      {"png", "image/png"},   {"jpg", "image/jpeg"}, {"jpeg", "image/jpeg"},
      {"webp", "image/webp"}, {"gif", "image/gif"},  {"json", "application/json"},
      {"txt", "text/plain"},  {"mp4", "video/mp4"},  {"webm", "video/webm"},
      {"wav", "audio/wav"},   {"flac", "audio/flac"}};
  for (const auto& [e, type] : types)
    if (ext == e) return type;
  return "application/octet-stream";
}

const fs::path* file_routes::directory(const std::string& type) const {
  if (type == "output") return &dirs_.output;
  if (type == "input") return &dirs_.input;
  if (type == "temp") return &dirs_.temp;
  return nullptr;
}

http_reply file_routes::view(const http_request& req) const {
  const auto f = req.query.find("filename");
  if (f == req.query.end() || f->second.empty()) return refusal(400, "filename is required");
  std::string filename = f->second;
  std::string type = req.query.count("type") ? req.query.at("type") : "output";
  if (auto annotated = strip_annotation(filename)) type = *annotated;
  const fs::path* root = directory(type);
  if (root == nullptr)
    return refusal(400, "type must be output, input or temp, not '" + type + "'");
  auto name = relative_components(filename);
  if (!name) return refusal(status_of(name.err(), false), "filename: " + name.err().message);
  // ComfyUI serves the file name's last component from the subfolder (os.path.basename).
  if (name->empty()) return refusal(400, "filename names no file");
  const auto s = req.query.find("subfolder");
  auto subfolder = relative_components(s == req.query.end() ? std::string() : s->second);
  if (!subfolder)
    return refusal(status_of(subfolder.err(), true), "subfolder: " + subfolder.err().message);
  auto dir = open_confined_directory(*root, *subfolder, false);
  if (!dir) return refusal(status_of(dir.err(), true), "subfolder: " + dir.err().message);
  auto file = open_confined_file(dir->get(), name->back());
  if (!file) return refusal(status_of(file.err(), false), file.err().message);
  http_reply reply;
  reply.content_type = content_type_of(name->back());
  reply.headers.emplace_back("Content-Disposition",
                             "filename=\"" + header_safe(name->back()) + "\"");
  // ComfyUI's (002c3fb9): the browser takes the type given, never one it guesses.
  reply.headers.emplace_back("X-Content-Type-Options", "nosniff");
  reply.file = std::make_shared<ipc::unique_fd>(std::move(*file));
  return reply;
}

http_reply file_routes::upload_image(const http_request& req) const {
  std::optional<mapped_body> spooled;  // the body, when serve spooled it to disk
  std::string_view body = req.body;
  if (req.body_file) {
    auto mapped = mapped_body::map(req.body_file->get());
    if (!mapped) return refusal(500, mapped.err().message);
    spooled.emplace(std::move(*mapped));
    body = spooled->bytes();
  }
  auto parts = parse_form(req.content_type, body);
  if (!parts) return refusal(400, parts.err().message);
  const form_part* image = first_part(*parts, "image");
  // A field `image` without a file name is text, not a file (ComfyUI: 400).
  if (image == nullptr || !image->filename)
    return refusal(400, "the form has no file in a field named image");
  const std::string& name = *image->filename;
  if (auto plain = plain_file_name(name); !plain)
    return refusal(400, "filename: " + plain.err().message);
  const std::string type = field(*parts, "type", "input");
  const fs::path* root = directory(type);
  if (root == nullptr)
    return refusal(400, "type must be input, output or temp, not '" + type + "'");
  const std::string subfolder = field(*parts, "subfolder", "");
  auto components = relative_components(subfolder);
  if (!components) return refusal(403, "subfolder: " + components.err().message);
  const std::string overwrite = field(*parts, "overwrite", "");
  auto dir = open_confined_directory(*root, *components, true);
  if (!dir) {
    // Made as it went: a component that is missing now is a file in the way.
    const unsigned status =
        dir.err().code == serve_errc::not_found ? 400 : status_of(dir.err(), true);
    return refusal(status, "subfolder: " + dir.err().message);
  }
  auto stored =
      store_upload(dir->get(), name, image->data, overwrite == "true" || overwrite == "1");
  if (!stored) return refusal(status_of(stored.err(), false), stored.err().message);
  return {200, "application/json",
          json{{"name", *stored}, {"subfolder", subfolder}, {"type", type}}.dump(
              -1, ' ', false, json::error_handler_t::replace)};
}

}  // namespace orch::orchestrator
