#include "orch/serve/user_data.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <system_error>

#include <nlohmann/json.hpp>

#include "orch/executor/prompt.hpp"
#include "orch/serve/confined_path.hpp"
#include "orch/serve/errc.hpp"
#include "orch/serve/json_reply.hpp"
#include "orch/serve/upload_store.hpp"
#include "orch/support/ascii_lower.hpp"

namespace orch::serve {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* settings_file = "comfy.settings.json";
// The settings file is read whole at every request: it stays small (the frontend's is a few KiB).
constexpr std::size_t max_settings_bytes = std::size_t{4} << 20;

// `value` as the settings file holds it (indented by 4, as ComfyUI's json.dump), or nullopt as
// soon as the text passes `cap` bytes: it is never built past it. Indentation grows with depth,
// so a 1 MiB body of nested arrays had been printed to 1 GB (12 s of the API thread for 4 MiB)
// before its size was compared with the cap.
std::optional<std::string> indented_at_most(const json& value, std::size_t cap) {
  struct too_long {};
  struct capped final : nlohmann::detail::output_adapter_protocol<char> {
    capped(std::string& o, std::size_t c) : out(o), cap(c) {}
    void write_character(char c) override {
      if (out.size() >= cap) throw too_long{};
      out.push_back(c);
    }
    void write_characters(const char* s, std::size_t n) override {
      if (n > cap - out.size()) throw too_long{};
      out.append(s, n);
    }
    std::string& out;
    std::size_t cap;
  };
  std::string text;
  nlohmann::detail::serializer<json> writer(std::make_shared<capped>(text, cap), ' ',
                                            json::error_handler_t::replace);
  try {
    writer.dump(value, true, false, 4);
  } catch (const too_long&) {
    return std::nullopt;
  }
  return text;
}

http_reply user_text(unsigned status, const std::string& body = "") {
  return {status, "text/plain; charset=utf-8", body};
}

bool query_true(const http_request& req, const char* key) {
  auto it = req.query.find(key);
  return it != req.query.end() && ascii_lower(it->second) == "true";
}

// ComfyUI's overwrite: anything but "false" overwrites.
bool overwrite_of(const http_request& req) {
  auto it = req.query.find("overwrite");
  return it == req.query.end() || it->second != "false";
}

// A file of the user's directory, as the client named it: its directory's components and its
// name. ComfyUI decodes a name that still holds '%' once more; so does this.
struct user_path {
  std::vector<std::string> dirs;
  std::string name;
};

result<user_path> parse_user_path(std::string file) {
  if (file.find('%') != std::string::npos) file = percent_decoded(file);
  auto parts = relative_components(file);
  if (!parts) return parts.err();
  if (parts->empty()) return error{serve_errc::bad_path, "no file is named"};
  user_path p;
  p.name = parts->back();
  parts->pop_back();
  p.dirs = std::move(*parts);
  return p;
}

unsigned user_status(const error& e) {
  if (e.code == serve_errc::bad_path || e.code == serve_errc::symlink_refused) return 403;
  if (e.code == serve_errc::not_found) return 404;
  return 500;
}

std::string joined(const user_path& p) {
  std::string out;
  for (const auto& d : p.dirs) out += d + "/";
  return out + p.name;
}

// get_file_info's fields: the path relative to `base`, the size and the times in seconds.
json file_info(const std::string& relative, const struct stat& st) {
  const auto seconds = [](const timespec& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
  };
  return {{"path", relative},
          {"size", static_cast<std::uint64_t>(st.st_size)},
          {"modified", seconds(st.st_mtim)},
          {"created", seconds(st.st_ctim)}};
}

// The entry `name` of `dir`, not followed if it is a symlink; nullopt where it is absent.
std::optional<struct stat> stat_at(int dir, const std::string& name) {
  struct stat st {};
  if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return std::nullopt;
  return st;
}

}  // namespace

user_data::user_data(fs::path users) : user_(std::move(users) / "default") {
  std::error_code ec;
  fs::create_directories(user_, ec);  // "migrated": the frontend keeps its data here
}

std::optional<http_reply> user_data::handle(const http_request& req,
                                            const std::vector<std::string>& route) const {
  const bool get = req.method == "GET", post = req.method == "POST";
  if (route.empty()) return std::nullopt;
  const std::string& head = route[0];
  if (head == "users" && route.size() == 1 && get)
    return json_reply({{"storage", "server"}, {"migrated", fs::is_directory(user_)}});
  if (head == "settings" && route.size() <= 2 && (get || post))
    return settings(req, route.size() == 2 ? std::optional(route[1]) : std::nullopt);
  if (head != "userdata") return std::nullopt;
  if (route.size() == 1 && get) return list(req);
  if (route.size() == 2 && get) return read(route[1]);
  if (route.size() == 2 && post) return write(route[1], req);
  if (route.size() == 2 && req.method == "DELETE") return remove(route[1]);
  if (route.size() == 4 && route[2] == "move" && post) return move(route[1], route[3], req);
  return std::nullopt;
}

