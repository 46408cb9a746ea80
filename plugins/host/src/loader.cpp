#include "orch/plugins/loader.hpp"

#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <cstddef>
#include <system_error>

#include "orch/plugin/allocator.h"
#include "orch/plugin/ledger.h"
#include "orch/plugin/levels.h"
#include "orch/plugins/abi_adapters.hpp"
#include "orch/plugins/errc.hpp"
#include "orch/plugins/host_services.hpp"
#include "orch/plugins/names.hpp"

namespace orch::plugins {
namespace fs = std::filesystem;

namespace {

// The frozen prefix (docs/plugin-abi.md) ends with `capabilities`; init and shutdown follow
// it and every table of ABI 1 carries them.
constexpr size_t lifecycle_end = offsetof(orch_plugin_table, shutdown) + sizeof(void*);

error invalid(const std::string& origin, const std::string& what) {
  return {plugin_errc::invalid_table,
          origin + ": invalid plugin table: " + what +
              "; rebuild the plugin against this comfy-orch's plugin headers"};
}

// A plugin string fit for logs and JSON: at most 256 bytes of well-formed UTF-8 without control
// characters. The table comes from an untrusted file; nlohmann::json throws on invalid UTF-8
// when `comfy-orch plugins --json` dumps it, and escape sequences would reach the terminal.
bool printable_utf8(const char* s) {
  constexpr size_t max_len = 256;
  size_t i = 0;
  const auto byte = [s](size_t k) { return static_cast<unsigned char>(s[k]); };
  while (s[i] != '\0') {
    if (i >= max_len) return false;
    const unsigned char c = byte(i);
    if (c < 0x20 || c == 0x7f) return false;
    size_t extra = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      extra = 1;
      cp = c & 0x1fu;
    } else if ((c & 0xf0) == 0xe0) {
      extra = 2;
      cp = c & 0x0fu;
    } else if ((c & 0xf8) == 0xf0) {
      extra = 3;
      cp = c & 0x07u;
    } else {
      return false;
    }
    for (size_t k = 1; k <= extra; ++k) {
      if ((byte(i + k) & 0xc0) != 0x80) return false;  // also stops at the terminator
      cp = (cp << 6) | (byte(i + k) & 0x3fu);
    }
    // Overlong forms, surrogates, beyond U+10FFFF, and the C1 controls.
    static constexpr uint32_t min_cp[] = {0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[extra] || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff ||
        (cp >= 0x80 && cp <= 0x9f))
      return false;
    i += extra + 1;
  }
  return true;
}

// A plugin that is well formed but uses a value this host does not know yet: a kind, a backend
// or a protocol level added after it was built. Skipped, never taken for a broken plugin.
error unsupported(const std::string& origin, const std::string& what) {
  return {plugin_errc::unsupported_plugin,
          origin + ": not supported by this host: " + what +
              "; the plugin was built for a newer comfy-orch (upgrade comfy-orch, or use a plugin "
              "built for this one)"};
}

// A kind table must hold every entry of ABI 1.0: the host reads those without a size check, and
// the entries appended since only after ORCH_HAS_FIELD. `holds_1_0` says whether it does.
template <typename Api>
status check_kind_table(const Api* api, bool holds_1_0, const char* what,
                        const std::string& origin) {
  if (api == nullptr || holds_1_0) return ok_status();
  return invalid(origin, std::string(what) + " table of " + std::to_string(api->struct_size) +
                             " bytes is below the entries of ABI 1");
}

// Asks the plugin for each major this host loads, newest first, and adapts the first table it
// answers with (docs/plugin-abi.md, "Versions"). A plugin answers NULL for a major it cannot
// serve; one that ignores the major it was asked for answers with its own, which is adapted when
// this host loads that major too.
result<const orch_plugin_table*> query_table(orch_plugin_query_fn query,
                                             const std::string& origin) {
  for (const abi_adapter& asked : abi_adapters()) {
    const orch_plugin_table* raw = query(asked.major, asked.minor);
    if (raw == nullptr) continue;
    // The header every major shares: struct_size, abi_major, abi_minor.
    if (raw->struct_size < offsetof(orch_plugin_table, kind))
      return invalid(origin, "struct_size " + std::to_string(raw->struct_size) + " is too small");
    const abi_adapter* a = adapter_for(raw->abi_major);
    if (a == nullptr)
      return error{plugin_errc::abi_mismatch,
                   origin + ": plugin ABI major " + std::to_string(raw->abi_major) +
                       " but this host speaks " + loaded_abi_majors() +
                       "; install a plugin built for ABI " + std::to_string(ORCH_PLUGIN_ABI_MAJOR)};
    const orch_plugin_table* adapted = a->adapt(raw);
    if (adapted == nullptr)
      return invalid(origin, "its ABI " + std::to_string(raw->abi_major) +
                                 " table cannot be adapted to ABI " +
                                 std::to_string(ORCH_PLUGIN_ABI_MAJOR));
    return adapted;
  }
  return error{plugin_errc::abi_mismatch,
               origin +
                   ": orch_plugin_query serves none of the plugin ABI majors this host "
                   "speaks (" +
                   loaded_abi_majors() + "); install a plugin built for ABI " +
                   std::to_string(ORCH_PLUGIN_ABI_MAJOR)};
}

}  // namespace

