#include "orch/serve/extension_web_dirs.hpp"

#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <system_error>

#include "orch/manifests/toml_source.hpp"

namespace orch::orchestrator {

namespace fs = std::filesystem;

namespace {

// `dir` inside `pack` (lexically, after . and .. are resolved), existing as a directory.
std::optional<fs::path> inside(const fs::path& pack, const std::string& relative) {
  const fs::path base = fs::absolute(pack).lexically_normal();
  const fs::path dir = (base / relative).lexically_normal();
  const auto rel = dir.lexically_relative(base);
  if (relative.empty() || rel.empty() || *rel.begin() == "..") return std::nullopt;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return std::nullopt;
  return dir;
}

std::optional<extension_web_dir> from_pyproject(const fs::path& pack) {
  const fs::path file = pack / "pyproject.toml";
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return std::nullopt;
  manifests::diagnostics ignored;  // a pyproject serve cannot read declares nothing here
  const auto parsed = manifests::parse_toml_file(file, ignored);
  if (!parsed) return std::nullopt;
  const auto web = (*parsed)["tool"]["comfy"]["web"].value<std::string>();
  const auto name = (*parsed)["project"]["name"].value<std::string>();
  if (!web || !name || name->empty()) return std::nullopt;
  auto dir = inside(pack, *web);
  if (!dir) return std::nullopt;
  return extension_web_dir{*name, *dir};
}

std::optional<extension_web_dir> from_init(const fs::path& pack) {
  std::ifstream in(pack / "__init__.py");
  if (!in) return std::nullopt;
  // A top-level assignment of a string literal; the last one wins, as when Python runs it.
  static const std::regex assignment(
      R"re(^WEB_DIRECTORY\s*=\s*(?:"([^"\\]*)"|'([^'\\]*)')\s*(?:#.*)?$)re");
  std::optional<std::string> value;
  std::string line;
  for (int n = 0; n < 100000 && std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::smatch m;
    if (line.size() < 4096 && std::regex_match(line, m, assignment))
      value = m[1].matched ? m[1].str() : m[2].str();
  }
  if (!value) return std::nullopt;
  auto dir = inside(pack, *value);
  if (!dir) return std::nullopt;
  return extension_web_dir{fs::absolute(pack).lexically_normal().filename().string(), *dir};
}

}  // namespace

std::optional<extension_web_dir> extension_web_dir_of(const fs::path& pack_dir) {
  if (auto declared = from_pyproject(pack_dir)) return declared;
  return from_init(pack_dir);
}

std::vector<extension_web_dir> extension_web_dirs(const manifests::inventory& inventory) {
  std::vector<extension_web_dir> out;
  for (const auto& pack : inventory.packs) {
    auto web = extension_web_dir_of(pack.layout.dir);
    if (!web) continue;
    bool taken = false;
    for (const auto& w : out) taken = taken || w.name == web->name;
    if (!taken) out.push_back(std::move(*web));  // a name two packs declare stays the first's
  }
  return out;
}

}  // namespace orch::orchestrator
