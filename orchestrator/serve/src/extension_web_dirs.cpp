#include "orch/serve/extension_web_dirs.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <optional>
#include <regex>
#include <string_view>
#include <system_error>

#include <spdlog/spdlog.h>

#include "orch/manifests/toml_source.hpp"
#include "orch/support/untrusted_text.hpp"
#include "orch/serve/confined_path.hpp"

namespace orch::serve {

namespace fs = std::filesystem;

namespace {

// A pack's pyproject.toml and __init__.py are read to this size at most (real ones are a few
// KiB; the declaration sits near the top).
constexpr std::size_t max_pack_file_bytes = std::size_t{1} << 20;
constexpr std::size_t max_line_bytes = 4096;

// The file `name` of the pack's directory: a regular file reached without a symlink, at most
// max_pack_file_bytes, never a FIFO to block on (confined_path.hpp).
std::optional<std::string> pack_file(const fs::path& pack, const std::string& name) {
  auto dir = open_confined_directory(pack, {}, false);
  if (!dir) return std::nullopt;
  auto file = open_confined_file(dir->get(), name);
  if (!file) return std::nullopt;
  return read_at_most(file->get(), max_pack_file_bytes);
}

// `relative` under `pack`, an existing directory that is inside the pack once every symlink is
// resolved (a link out of it publishes nothing), as its resolved path.
std::optional<fs::path> inside(const fs::path& pack, const std::string& relative) {
  std::error_code ec;
  const fs::path base = fs::canonical(pack, ec);
  if (ec || relative.empty()) return std::nullopt;
  const fs::path dir = fs::canonical(base / relative, ec);
  if (ec || !fs::is_directory(dir, ec)) return std::nullopt;
  const fs::path rel = dir.lexically_relative(base);
  if (rel.empty() || rel == "." || *rel.begin() == "..") return std::nullopt;
  return dir;
}

// The web directory `dir`, with its identity now.
std::optional<extension_web_dir> found(const std::string& name, const fs::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return std::nullopt;
  return extension_web_dir{name, dir, st.st_dev, st.st_ino};
}

std::optional<extension_web_dir> from_pyproject(const fs::path& pack) {
  const auto text = pack_file(pack, "pyproject.toml");
  if (!text) return std::nullopt;
  manifests::diagnostics ignored;  // a pyproject serve cannot read declares nothing here
  const auto parsed = manifests::parse_toml_text(*text, (pack / "pyproject.toml").string(),
                                                 ignored);
  if (!parsed) return std::nullopt;
  const auto web = (*parsed)["tool"]["comfy"]["web"].value<std::string>();
  const auto name = (*parsed)["project"]["name"].value<std::string>();
  if (!web || !name || name->empty()) return std::nullopt;
  auto dir = inside(pack, *web);
  if (!dir) return std::nullopt;
  return found(*name, *dir);
}

std::optional<extension_web_dir> from_init(const fs::path& pack, const std::string& name) {
  const auto text = pack_file(pack, "__init__.py");
  if (!text) return std::nullopt;
  // A top-level assignment of a string literal; the last one wins, as when Python runs it.
  static const std::regex assignment(
      R"re(^WEB_DIRECTORY\s*=\s*(?:"([^"\\]*)"|'([^'\\]*)')\s*(?:#.*)?\r?$)re");
  std::optional<std::string> value;
  std::string_view rest(*text);
  while (!rest.empty()) {
    const auto end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    std::cmatch m;
    if (line.size() <= max_line_bytes && line.rfind("WEB_DIRECTORY", 0) == 0 &&
        std::regex_match(line.begin(), line.end(), m, assignment))
      value = m[1].matched ? m[1].str() : m[2].str();
  }
  if (!value) return std::nullopt;
  auto dir = inside(pack, *value);
  if (!dir) return std::nullopt;
  return found(name, *dir);
}

}  // namespace

std::optional<ipc::unique_fd> open_web_dir(const extension_web_dir& web) {
  ipc::unique_fd fd(::open(web.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0) return std::nullopt;
  if (st.st_dev != web.device || st.st_ino != web.inode) {
    spdlog::warn("serve: the web directory of pack '{}' ({}) is not the directory found at the "
                 "start: it is no longer served (restart serve to serve what is there now)",
                 printable(web.name), printable(web.dir.string()));
    return std::nullopt;
  }
  return fd;
}

std::vector<extension_web_dir> extension_web_dirs_of(const fs::path& pack_dir,
                                                     const std::string& name) {
  std::vector<extension_web_dir> out;
  if (auto declared = from_pyproject(pack_dir)) out.push_back(std::move(*declared));
  if (auto declared = from_init(pack_dir, name)) out.push_back(std::move(*declared));
  return out;
}

std::vector<extension_web_dir> extension_web_dirs(const manifests::inventory& inventory) {
  std::vector<extension_web_dir> out;
  for (const auto& pack : inventory.packs) {
    for (auto& web : extension_web_dirs_of(pack.layout.dir, pack.layout.name)) {
      bool taken = false;
      for (const auto& w : out) taken = taken || w.name == web.name;
      if (!taken) out.push_back(std::move(web));  // a name two packs declare stays the first's
    }
  }
  return out;
}

}  // namespace orch::serve
