#include "orch/serve/serve_files.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "orch/executor/prompt.hpp"
#include "orch/serve/confined_path.hpp"
#include "orch/serve/errc.hpp"
#include "orch/serve/image_codec.hpp"
#include "orch/serve/masked_image.hpp"
#include "orch/serve/multipart_form.hpp"
#include "orch/serve/upload_store.hpp"
#include "orch/serve/view_image.hpp"
#include "orch/support/ascii_lower.hpp"
#include "orch/support/untrusted_text.hpp"
#include "log_throttle.hpp"
#include "spooled_body.hpp"

namespace orch::serve {

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
  const view_request asked = view_request_of(req.query);
  if (asked.what == view_request::kind::file_as_is) {
    reply.file = std::make_shared<ipc::unique_fd>(std::move(*file));
    return reply;
  }
  // Re-encoded (view_image.hpp). Where Pillow raises (a file that is no image it reads, a
  // quality out of range), server.py answers 500; so does serve, saying why.
  auto image = decode_image_file(file->get());
  if (!image) return refusal(500, image.err().message);
  auto view = render_view(asked, *image);
  if (!view) return refusal(500, view.err().message);
  reply.content_type = std::move(view->content_type);
  reply.body = std::move(view->body);
  return reply;
}

// An upload's form as /upload/image and /upload/mask read it alike.
struct file_routes::upload_form {
  std::unique_ptr<mapped_body> spooled;  // the body, when serve spooled it to disk
  std::vector<form_part> parts;          // viewing the body
  const form_part* image = nullptr;
  std::string name;
  std::string type;
  std::string subfolder;
  bool overwrite = false;
  ipc::unique_fd dir;  // the subfolder, made if missing
};

std::optional<http_reply> file_routes::read_upload(const http_request& req,
                                                   upload_form& form) const {
  if (req.body_file) {
    auto mapped = mapped_body::map(req.body_file->get());
    if (!mapped) return refusal(500, mapped.err().message);
    form.spooled = std::make_unique<mapped_body>(std::move(*mapped));
  }
  auto parts = parse_form(req.content_type, form.spooled ? form.spooled->bytes() : req.body);
  if (!parts) return refusal(400, parts.err().message);
  form.parts = std::move(*parts);
  form.image = first_part(form.parts, "image");
  // A field `image` without a file name is text, not a file (ComfyUI: 400).
  if (form.image == nullptr || !form.image->filename)
    return refusal(400, "the form has no file in a field named image");
  form.name = *form.image->filename;
  if (auto plain = plain_file_name(form.name); !plain)
    return refusal(400, "filename: " + plain.err().message);
  form.type = field(form.parts, "type", "input");
  const fs::path* root = directory(form.type);
  if (root == nullptr)
    return refusal(400, "type must be input, output or temp, not '" + form.type + "'");
  form.subfolder = field(form.parts, "subfolder", "");
  auto components = relative_components(form.subfolder);
  if (!components) return refusal(403, "subfolder: " + components.err().message);
  const std::string overwrite = field(form.parts, "overwrite", "");
  form.overwrite = overwrite == "true" || overwrite == "1";
  auto dir = open_confined_directory(*root, *components, true);
  if (!dir) {
    // Made as it went: a component that is missing now is a file in the way.
    const unsigned status =
        dir.err().code == serve_errc::not_found ? 400 : status_of(dir.err(), true);
    return refusal(status, "subfolder: " + dir.err().message);
  }
  form.dir = std::move(*dir);
  return std::nullopt;
}

http_reply file_routes::uploaded(const upload_form& form, const std::string& name) {
  return {200, "application/json",
          json{{"name", name}, {"subfolder", form.subfolder}, {"type", form.type}}.dump(
              -1, ' ', false, json::error_handler_t::replace)};
}

http_reply file_routes::upload_image(const http_request& req) const {
  upload_form form;
  if (auto refused = read_upload(req, form)) return std::move(*refused);
  auto stored = store_upload(form.dir.get(), form.name, form.image->data, form.overwrite);
  if (!stored) return refusal(status_of(stored.err(), false), stored.err().message);
  return uploaded(form, *stored);
}

// What /upload/mask's original_ref leads to, in server.py's order: a 500 where it raises (no
// original_ref, JSON that does not parse, no `filename`, a value of the wrong type, an original
// that is no image), a reason to write nothing where its image_save_function returns early
// (which its caller ignores: the upload is still answered 200), or the original decoded.
struct file_routes::original_image {
  std::optional<http_reply> failed;
  std::string nothing_written;
  std::optional<decoded_image> image;

