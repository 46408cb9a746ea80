// workflow_templates: what ComfyUI's template browser shows (docs/serve.md, "Workflow
// templates"), the first page a new user sees: the frontend opens it on a first visit.
//
//   GET /templates/{file}                     the official templates: a file of the directory
//                                             scripts/install-deps unpacks the pinned
//                                             comfyui-workflow-templates parts into (index.json,
//                                             index.<locale>.json, index_logo.json, <name>.json,
//                                             their thumbnails <name>-1.webp, logo/...)
//   GET /workflow_templates                   {pack: [workflow name, ...]}: the packs' example
//                                             workflows (also under /api)
//   GET /api/workflow_templates/{pack}/{file} a file of that pack's example folder
//
// As ComfyUI serves them: server.py at 618b803d serves /templates from the installed package
// (comfyui_workflow_templates' asset map, each file by its name alone, a 404 for any other),
// ahead of the frontend's own files; app/custom_node_manager.py lists, for each pack directory,
// the `*.json` of its folders `example_workflows`, `example`, `examples`, `workflow` and
// `workflows` (in that order), each by its name without `.json`, and serves each pack's folder
// under /api/workflow_templates/<pack directory's name>/. Where serve differs:
//
//   - every file listed can be fetched: ComfyUI serves only the first of those folders a pack
//     has, though it lists all of them; serve looks for a file in each, in the same order, and
//     lists a name once;
//   - files are reached as confined_path walks them: no `..`, no symlink (ComfyUI's glob lists a
//     symlink and its static route follows one that stays inside), and no hidden name (a
//     leading '.', which the glob leaves out too); a listed name is valid UTF-8, or not listed;
//   - a pack's directory is the one found at start: if it is replaced while serve runs (by a
//     symlink elsewhere, which the pack's worker could make), its workflows are no longer
//     served.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/manifests/inventory.hpp"
#include "orch/serve/serve_http.hpp"

namespace orch::serve {

// ComfyUI's names for a pack's folder of example workflows, in the order it looks at them.
inline constexpr const char* example_workflow_folders[] = {"example_workflows", "example",
                                                           "examples", "workflow", "workflows"};

// One pack whose example workflows are served.
struct example_workflow_pack {
  std::string name;           // its directory's name: the listing's key and the URL's segment
  std::filesystem::path dir;  // absolute
  dev_t device = 0;           // the directory's identity when it was found
  ino_t inode = 0;
};

// The pack directory `dir` as found now; nullopt when it is no directory.
std::optional<example_workflow_pack> example_workflow_pack_of(const std::filesystem::path& dir,
                                                              const std::string& name);
// The deployment's packs, in its order; a name two packs have stays the first's.
std::vector<example_workflow_pack> example_workflow_packs(const manifests::inventory& inventory);

// The official templates installed with comfy-orch (install_layout.hpp: share/comfy-orch/
// templates, or the source tree's .deps/templates), when that directory holds an index.json;
// logs which, or how to get them.
std::optional<std::filesystem::path> installed_workflow_templates();

class workflow_templates {
 public:
  // `official`: the directory /templates/ serves (nullopt: none, every such file is a 404).
  explicit workflow_templates(std::optional<std::filesystem::path> official = std::nullopt,
                              std::vector<example_workflow_pack> packs = {})
      : official_(std::move(official)), packs_(std::move(packs)) {}

  // The answer to one of the GET routes above, or nullopt for any other request. A file that is
  // not there is a 404 (text/plain, as aiohttp's), never the frontend's file of that name.
  std::optional<http_reply> handle(const http_request& req) const;
  // GET /workflow_templates: {pack: [name, ...]}, the names in folder order, sorted within a
  // folder; a pack with none is left out.
  nlohmann::json listing() const;

 private:
  std::optional<http_reply> official_file(const std::vector<std::string>& parts) const;
  std::optional<http_reply> pack_file(const std::string& pack,
                                      const std::vector<std::string>& parts) const;

  std::optional<std::filesystem::path> official_;
  std::vector<example_workflow_pack> packs_;
};

}  // namespace orch::serve
