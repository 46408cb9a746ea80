// frontend_routes: what ComfyUI's official frontend reads from its server beyond the prompt API
// (docs/serve.md, "The frontend"): its own files (frontend_files.hpp), the user's data and
// settings (user_data.hpp), the workflow templates (workflow_templates.hpp), and the routes it
// reads at start whose answers say "none here" in ComfyUI's shapes, since serve has no model
// folders, translations or subgraphs of its own: /extensions, /i18n, /embeddings, /models,
// /experiment/models, /view_metadata, /global_subgraphs, /node_replacements, /features and
// /internal/logs and /internal/folder_paths. Every route is also under /api, as ComfyUI's are.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/serve/frontend_files.hpp"
#include "orch/serve/serve_http.hpp"
#include "orch/serve/user_data.hpp"
#include "orch/serve/workflow_templates.hpp"

namespace orch::serve {

// The server's feature flags, as ComfyUI's /features and its WebSocket's `feature_flags` answer
// send them: whether previews carry metadata (serve sends none) and the largest upload.
nlohmann::json server_feature_flags(std::size_t max_upload);

class frontend_routes {
 public:
  frontend_routes(frontend_files files, user_data users, std::size_t max_upload,
                  workflow_templates templates = workflow_templates())
      : files_(std::move(files)),
        users_(std::move(users)),
        max_upload_(max_upload),
        templates_(std::move(templates)) {}

  // The answer to one of the routes above, or nullopt for any other request.
  std::optional<http_reply> handle(const http_request& req) const;

 private:
  std::optional<http_reply> api(const std::vector<std::string>& route) const;

  frontend_files files_;
  user_data users_;
  std::size_t max_upload_;
  workflow_templates templates_;
};

}  // namespace orch::serve
