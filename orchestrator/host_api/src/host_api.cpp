// The C API of liborch_host.so (orch/host/host.h) over library_host: arguments checked, JSON in
// and out, and no exception across the boundary (each entry point catches everything).
#include "host_errc.hpp"
#include "orch/host/host.h"
#include "orch/ipc/errc.hpp"
#include "orch/manifests/diagnostics_json.hpp"
#include "orch/runtime/errc.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include "library_host.hpp"
#include "orch/runtime/comfyui_deployment.hpp"
#include "orch/support/logging.hpp"

using nlohmann::json;
using orch::host_api::library_host;

struct orch_host {
  std::unique_ptr<library_host> host;
};

namespace {

namespace fs = std::filesystem;

char* copy_out(const std::string& text) noexcept {
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (out != nullptr) std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

// Text from workers is untrusted: invalid UTF-8 is replaced, never thrown on.
char* json_out(const json& j) noexcept {
  try {
    return copy_out(j.dump(-1, ' ', false, json::error_handler_t::replace));
  } catch (...) {
    return nullptr;
  }
}

json error_json(const std::string& code, const std::string& message) {
  return {{"code", code}, {"message", message}};
}

void set_error(char** error, const json& e) noexcept {
  if (error != nullptr) *error = json_out(e);
}

// Where comfy-orch would be if it were installed or built beside this library: the install
// layout (install_layout.hpp) is found from there, as the executable finds it from itself.
// A call's answer as a status: "not now" (interrupted, or a worker lost or not ready, where the
// same call may succeed later) apart from "never" (the node failed).
int32_t call_status(const json& response) {
  if (response.value("status", "") == "ok") return ORCH_HOST_OK;
  const json error = response.value("error", json::object());
  const std::string type = error.is_object() ? error.value("type", "") : "";
  namespace errc = orch::runtime::runtime_errc;
  if (type == orch::ipc::node_error_type::interrupted) return ORCH_HOST_INTERRUPTED;
  if (type == errc::worker_died || type == errc::not_ready || type == errc::pack_failed ||
      type == orch::ipc::channel_errc::deadline_exceeded)
    return ORCH_HOST_RETRYABLE;
  return ORCH_HOST_FAILED;
}

orch::process::install_layout layout_beside_this_library() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&orch_host_start), &info) == 0 || info.dli_fname == nullptr)
    return orch::process::this_install_layout();
  std::error_code ec;
  const fs::path dir = fs::canonical(info.dli_fname, ec).parent_path();
  for (const char* host : {ORCH_HOST_LIBRARY_TO_HOST_INSTALLED, ORCH_HOST_LIBRARY_TO_HOST_BUILD}) {
    auto layout = orch::process::locate_install_layout((dir / host).lexically_normal());
    if (fs::is_regular_file(layout.worker_executable, ec)) return layout;
  }
  return orch::process::locate_install_layout(
      (dir / ORCH_HOST_LIBRARY_TO_HOST_INSTALLED).lexically_normal());
}

// The host's log lines as "log" events, besides stderr. One host per process is the use
// (ComfyUI's); a later one takes the events over.
class event_log_sink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  void set(library_host::event_fn fn) {
    std::lock_guard lock(this->mutex_);
    fn_ = std::move(fn);
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (!fn_) return;
    fn_("log", {{"level", spdlog::level::to_string_view(msg.level).data()},
                {"message", std::string(msg.payload.data(), msg.payload.size())}});
  }
  void flush_() override {}

 private:
  library_host::event_fn fn_;
};

std::shared_ptr<event_log_sink> log_events() {
  static const auto sink = [] {
    orch::init_logging("comfy-orch-host");
    auto s = std::make_shared<event_log_sink>();
    spdlog::default_logger()->sinks().push_back(s);
    return s;
  }();
  return sink;
}

// The deployment file, else the one of the ComfyUI tree described (comfyui_deployment.hpp).
orch::result<orch::runtime::prepared_deployment> prepare(const char* file, const char* comfyui,
                                                         orch::manifests::diagnostics& diags) {
  if (file != nullptr) return orch::runtime::prepare_deployment(file, diags);
  const json description = json::parse(comfyui, nullptr, /*allow_exceptions=*/false);
  if (description.is_discarded())
    return orch::error{orch::host_api::host_errc::invalid_description,
                       "the ComfyUI description is not JSON"};
  auto text = orch::runtime::comfyui_deployment(description);
  if (!text) return text.err();
  return orch::runtime::prepare_deployment_text(text->text, text->label, diags);
}