  static original_image refused(const std::string& why) { return {refusal(500, why), {}, {}}; }
  static original_image skipped(std::string why) { return {std::nullopt, std::move(why), {}}; }
};

http_reply file_routes::upload_mask(const http_request& req) const {
  upload_form form;
  if (auto refused = read_upload(req, form)) return std::move(*refused);
  // server.py looks for a duplicate of the bytes received before it reads original_ref.
  if (!form.overwrite) {
    auto duplicate = stored_duplicate(form.dir.get(), form.name, form.image->data);
    if (!duplicate) return refusal(500, duplicate.err().message);
    if (*duplicate) return uploaded(form, **duplicate);
  }
  auto original = original_of(form.parts);
  if (original.failed) return std::move(*original.failed);
  if (!original.image) {
    // Said at most once a minute: a client that repeats such a request must not flood the log.
    static log_throttle nothing_written_said;
    if (nothing_written_said.due())
      spdlog::warn("serve: /upload/mask wrote nothing for '{}': {} (ComfyUI answers 200 so too; "
                   "said at most once a minute)",
                   printable(form.name.substr(0, 200)), printable(original.nothing_written));
    return uploaded(form, form.name);
  }
  auto mask = decode_image(form.image->data);
  if (!mask) return refusal(500, "the uploaded mask: " + mask.err().message);
  auto bytes = masked_image(std::move(*original.image), *mask, form.name);
  if (!bytes) return refusal(500, bytes.err().message);
  const std::string_view data(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  auto stored =
      store_upload(form.dir.get(), form.name, data, form.overwrite, same_bytes::pass_over);
  if (!stored) return refusal(status_of(stored.err(), false), stored.err().message);
  return uploaded(form, *stored);
}

// server.py's image_save_function up to Image.open, over the confined walk: a path it refuses
// (a `..`, a subfolder leaving the directory) and a path serve refuses (a symlink) alike write
// nothing.
file_routes::original_image file_routes::original_of(const std::vector<form_part>& parts) const {
  const form_part* ref = first_part(parts, "original_ref");
  if (ref == nullptr)
    return original_image::refused(
        "the form has no original_ref (JSON naming the image the mask is for: {\"filename\", "
        "\"subfolder\", \"type\"})");
  auto parsed = executor::parse_bounded_json(std::string(ref->data));
  if (!parsed) return original_image::refused("original_ref: " + parsed.err().message);
  const json& doc = *parsed;
  if (!doc.is_object() || !doc.contains("filename") || !doc["filename"].is_string())
    return original_image::refused("original_ref must be an object with a string filename");
  std::string filename = doc["filename"].get<std::string>();
  std::string type = "output";
  const auto annotated = strip_annotation(filename);
  if (filename.empty()) return original_image::skipped("original_ref names no file");
  if (filename[0] == '/' || filename.find("..") != std::string::npos)
    return original_image::skipped("original_ref's filename is absolute or holds '..'");
  if (annotated) {
    type = *annotated;
  } else if (const auto t = doc.find("type"); t != doc.end()) {
    type = t->is_string() ? t->get<std::string>() : std::string();
  }
  const fs::path* root = directory(type);
  if (root == nullptr)
    return original_image::skipped("original_ref's type is not output, input or temp");
  std::string subfolder;
  if (const auto sub = doc.find("subfolder"); sub != doc.end() && *sub != "") {
    if (!sub->is_string())
      return original_image::refused("original_ref's subfolder must be a string");
    subfolder = sub->get<std::string>();
  }
  auto where = relative_components(subfolder);
  auto name = relative_components(filename);
  if (!where || !name || name->empty())
    return original_image::skipped("original_ref's subfolder or filename leaves the directory");
  where->insert(where->end(), name->begin(), name->end() - 1);
  auto dir = open_confined_directory(*root, *where, false);
  if (!dir) return original_image::skipped("original_ref's subfolder: " + dir.err().message);
  auto file = open_confined_file(dir->get(), name->back());
  if (!file && file.err().code == serve_errc::file_io_failed)
    return original_image::refused(file.err().message);
  if (!file) return original_image::skipped("original_ref's file: " + file.err().message);
  auto image = decode_image_file(file->get());
  if (!image) return original_image::refused("the original image: " + image.err().message);
  return {std::nullopt, {}, std::move(*image)};
}

}  // namespace orch::serve
