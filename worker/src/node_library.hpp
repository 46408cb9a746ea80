// node_library: one native pack's shared library, opened in the worker (never in the host:
// docs/nodes.md: the host knows node classes only from what the worker reports at handshake).
#pragma once

#include <filesystem>
#include <memory>

#include "node_set.hpp"
#include "orch/support/result.hpp"

namespace orch::worker {

class node_library {
 public:
  // dlopen(RTLD_NOW | RTLD_LOCAL) and orch_nodes_query. Errors: "load_failed" (dlerror quoted),
  // "not_a_pack" (no orch_nodes_query), and node_set::check's.
  static result<std::unique_ptr<node_library>> open(const std::filesystem::path& path);
  node_library(const node_library&) = delete;
  node_library& operator=(const node_library&) = delete;
  ~node_library();

  const node_set& nodes() const noexcept { return nodes_; }

 private:
  node_library(void* handle, node_set nodes) noexcept : handle_(handle), nodes_(std::move(nodes)) {}
  void* handle_;
  node_set nodes_;
};

}  // namespace orch::worker
