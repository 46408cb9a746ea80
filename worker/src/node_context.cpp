#include "node_context.hpp"
#include "log_level.hpp"

#include <algorithm>
#include <cstring>

#include <spdlog/spdlog.h>

#include <new>
#include <span>

#include "orch/ipc/tensor_extent.hpp"
#include "orch/ipc/tensor_wire.hpp"
#include "orch/plugins/status_error.hpp"

namespace orch::worker {

// The node ABI's codes are the wire's (ipc may not include worker headers, docs/architecture.md).
static_assert(ORCH_DTYPE_F32 == ipc::tensor_dtype::f32 && ORCH_DTYPE_U8 == ipc::tensor_dtype::u8 &&
              ORCH_DTYPE_I64 == ipc::tensor_dtype::i64);
static_assert(ORCH_TENSOR_MAX_DIMS == ipc::max_tensor_dims);

result<orch_tensor> tensor_view(const nlohmann::json& tensor, const ipc::segment_table& segments) {
  auto t = ipc::tensor_from_json(tensor);
  if (!t) return t.err();
  auto bytes = segments.bytes(t->descriptor);  // bounds and generation, in this process
  if (!bytes) return error{bytes.err().code, ipc::describe(*t) + ": " + bytes.err().message};
  orch_tensor v{};
  v.dtype = t->dtype;
  v.ndim = t->ndim;
  for (std::uint32_t k = 0; k < t->ndim; ++k) v.shape[k] = t->shape[k];
  // Cannot fail: tensor_extent refused every shape whose contiguous strides would not fit.
  (void)ipc::contiguous_strides(t->dims(), std::span<std::int64_t>(v.strides, v.ndim));
  v.data = bytes->data();
  v.buffer = {t->descriptor.segment, t->descriptor.generation, t->descriptor.offset,
              t->descriptor.size};
  return v;
}

node_context_impl::node_context_impl(worker_memory& memory, node_call_hooks hooks,
                                     std::string node_id, std::uint64_t epoch,
                                     const std::atomic<std::uint64_t>& interrupted_epoch) noexcept
    : context_{api(), this},
      memory_(&memory),
      hooks_(std::move(hooks)),
      node_id_(std::move(node_id)),
      epoch_(epoch),
      interrupted_epoch_(&interrupted_epoch) {}

// The C entry points. Each catches everything: no exception crosses the node ABI.
struct node_api_impl {
  static node_context_impl& self(orch_node_context* ctx) noexcept {
    return *static_cast<node_context_impl*>(ctx->impl);
  }

  static int32_t output_tensor(orch_node_context* ctx, uint32_t dtype, uint32_t ndim,
                               const int64_t* shape, orch_tensor* out) noexcept try {
    if (ctx == nullptr || shape == nullptr || out == nullptr) return ORCH_INVALID;
    auto& s = self(ctx);
    if (ndim > ORCH_TENSOR_MAX_DIMS) return ORCH_INVALID;
    orch_tensor t{};
    t.dtype = dtype;
    t.ndim = ndim;
    for (std::uint32_t k = 0; k < ndim; ++k) t.shape[k] = shape[k];
    // The rule every receiver applies (ipc/tensor_extent.hpp); an empty tensor has no block.
    const auto size = ipc::tensor_extent(dtype, std::span<const std::int64_t>(t.shape, ndim));
    if (!size || *size == 0) return ORCH_INVALID;
    (void)ipc::contiguous_strides(std::span<const std::int64_t>(t.shape, ndim),
                                  std::span<std::int64_t>(t.strides, ndim));
    auto d = s.hooks_.allocate(*size);
    if (!d) {
      spdlog::warn("node {}: output allocation of {} bytes refused: {}", s.node_id_, *size,
                   d.err().message);
      return ORCH_OOM_RETRYABLE;
    }
    auto bytes = s.memory_->segments().bytes(*d);
    if (!bytes) return ORCH_DEVICE_ERROR;
    s.allocations_.push_back(*d);
    t.data = bytes->data();
    t.buffer = {d->segment, d->generation, d->offset, *size};
    *out = t;
    return ORCH_OK;
  } catch (...) {
    return ORCH_DEVICE_ERROR;
  }