status validate_table(const orch_plugin_table* t, const std::string& origin) {
  if (t == nullptr) return invalid(origin, "orch_plugin_query returned NULL");
  if (t->struct_size < offsetof(orch_plugin_table, kind))
    return invalid(origin, "struct_size " + std::to_string(t->struct_size) + " is too small");
  if (t->abi_major != ORCH_PLUGIN_ABI_MAJOR)
    return error{plugin_errc::abi_mismatch,
                 origin + ": plugin ABI major " + std::to_string(t->abi_major) +
                     " but this host speaks " + std::to_string(ORCH_PLUGIN_ABI_MAJOR) +
                     "; install a plugin built for ABI " + std::to_string(ORCH_PLUGIN_ABI_MAJOR)};
  if (!ORCH_HAS_FIELD(t, capabilities) || !ORCH_HAS_FIELD(t, shutdown))
    return invalid(origin, "struct_size " + std::to_string(t->struct_size) + " is below the " +
                               std::to_string(lifecycle_end) + " bytes of ABI 1");
  if (t->name == nullptr || t->name[0] == '\0' || t->version == nullptr)
    return invalid(origin, "missing name or version");
  if (!printable_utf8(t->name) || !printable_utf8(t->version))
    return invalid(origin, "name or version is not printable UTF-8 of at most 256 bytes");
  if (t->min_level < ORCH_LEVEL_MIN || t->min_level > t->max_level)
    return invalid(origin, "level range [" + std::to_string(t->min_level) + ", " +
                               std::to_string(t->max_level) + "] is not a range of levels from 1");
  if (t->init == nullptr || t->shutdown == nullptr) return invalid(origin, "no init or shutdown");
  // Open sets (plugin.h): what a later ABI minor may add is unsupported here, not invalid.
  if (t->kind < ORCH_KIND_PAGER || t->kind > ORCH_KIND_BACKEND)
    return unsupported(origin, "plugin kind " + std::to_string(t->kind) +
                                   " (this host knows pager, allocator and backend)");
  if (t->backend < ORCH_BACKEND_CPU || t->backend > ORCH_BACKEND_HIP)
    return unsupported(origin, "backend " + std::to_string(t->backend) +
                                   " (this host knows cpu, sim, cuda and hip)");
  if (t->max_level > ORCH_LEVEL_MAX)
    return unsupported(origin, "level range [" + std::to_string(t->min_level) + ", " +
                                   std::to_string(t->max_level) +
                                   "] reaches past L4, the highest level this host speaks");
  // A kind table the table's struct_size does not reach is absent.
  const auto* backend_api = ORCH_HAS_FIELD(t, backend_api) ? t->backend_api : nullptr;
  const auto* pager_api = ORCH_HAS_FIELD(t, pager_api) ? t->pager_api : nullptr;
  const auto* ledger_api = ORCH_HAS_FIELD(t, ledger_api) ? t->ledger_api : nullptr;
  const auto* allocator_api = ORCH_HAS_FIELD(t, allocator_api) ? t->allocator_api : nullptr;
  bool api = false;
  switch (t->kind) {
    case ORCH_KIND_BACKEND: api = backend_api != nullptr; break;
    case ORCH_KIND_PAGER: api = pager_api != nullptr || ledger_api != nullptr; break;
    case ORCH_KIND_ALLOCATOR: api = allocator_api != nullptr; break;
    default: break;
  }
  if (!api)
    return invalid(origin, std::string("a ") + kind_name(t->kind) +
                               " plugin must provide its kind's table");
  // The backend table is checked entry by entry before a device is opened (check_backend_api).
  if (auto st = check_kind_table(pager_api, pager_api && ORCH_HAS_FIELD(pager_api, device),
                                 "pager", origin);
      !st)
    return st;
  if (auto st = check_kind_table(ledger_api, ledger_api && ORCH_HAS_FIELD(ledger_api, stats),
                                 "ledger", origin);
      !st)
    return st;
  return check_kind_table(allocator_api,
                          allocator_api && ORCH_HAS_FIELD(allocator_api, cast_stats), "allocator",
                          origin);
}

