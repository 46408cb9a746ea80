// node_library: one native pack's shared library, opened in the worker (never in the host:
// docs/nodes.md: the host knows node classes only from what the worker reports at handshake).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/support/result.hpp"
#include "orch/worker/nodes.h"

namespace orch::worker {

// A node class as the pack declared it, with its inputs: both found in the pack's arrays by each
// element's own struct_size (nodes.h), so a pack built against longer structs reads right.
struct node_class {
  const orch_node_class* decl;
  std::vector<const orch_node_input*> inputs;  // decl->input_count of them, by slot
};

class node_library {
 public:
  // dlopen(RTLD_NOW | RTLD_LOCAL) and orch_nodes_query. Errors: "load_failed" (dlerror quoted),
  // "not_a_pack" (no orch_nodes_query), "abi_mismatch" (NULL answer or another major),
  // "invalid_pack" (a class without class_type or execute, a duplicate class_type, or a class or
  // input shorter than node ABI 1.0's).
  static result<std::unique_ptr<node_library>> open(const std::filesystem::path& path);
  node_library(const node_library&) = delete;
  node_library& operator=(const node_library&) = delete;
  ~node_library();

  const node_class* find(const std::string& class_type) const noexcept;
  // The classes as the host's node catalogue reads them (docs/protocol.md, "ready").
  nlohmann::json describe() const;
  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  node_library(void* handle, std::vector<node_class> classes, std::filesystem::path path) noexcept
      : handle_(handle), classes_(std::move(classes)), path_(std::move(path)) {}
  void* handle_;
  std::vector<node_class> classes_;
  std::filesystem::path path_;
};

}  // namespace orch::worker