  static int32_t region(orch_node_context* ctx, const char* key, uint64_t bytes,
                        orch_node_region** out, int32_t* created) noexcept try {
    if (ctx == nullptr || key == nullptr || out == nullptr) return ORCH_INVALID;
    bool fresh = false;
    auto r = self(ctx).memory_->region(key, bytes, fresh);
    if (!r) return plugins::error_status(r.err());
    *out = reinterpret_cast<orch_node_region*>(*r);
    if (created != nullptr) *created = fresh ? 1 : 0;
    return ORCH_OK;
  } catch (...) {
    return ORCH_DEVICE_ERROR;
  }

  static int32_t region_fault(orch_node_context* ctx, orch_node_region* r, uint64_t offset,
                              uint64_t size) noexcept {
    if (ctx == nullptr || r == nullptr) return ORCH_INVALID;
    return self(ctx).memory_->fault(reinterpret_cast<model_region*>(r), offset, size);
  }
  static int32_t region_unpin(orch_node_context* ctx, orch_node_region* r, uint64_t offset,
                              uint64_t size) noexcept {
    if (ctx == nullptr || r == nullptr) return ORCH_INVALID;
    return self(ctx).memory_->unpin(reinterpret_cast<model_region*>(r), offset, size);
  }
  static int32_t cast_buffer(orch_node_context* ctx, uint32_t stream, uint64_t size,
                             uint64_t* address) noexcept {
    if (ctx == nullptr || address == nullptr) return ORCH_INVALID;
    return self(ctx).memory_->cast_buffer(stream, size, address);
  }
  // A reservation past the grant asks the host (allocations, a message, a future): under the
  // memory pressure that sends it there, an exception must become a status, not terminate().
  static int32_t pinned_reserve(orch_node_context* ctx, uint64_t bytes) noexcept try {
    if (ctx == nullptr) return ORCH_INVALID;
    return self(ctx).memory_->budget().reserve(bytes).ok() ? ORCH_OK : ORCH_OOM_RETRYABLE;
  } catch (const std::bad_alloc&) {
    return ORCH_HOST_OOM;
  } catch (...) {
    return ORCH_DEVICE_ERROR;
  }
  static void pinned_release(orch_node_context* ctx, uint64_t bytes) noexcept {
    if (ctx != nullptr) self(ctx).memory_->budget().release(bytes);
  }
  static void progress(orch_node_context* ctx, uint64_t value, uint64_t max) noexcept try {
    if (ctx != nullptr) self(ctx).hooks_.progress(value, max);
  } catch (...) {
  }
  static int32_t interrupted(orch_node_context* ctx) noexcept {
    if (ctx == nullptr) return 0;
    const auto& s = self(ctx);
    return s.interrupted_epoch_->load(std::memory_order_acquire) >= s.epoch_ ? 1 : 0;
  }
  static void log(orch_node_context* ctx, int32_t level, const char* message) noexcept try {
    if (ctx == nullptr || message == nullptr) return;
    spdlog::log(spdlog_level(level), "node {}: {}", self(ctx).node_id_, message);
  } catch (...) {
  }
  static void fail(orch_node_context* ctx, const char* type, const char* message) noexcept try {
    if (ctx == nullptr) return;
    self(ctx).error_type_ = type != nullptr ? type : "node_error";
    self(ctx).error_message_ = message != nullptr ? message : "";
  } catch (...) {
  }
  // At most 256 lines of at most 4 KiB each: a traceback, not a channel for bulk text.
  static void fail_traceback(orch_node_context* ctx, const char* const* lines,
                             uint32_t count) noexcept try {
    if (ctx == nullptr || lines == nullptr) return;
    auto& out = self(ctx).error_traceback_;
    out.clear();
    for (uint32_t i = 0; i < count && i < 256; ++i) {
      if (lines[i] != nullptr) out.emplace_back(lines[i], ::strnlen(lines[i], 4096));
    }
  } catch (...) {
  }
  static const char* hidden(orch_node_context* ctx, const char* kind) noexcept try {
    if (ctx == nullptr || kind == nullptr) return nullptr;
    auto& s = self(ctx);
    if (s.hooks_.hidden == nullptr || !s.hooks_.hidden->is_object()) return nullptr;
    auto it = s.hooks_.hidden->find(kind);
    if (it == s.hooks_.hidden->end()) return nullptr;
    auto [kept, fresh] = s.hidden_text_.try_emplace(kind);
    if (fresh) kept->second = it->dump();
    return kept->second.c_str();
  } catch (...) {
    return nullptr;
  }
  // A node's JSON object (a UI dict, a subgraph): a few file names, lines or nodes; the caps
  // keep it far below a frame. Null for text that is not an object, nests deeper than 8 levels
  // or exceeds 1 MiB; the depth is checked while parsing, so no deeper value is ever built.
  static nlohmann::json bounded_object(const char* text) {
    constexpr std::size_t max_bytes = std::size_t{1} << 20;
    constexpr std::size_t max_depth = 8;
    const std::size_t n = ::strnlen(text, max_bytes + 1);
    if (n > max_bytes) return nullptr;
    std::size_t depth = 0;
    std::size_t deepest = 0;
    nlohmann::json parsed = nlohmann::json::parse(
        text, text + n,
        [&](int, nlohmann::json::parse_event_t event, nlohmann::json&) {
          if (event == nlohmann::json::parse_event_t::object_start ||
              event == nlohmann::json::parse_event_t::array_start) {
            deepest = std::max(deepest, ++depth);
          } else if (event == nlohmann::json::parse_event_t::object_end ||
                     event == nlohmann::json::parse_event_t::array_end) {
            --depth;
          }
          return deepest <= max_depth;
        },
        /*allow_exceptions=*/false);
    if (deepest > max_depth || !parsed.is_object()) return nullptr;
    return parsed;
  }
  static int32_t keep_object(orch_node_context* ctx, const char* text,
                             nlohmann::json node_context_impl::*field) noexcept try {
    if (ctx == nullptr || text == nullptr) return ORCH_INVALID;
    nlohmann::json parsed = bounded_object(text);
    if (parsed.is_null()) return ORCH_INVALID;
    self(ctx).*field = std::move(parsed);
    return ORCH_OK;
  } catch (...) {
    return ORCH_INVALID;
  }
  static int32_t ui(orch_node_context* ctx, const char* text) noexcept {
    return keep_object(ctx, text, &node_context_impl::ui_);
  }
  static int32_t expand(orch_node_context* ctx, const char* text) noexcept {
    return keep_object(ctx, text, &node_context_impl::expand_);
  }
  static const char* node_id(orch_node_context* ctx) noexcept {
    return ctx == nullptr ? "" : self(ctx).node_id_.c_str();
  }
  static uint32_t streams(orch_node_context* ctx) noexcept {
    return ctx == nullptr ? 0 : self(ctx).memory_->settings().memory.streams;
  }
};

const orch_node_api* node_context_impl::api() noexcept {
  static const orch_node_api table{sizeof(orch_node_api),          0,
                                   &node_api_impl::output_tensor,  &node_api_impl::region,
                                   &node_api_impl::region_fault,   &node_api_impl::region_unpin,
                                   &node_api_impl::cast_buffer,    &node_api_impl::pinned_reserve,
                                   &node_api_impl::pinned_release, &node_api_impl::progress,
                                   &node_api_impl::interrupted,    &node_api_impl::log,
                                   &node_api_impl::fail,           &node_api_impl::node_id,
                                   &node_api_impl::streams,        &node_api_impl::fail_traceback,
                                   &node_api_impl::hidden,         &node_api_impl::ui,
                                   &node_api_impl::expand};
  return &table;
}

}  // namespace orch::worker