http_reply user_data::list(const http_request& req) const {
  auto d = req.query.find("dir");
  if (d == req.query.end() || d->second.empty()) return user_text(400, "Directory not provided");
  auto parts = relative_components(d->second);
  if (!parts) return user_text(403, "Invalid directory");
  auto dir = open_confined_directory(user_, *parts, false);
  if (!dir) {
    const bool absent = dir.err().code == serve_errc::not_found;
    return user_text(absent ? 404 : 403, absent ? "Directory not found" : "Invalid directory");
  }
  const bool recurse = query_true(req, "recurse"), full_info = query_true(req, "full_info"),
             split = query_true(req, "split");
  std::vector<std::pair<std::string, struct stat>> files;
  for_each_confined_file(dir->get(), recurse, [&](const std::string& path, const struct stat& st) {
    files.emplace_back(path, st);
  });
  std::sort(files.begin(), files.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  json out = json::array();
  for (const auto& [relative, st] : files) {
    if (full_info) {
      out.push_back(file_info(relative, st));
    } else if (split) {
      json row = json::array({relative});
      for (const auto& c : fs::path(relative)) row.push_back(c.string());
      out.push_back(std::move(row));
    } else {
      out.push_back(relative);
    }
  }
  return json_reply(out);
}

http_reply user_data::read(const std::string& file) const {
  auto p = parse_user_path(file);
  if (!p) return user_text(403);
  auto dir = open_confined_directory(user_, p->dirs, false);
  if (!dir) return user_text(user_status(dir.err()));
  auto f = open_confined_file(dir->get(), p->name);
  if (!f) return user_text(user_status(f.err()));
  http_reply reply{200, "application/octet-stream", ""};
  if (p->name.size() > 5 && p->name.compare(p->name.size() - 5, 5, ".json") == 0)
    reply.content_type = "application/json";
  reply.file = std::make_shared<ipc::unique_fd>(std::move(*f));
  return reply;
}

http_reply user_data::write(const std::string& file, const http_request& req) const {
  auto p = parse_user_path(file);
  if (!p) return user_text(403);
  auto dir = open_confined_directory(user_, p->dirs, true);
  if (!dir) return user_text(user_status(dir.err()));
  if (!overwrite_of(req) && stat_at(dir->get(), p->name))
    return user_text(409, "File already exists");
  auto stored = store_upload(dir->get(), p->name, req.body, true);
  if (!stored) return user_text(400, stored.err().message);
  if (!query_true(req, "full_info")) return json_reply(joined(*p));
  auto st = stat_at(dir->get(), p->name);
  return st ? json_reply(file_info(joined(*p), *st)) : user_text(500);
}

http_reply user_data::remove(const std::string& file) const {
  auto p = parse_user_path(file);
  if (!p) return user_text(403);
  auto dir = open_confined_directory(user_, p->dirs, false);
  if (!dir) return user_text(user_status(dir.err()));
  auto st = stat_at(dir->get(), p->name);
  if (!st || !S_ISREG(st->st_mode)) return user_text(404);
  if (::unlinkat(dir->get(), p->name.c_str(), 0) != 0) return user_text(500);
  return user_text(204);
}

http_reply user_data::move(const std::string& file, const std::string& dest,
                           const http_request& req) const {
  auto from = parse_user_path(file);
  auto to = parse_user_path(dest);
  if (!from || !to) return user_text(403);
  auto from_dir = open_confined_directory(user_, from->dirs, false);
  if (!from_dir) return user_text(user_status(from_dir.err()));
  auto st = stat_at(from_dir->get(), from->name);
  if (!st || !S_ISREG(st->st_mode)) return user_text(404);
  auto to_dir = open_confined_directory(user_, to->dirs, true);
  if (!to_dir) return user_text(user_status(to_dir.err()));
  if (auto there = stat_at(to_dir->get(), to->name)) {
    if (!overwrite_of(req)) return user_text(409, "File already exists");
    // overwrite replaces a file, never a directory (rename(2) refuses; that had answered 500).
    if (!S_ISREG(there->st_mode))
      return user_text(409, "A directory (or another non-file) is there; move it elsewhere");
  }
  if (::renameat(from_dir->get(), from->name.c_str(), to_dir->get(), to->name.c_str()) != 0)
    return user_text(500);
  if (!query_true(req, "full_info")) return json_reply(joined(*to));
  auto moved = stat_at(to_dir->get(), to->name);
  return moved ? json_reply(file_info(joined(*to), *moved)) : user_text(500);
}

http_reply user_data::settings(const http_request& req,
                               const std::optional<std::string>& id) const {
  auto dir = open_confined_directory(user_, {}, true);
  if (!dir) return user_text(500);
  // An absent file is no settings; one that cannot be read is never written over.
  std::optional<json> stored = json::object();
  if (auto f = open_confined_file(dir->get(), settings_file)) {
    stored.reset();
    if (auto bytes = read_at_most(f->get(), max_settings_bytes))
      if (auto parsed = executor::parse_bounded_json(*bytes); parsed && parsed->is_object())
        stored = std::move(*parsed);
  }
  if (req.method == "GET") {
    const json all = stored.value_or(json::object());  // ComfyUI's: {} for a broken file
    if (!id) return json_reply(all);
    auto it = all.find(*id);
    return json_reply(it == all.end() ? json(nullptr) : *it);
  }
  if (!stored)
    return user_text(500, std::string(settings_file) + " cannot be read; it is left as it is");
  json& all = *stored;
  auto body = executor::parse_bounded_json(req.body);
  if (!body) return user_text(400, "the body is not JSON: " + body.err().message);
  if (id) {
    if (id->empty()) return user_text(400);
    all[*id] = std::move(*body);
  } else if (body->is_object()) {
    all.update(*body);
  } else {
    return user_text(400, "the body is not a JSON object");
  }
  // What is written must read back: a value nested to the reader's limit would be one level
  // deeper in the file, and every later read would lose every setting.
  const auto text = indented_at_most(all, max_settings_bytes);
  if (!text || !executor::parse_bounded_json(*text))
    return user_text(400, "the settings would be too large or too deeply nested to read back");
  auto written = store_upload(dir->get(), settings_file, *text, true);
  return written ? user_text(200) : user_text(500, written.err().message);
}

}  // namespace orch::serve
