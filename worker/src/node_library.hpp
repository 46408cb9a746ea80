// node_library: one native pack's shared library, opened in the worker (never in the host:
// DESIGN.md §4.9, the host knows node classes only from what the worker reports at handshake).
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "orch/support/result.hpp"
#include "orch/worker/nodes.h"

namespace orch::worker {

class node_library {
 public:
  // dlopen(RTLD_NOW | RTLD_LOCAL) and orch_nodes_query. Errors: "load_failed" (dlerror quoted),
  // "not_a_pack" (no orch_nodes_query), "abi_mismatch" (NULL answer or another major),
  // "invalid_pack" (a class without class_type or execute, or a duplicate class_type).
  static result<std::unique_ptr<node_library>> open(const std::filesystem::path& path);
  node_library(const node_library&) = delete;
  node_library& operator=(const node_library&) = delete;
  ~node_library();

  const orch_node_class* find(const std::string& class_type) const noexcept;
  // The classes as the host's node catalogue reads them (docs/protocol.md, "ready").
  nlohmann::json describe() const;
  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  node_library(void* handle, const orch_node_set* set, std::filesystem::path path) noexcept
      : handle_(handle), set_(set), path_(std::move(path)) {}
  void* handle_;
  const orch_node_set* set_;
  std::filesystem::path path_;
};

}  // namespace orch::worker
