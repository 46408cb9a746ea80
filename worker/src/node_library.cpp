#include "node_library.hpp"
#include "worker_errc.hpp"

#include <dlfcn.h>

namespace orch::worker {

result<std::unique_ptr<node_library>> node_library::open(const std::filesystem::path& path) {
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    return error{worker_errc::load_failed,
                 "cannot load node library " + path.string() + ": " +
                     (why ? why : "unknown error") +
                     "; build the pack or fix [worker] library in its comfy-env.toml"};
  }
  auto query = reinterpret_cast<orch_nodes_query_fn>(::dlsym(handle, ORCH_NODES_ENTRY_SYMBOL));
  if (query == nullptr) {
    ::dlclose(handle);
    return error{worker_errc::not_a_pack, path.string() + " exports no " ORCH_NODES_ENTRY_SYMBOL
                                                          "; a native pack must (docs/nodes.md)"};
  }
  auto nodes = node_set::check(query(ORCH_NODES_ABI_MAJOR), path.string());
  if (!nodes) {
    ::dlclose(handle);
    return nodes.err();
  }
  return std::unique_ptr<node_library>(new node_library(handle, std::move(*nodes)));
}

node_library::~node_library() {
  if (handle_ != nullptr) ::dlclose(handle_);
}

}  // namespace orch::worker
