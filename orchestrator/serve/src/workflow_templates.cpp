#include "orch/serve/workflow_templates.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <memory>
#include <system_error>
#include <utility>

#include <spdlog/spdlog.h>

#include "orch/process/install_layout.hpp"
#include "orch/serve/confined_path.hpp"
#include "orch/serve/frontend_files.hpp"
#include "orch/serve/json_reply.hpp"
#include "orch/support/untrusted_text.hpp"

namespace orch::serve {

namespace fs = std::filesystem;

namespace {

// aiohttp's answer for a static file that is not there.
http_reply not_found() {
  return {404, "text/plain; charset=utf-8", "404: Not Found"};
}

// The file `parts` names under the open directory `root` (confined_file_reply); a hidden
// component is refused as a missing file is.
std::optional<http_reply> confined_file(ipc::unique_fd root, std::vector<std::string> parts) {
  for (const auto& part : parts)
    if (part.empty() || part.front() == '.') return std::nullopt;
  return confined_file_reply(std::move(root), std::move(parts));
}

// The pack's directory, opened, if it is still the one that was found.
std::optional<ipc::unique_fd> open_pack(const example_workflow_pack& pack) {
  ipc::unique_fd fd(::open(pack.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0) return std::nullopt;
  if (st.st_dev != pack.device || st.st_ino != pack.inode) {
    spdlog::warn(
        "serve: the directory of pack '{}' ({}) is not the directory found at the "
        "start: its example workflows are no longer served (restart serve to serve "
        "what is there now)",
        printable(pack.name), printable(pack.dir.string()));
    return std::nullopt;
  }
  return fd;
}

// The example folder `folder` of the open pack directory `pack`, not through a symlink.
std::optional<ipc::unique_fd> open_folder(int pack, const char* folder) {
  ipc::unique_fd own(::fcntl(pack, F_DUPFD_CLOEXEC, 0));
  if (!own) return std::nullopt;
  auto dir = open_confined_directory(std::move(own), {folder}, false);
  if (!dir) return std::nullopt;
  return std::move(*dir);
}

// The workflow names of one example folder: its `*.json` files without `.json`, sorted.
std::vector<std::string> workflow_names(int folder) {
  constexpr std::string_view suffix = ".json";
  std::vector<std::string> names;
  for_each_confined_file(folder, false, [&](const std::string& file, const struct stat&) {
    if (file.size() <= suffix.size() ||
        file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0)
      return;
    // A name that is not UTF-8 would be listed as another (json_reply replaces what is not),
    // which no request could fetch.
    if (is_valid_utf8(file)) names.push_back(file.substr(0, file.size() - suffix.size()));
  });
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

std::optional<example_workflow_pack> example_workflow_pack_of(const fs::path& dir,
                                                              const std::string& name) {
  std::error_code ec;
  const fs::path absolute = fs::absolute(dir, ec);
  struct stat st {};
  if (ec || ::stat(absolute.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;
  return example_workflow_pack{name, absolute, st.st_dev, st.st_ino};
}

std::vector<example_workflow_pack> example_workflow_packs(const manifests::inventory& inventory) {
  std::vector<example_workflow_pack> out;
  for (const auto& pack : inventory.packs) {
    const auto& name = pack.layout.name;
    const bool taken = std::any_of(out.begin(), out.end(),
                                   [&](const example_workflow_pack& p) { return p.name == name; });
    if (taken) continue;
    if (auto found = example_workflow_pack_of(pack.layout.dir, name)) out.push_back(*found);
  }
  return out;
}

std::optional<fs::path> installed_workflow_templates() {
  const fs::path dir = process::this_install_layout().templates_directory;
  std::error_code ec;
  if (fs::is_regular_file(dir / "index.json", ec)) {
    spdlog::info("serve: workflow templates {}", printable(dir.string()));
    return dir;
  }
  spdlog::info(
      "serve: no workflow templates (run scripts/install-deps): the template browser "
      "lists the packs' example workflows only");
  return std::nullopt;
}

std::optional<http_reply> workflow_templates::handle(const http_request& req) const {
  if (req.method != "GET" || req.path.empty()) return std::nullopt;
  auto parts = relative_components(req.path.substr(1));
  if (!parts || parts->empty()) return std::nullopt;
  const std::vector<std::string>& p = *parts;
  // ComfyUI's /templates is a static route of its own, never under /api.
  if (p[0] == "templates") {
    if (p.size() == 1) return not_found();
    return official_file({p.begin() + 1, p.end()}).value_or(not_found());
  }
  const bool api = p[0] == "api";
  const std::size_t at = api ? 1 : 0;
  if (p.size() <= at || p[at] != "workflow_templates") return std::nullopt;
  if (p.size() == at + 1) return json_reply(listing());
  // A pack's folder is a static route under /api alone, as ComfyUI adds it.
  if (!api) return std::nullopt;
  if (p.size() < 4) return not_found();
  return pack_file(p[2], {p.begin() + 3, p.end()}).value_or(not_found());
}

std::optional<http_reply> workflow_templates::official_file(
    const std::vector<std::string>& parts) const {
  if (!official_) return std::nullopt;
  ipc::unique_fd root(::open(official_->c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root) return std::nullopt;
  return confined_file(std::move(root), parts);
}

std::optional<http_reply> workflow_templates::pack_file(
    const std::string& pack, const std::vector<std::string>& parts) const {
  const auto it = std::find_if(packs_.begin(), packs_.end(),
                               [&](const example_workflow_pack& p) { return p.name == pack; });
  if (it == packs_.end()) return std::nullopt;
  auto dir = open_pack(*it);
  if (!dir) return std::nullopt;
  for (const char* folder : example_workflow_folders) {
    auto examples = open_folder(dir->get(), folder);
    if (!examples) continue;
    if (auto reply = confined_file(std::move(*examples), parts)) return reply;
  }
  return std::nullopt;
}

nlohmann::json workflow_templates::listing() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& pack : packs_) {
    if (!is_valid_utf8(pack.name)) continue;
    auto dir = open_pack(pack);
    if (!dir) continue;
    std::vector<std::string> names;
    for (const char* folder : example_workflow_folders) {
      auto examples = open_folder(dir->get(), folder);
      if (!examples) continue;
      for (auto& name : workflow_names(examples->get()))
        if (std::find(names.begin(), names.end(), name) == names.end())
          names.push_back(std::move(name));
    }
    if (!names.empty()) out[pack.name] = std::move(names);
  }
  return out;
}

}  // namespace orch::serve