template <typename F>
int32_t guarded(char** error, F&& fn) noexcept {
  try {
    return fn();
  } catch (const std::exception& e) {
    set_error(error, error_json("internal", e.what()));
  } catch (...) {
    set_error(error, error_json("internal", "unknown exception"));
  }
  return ORCH_HOST_FAILED;
}

bool valid_block(const orch_host_block* b) {
  return b != nullptr && b->struct_size >= sizeof(orch_host_block) &&
         b->generation <= UINT32_MAX;  // the pool's generations are 32-bit
}

orch::ipc::buffer_descriptor descriptor_of(const orch_host_block& b) {
  return {b.segment, static_cast<std::uint32_t>(b.generation), b.offset, b.size};
}

}  // namespace

// This file is compiled with hidden visibility (the library's preset); the API is what it shows.
#pragma GCC visibility push(default)
extern "C" {

int32_t orch_host_start(const orch_host_options* options, orch_host** host, char** error) {
  if (host != nullptr) *host = nullptr;
  if (error != nullptr) *error = nullptr;
  return guarded(error, [&]() -> int32_t {
    // ORCH_HOST_1's callers end before `comfyui`: theirs is never read.
    const char* comfyui = options != nullptr &&
                                  options->struct_size >= offsetof(orch_host_options, comfyui) +
                                                              sizeof(options->comfyui)
                              ? options->comfyui
                              : nullptr;
    if (options == nullptr || host == nullptr ||
        options->struct_size < offsetof(orch_host_options, worker_executable) ||
        (options->deployment == nullptr && comfyui == nullptr)) {
      set_error(error, error_json("invalid_argument",
                                  "orch_host_start needs options with struct_size set and a "
                                  "deployment path (or a ComfyUI description), and somewhere to "
                                  "put the host"));
      return ORCH_HOST_INVALID;
    }
    library_host::event_fn events;
    if (options->on_event != nullptr) {
      events = [fn = options->on_event, user = options->user](const std::string& type,
                                                              const json& data) {
        const std::string text = data.dump(-1, ' ', false, json::error_handler_t::replace);
        fn(user, type.c_str(), text.c_str());
      };
    }
    log_events()->set(events);
    std::string worker;
    // worker_executable is ORCH_HOST_1's last field: read wherever the caller's struct has it.
    if (options->struct_size >=
            offsetof(orch_host_options, worker_executable) + sizeof(options->worker_executable) &&
        options->worker_executable != nullptr) {
      worker = options->worker_executable;
    } else if (const char* e = std::getenv("ORCH_WORKER_EXECUTABLE"); e != nullptr && *e) {
      worker = e;
    }
    const auto layout = layout_beside_this_library();
    // The default plugin and node library directories too are the library's, not those beside
    // the caller's executable (python3's).
    orch::process::use_install_layout(layout);
    if (worker.empty()) worker = layout.worker_executable.string();
    orch::manifests::diagnostics diags;
    auto started = [&]() -> orch::result<std::unique_ptr<library_host>> {
      auto prepared = prepare(options->deployment, comfyui, diags);
      if (!prepared) return prepared.err();
      return library_host::start(*prepared, worker, layout, events);
    }();
    if (!started) {
      log_events()->set(nullptr);
      json e = error_json(started.err().code, started.err().message);
      e["diagnostics"] = orch::manifests::diagnostics_to_json(diags);
      set_error(error, e);
      // A bad deployment or description is the caller's to fix.
      const std::string& code = started.err().code;
      return code == orch::runtime::runtime_errc::invalid_deployment ||
                     code == orch::host_api::host_errc::invalid_description
                 ? ORCH_HOST_INVALID
                 : ORCH_HOST_FAILED;
    }
    *host = new orch_host{std::move(*started)};
    return ORCH_HOST_OK;
  });
}

char* orch_host_nodes(orch_host* host) {
  if (host == nullptr) return nullptr;
  try {
    return json_out(host->host->nodes());
  } catch (...) {
    return nullptr;
  }
}

uint64_t orch_host_begin_prompt(orch_host* host) {
  return host == nullptr ? 0 : host->host->begin_prompt();
}

int32_t orch_host_call(orch_host* host, const char* request, char** response) {
  if (response != nullptr) *response = nullptr;
  return guarded(response, [&]() -> int32_t {
    if (host == nullptr || request == nullptr || response == nullptr) return ORCH_HOST_INVALID;
    const json parsed = json::parse(request, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) {
      set_error(response,
                error_json(orch::host_api::host_errc::invalid_request, "the request is not JSON"));
      return ORCH_HOST_INVALID;
    }
    auto r = host->host->call(parsed);
    if (!r) {
      set_error(response, error_json(r.err().code, r.err().message));
      return ORCH_HOST_INVALID;
    }
    const int32_t status = call_status(*r);
    *response = json_out(*r);
    return status;
  });
}

int32_t orch_host_allocate(orch_host* host, uint64_t size, orch_host_block* block) {
  return guarded(nullptr, [&]() -> int32_t {
    if (host == nullptr || !valid_block(block) || size == 0) return ORCH_HOST_INVALID;
    auto b = host->host->allocate(size);
    if (!b) {
      spdlog::warn("orch_host_allocate({} bytes): {}", size, b.err().message);
      return ORCH_HOST_FAILED;
    }
    block->segment = b->descriptor.segment;
    block->generation = b->descriptor.generation;
    block->offset = b->descriptor.offset;
    block->size = b->descriptor.size;
    block->data = b->data;
    return ORCH_HOST_OK;
  });
}

int32_t orch_host_map(orch_host* host, orch_host_block* block) {
  return guarded(nullptr, [&]() -> int32_t {
    if (host == nullptr || !valid_block(block)) return ORCH_HOST_INVALID;
    auto data = host->host->map(descriptor_of(*block));
    if (!data) return ORCH_HOST_INVALID;
    block->data = *data;
    return ORCH_HOST_OK;
  });
}

int32_t orch_host_release(orch_host* host, const orch_host_block* block) {
  return guarded(nullptr, [&]() -> int32_t {
    if (host == nullptr || !valid_block(block)) return ORCH_HOST_INVALID;
    return host->host->release(descriptor_of(*block)) ? ORCH_HOST_OK : ORCH_HOST_INVALID;
  });
}

char* orch_host_free(orch_host* host, int32_t unload_models, int32_t free_memory) {
  if (host == nullptr) return nullptr;
  try {
    return json_out(host->host->free(unload_models != 0, free_memory != 0));
  } catch (...) {
    return nullptr;
  }
}

char* orch_host_models(orch_host* host) {
  if (host == nullptr) return nullptr;
  try {
    return json_out(host->host->models());
  } catch (...) {
    return nullptr;
  }
}

int32_t orch_host_evict(orch_host* host, const char* env, uint32_t generation, uint64_t bytes,
                        char** receipt) {
  if (receipt != nullptr) *receipt = nullptr;
  return guarded(receipt, [&]() -> int32_t {
    if (host == nullptr || env == nullptr) return ORCH_HOST_INVALID;
    auto r = host->host->evict(env, generation, bytes);
    if (!r) {
      set_error(receipt, error_json(r.err().code, r.err().message));
      return ORCH_HOST_FAILED;
    }
    if (receipt != nullptr) *receipt = json_out(*r);
    return ORCH_HOST_OK;
  });
}

int32_t orch_host_pinned_reserve(orch_host* host, uint64_t bytes) {
  return guarded(nullptr, [&]() -> int32_t {
    if (host == nullptr) return ORCH_HOST_INVALID;
    return host->host->pinned_reserve(bytes) ? ORCH_HOST_OK : ORCH_HOST_FAILED;
  });
}

void orch_host_pinned_release(orch_host* host, uint64_t bytes) {
  if (host == nullptr) return;
  host->host->pinned_release(bytes);  // noexcept
}

char* orch_host_status(orch_host* host) {
  if (host == nullptr) return nullptr;
  try {
    return json_out(host->host->status_json());
  } catch (...) {
    return nullptr;
  }
}

void orch_host_interrupt(orch_host* host) {
  if (host == nullptr) return;
  try {
    host->host->interrupt();
  } catch (...) {
  }
}

void orch_host_string_free(char* text) {
  std::free(text);
}

void orch_host_stop(orch_host* host) {
  if (host == nullptr) return;
  try {
    host->host->stop();
    // The caller's callback may be gone once it stopped us: no log line reaches it any more.
    log_events()->set(nullptr);
  } catch (...) {
  }
  delete host;
}

}  // extern "C"
#pragma GCC visibility pop