result<std::unique_ptr<plugin_library>> plugin_library::open(const fs::path& path,
                                                             bool announce) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    return error{plugin_errc::not_found, path.string() +
                                             ": plugin file not found; check the [plugins] "
                                             "search paths or build the plugin"};
  const fs::path real = fs::canonical(path, ec);
  const fs::path real_path = ec ? path : real;
  // RTLD_LOCAL: a plugin's symbols never satisfy another's (aimdo's RTLD_GLOBAL trap,
  // docs/references.md, aimdo §3.4). RTLD_NOW: a missing dependency fails here, not mid-call.
  void* handle = dlopen(real_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return error{plugin_errc::load_failed, path.string() + ": cannot be loaded: " +
                                               (why != nullptr ? why : "unknown dlopen error")};
  }
  dlerror();
  void* sym = dlsym(handle, ORCH_PLUGIN_ENTRY_SYMBOL);
  if (sym == nullptr) {
    dlclose(handle);
    return error{plugin_errc::not_a_plugin, path.string() + ": not a comfy-orch plugin (no " +
                                                ORCH_PLUGIN_ENTRY_SYMBOL +
                                                " symbol); remove it from the "
                                                "plugin directory"};
  }
  const auto queried = query_table(reinterpret_cast<orch_plugin_query_fn>(sym), path.string());
  if (!queried) {
    dlclose(handle);
    return queried.err();
  }
  const orch_plugin_table* table = *queried;
  if (auto st = validate_table(table, path.string()); !st) {
    dlclose(handle);
    return st.err();
  }
  spdlog::log(announce ? spdlog::level::info : spdlog::level::debug, "plugin loaded: name={} kind={} backend={} version={} levels=[{},{}] path={}",
               table->name, kind_name(table->kind), backend_name(table->backend), table->version,
               table->min_level, table->max_level, real_path.string());
  return std::unique_ptr<plugin_library>(new plugin_library(handle, table, path, real_path));
}

plugin_library::plugin_library(void* handle, const orch_plugin_table* table, fs::path path,
                               fs::path real_path) noexcept
    : handle_(handle), table_(table), path_(std::move(path)), real_path_(std::move(real_path)) {}

plugin_library::~plugin_library() {
  shutdown();
  dlclose(handle_);
}

status plugin_library::init(const orch_host_services* host) {
  if (initialised_) return ok_status();
  const orch_status st = table_->init(host != nullptr ? host : default_host_services());
  if (st == ORCH_OK || st == ORCH_ALREADY_INITIALISED) {
    // ALREADY_INITIALISED: another owner of the same library (dlopen refcounts) brought it up;
    // this handle does not own the shutdown then.
    initialised_ = st == ORCH_OK;
    return ok_status();
  }
  return error{plugin_errc::init_failed,
               real_path_.string() + ": init returned " + status_name(st)};
}

void* plugin_library::symbol(const char* name) const noexcept { return dlsym(handle_, name); }

void plugin_library::shutdown() noexcept {
  if (!initialised_) return;
  table_->shutdown();
  initialised_ = false;
}

}  // namespace orch::plugins
