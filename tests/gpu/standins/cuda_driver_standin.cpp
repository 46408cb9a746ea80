// A stand-in for libcuda.so.1 (docs/gpu.md, "The driver stand-ins"): the driver entry points the
// cuda backend uses, over standin_device.hpp's bookkeeping, reached only as the real driver is
// reached, through cuGetProcAddress with NVIDIA's documented version rules:
//
//   - cudaVersion is 1000 * major + 10 * minor; one newer than the driver's own version answers
//     CUDA_ERROR_INVALID_VALUE;
//   - a symbol is found in the newest variant introduced at or before cudaVersion (and present in
//     this driver): cuCtxSynchronize asked at 13000 on a 13.0 driver is cuCtxSynchronize_v2, which
//     takes a CUcontext; asked at 2000 it is the argumentless one, on every driver;
//   - a symbol that exists only in variants newer than cudaVersion answers CUDA_SUCCESS with a
//     null pointer and CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT; an unknown one, null and
//     CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND.
//
// The driver version is $ORCH_STANDIN_CUDA_VERSION (12000, 12040, 12080, 13000; default 12000),
// the device count $ORCH_STANDIN_CUDA_DEVICES (default 1), their memory $ORCH_STANDIN_CUDA_MEMORY
// bytes each (default 8 GiB), the entry points it lacks $ORCH_STANDIN_CUDA_HIDE. Faults, other
// processes' usage and a device's size come through standin_control.h. Never installed: the
// backend is pointed at this file by $ORCH_CUDA_DRIVER.
#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "standin_control.h"
#include "standin_device.hpp"

#define STANDIN_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using orch::standin::device_model;
using orch::standin::env_u64;
using orch::standin::outcome;

struct context {
  int32_t device;
  int retains;
};

struct driver_state {
  std::mutex mutex;
  int version = static_cast<int>(env_u64("ORCH_STANDIN_CUDA_VERSION", 12000));
  int32_t devices = static_cast<int32_t>(env_u64("ORCH_STANDIN_CUDA_DEVICES", 1));
  device_model model{devices, env_u64("ORCH_STANDIN_CUDA_MEMORY", 8ull << 30)};
  bool initialised = false;
  std::vector<context> contexts = std::vector<context>(static_cast<size_t>(devices), {0, 0});
  std::map<std::string, int> requested;
};

driver_state& state() {
  // Never destroyed: a plugin may call in from its own static destructors at exit.
  static auto* s = new driver_state;
  return *s;
}

thread_local std::vector<context*> ctx_stack;

CUresult to_cu(outcome o) {
  switch (o) {
    case outcome::ok: return CUDA_SUCCESS;
    case outcome::oom: return CUDA_ERROR_OUT_OF_MEMORY;
    case outcome::not_registered: return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    case outcome::already_registered: return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    case outcome::invalid: break;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

// The gate every entry point but cuInit, cuDriverGetVersion and cuGetProcAddress passes: an
// injected fault, a lost device, a driver not initialised.
CUresult gate(driver_state& s, const char* entry) {
  if (const int st = s.model.injected(entry); st != 0) return static_cast<CUresult>(st);
  if (s.model.lost) return CUDA_ERROR_DEVICE_UNAVAILABLE;
  if (!s.initialised) return CUDA_ERROR_NOT_INITIALIZED;
  return CUDA_SUCCESS;
}

bool known_context(driver_state& s, CUcontext c) {
  for (auto& ctx : s.contexts)
    if (reinterpret_cast<CUcontext>(&ctx) == c) return ctx.retains > 0;
  return false;
}

#define GATE(name)                                                    \
  driver_state& s = state();                                          \
  std::lock_guard lock(s.mutex);                                      \
  if (const CUresult g = gate(s, name); g != CUDA_SUCCESS) return g

#define NEEDS_CONTEXT()                                                \
  if (ctx_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT

CUresult CUDAAPI standin_cuInit(unsigned int flags) {
  driver_state& s = state();
  std::lock_guard lock(s.mutex);
  if (const int st = s.model.injected("cuInit"); st != 0) return static_cast<CUresult>(st);
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  s.initialised = true;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI standin_cuDriverGetVersion(int* v) {
  if (v == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *v = state().version;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI standin_cuDeviceGetCount(int* count) {
  GATE("cuDeviceGetCount");
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = s.devices;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI standin_cuDeviceGet(CUdevice* dev, int ordinal) {
  GATE("cuDeviceGet");
  if (dev == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (ordinal < 0 || ordinal >= s.devices) return CUDA_ERROR_INVALID_DEVICE;
  *dev = ordinal;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI standin_cuDeviceTotalMem(size_t* bytes, CUdevice dev) {
  GATE("cuDeviceTotalMem");
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= s.devices) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = s.model.total(dev);
  return CUDA_SUCCESS;
}

// CUDA 2.0's prototype, 32-bit: what a caller gets that asks below 3020.
CUresult CUDAAPI standin_cuDeviceTotalMem_v2000(unsigned int* bytes, CUdevice dev) {
  GATE("cuDeviceTotalMem");
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= s.devices) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = static_cast<unsigned int>(s.model.total(dev));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI standin_cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  GATE("cuDevicePrimaryCtxRetain");
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= s.devices) return CUDA_ERROR_INVALID_DEVICE;
  context& c = s.contexts[static_cast<size_t>(dev)];
  c.device = dev;
  ++c.retains;
  *pctx = reinterpret_cast<CUcontext>(&c);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI standin_cuDevicePrimaryCtxRelease(CUdevice dev) {
  GATE("cuDevicePrimaryCtxRelease");
  if (dev < 0 || dev >= s.devices) return CUDA_ERROR_INVALID_DEVICE;
  context& c = s.contexts[static_cast<size_t>(dev)];
  if (c.retains == 0) return CUDA_ERROR_INVALID_CONTEXT;
  --c.retains;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI standin_cuCtxPushCurrent(CUcontext ctx) {
  GATE("cuCtxPushCurrent");
  if (!known_context(s, ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  ctx_stack.push_back(reinterpret_cast<context*>(ctx));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI standin_cuCtxPopCurrent(CUcontext* pctx) {
  GATE("cuCtxPopCurrent");
  NEEDS_CONTEXT();
  if (pctx != nullptr) *pctx = reinterpret_cast<CUcontext>(ctx_stack.back());
  ctx_stack.pop_back();
  return CUDA_SUCCESS;
}

CUresult synchronize(driver_state& s, const char* entry) {
  if (const int st = s.model.injected(entry); st != 0) {
    s.model.synced(false);
    return static_cast<CUresult>(st);
  }
  if (s.model.lost) {
    s.model.synced(false);
    return CUDA_ERROR_DEVICE_UNAVAILABLE;
  }
  if (!s.initialised) return CUDA_ERROR_NOT_INITIALIZED;
  s.model.synced(true);
  return CUDA_SUCCESS;
}

// CUDA 2.0's cuCtxSynchronize: the calling thread's current context.
CUresult CUDAAPI standin_cuCtxSynchronize(void) {
  driver_state& s = state();
  std::lock_guard lock(s.mutex);
  NEEDS_CONTEXT();
  return synchronize(s, "cuCtxSynchronize");
}

// CUDA 13.0's cuCtxSynchronize_v2(ctx): NULL is the current context; anything else must be a live
// context. A caller that declares it without arguments passes whatever its first argument register
// holds, which this check refuses.
CUresult CUDAAPI standin_cuCtxSynchronize_v2(CUcontext ctx) {
  driver_state& s = state();
  std::lock_guard lock(s.mutex);
  if (ctx == nullptr) {
    NEEDS_CONTEXT();
  } else if (!known_context(s, ctx)) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  return synchronize(s, "cuCtxSynchronize");
}

CUresult CUDAAPI standin_cuMemGetInfo(size_t* free_bytes, size_t* total) {
  GATE("cuMemGetInfo");
  NEEDS_CONTEXT();
  if (free_bytes == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const int32_t dev = ctx_stack.back()->device;  // the current context's device
  *free_bytes = s.model.free_bytes(dev);
  *total = s.model.total(dev);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI standin_cuMemGetInfo_v2000(unsigned int* free_bytes, unsigned int* total) {
  GATE("cuMemGetInfo");
  NEEDS_CONTEXT();
  if (free_bytes == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const int32_t dev = ctx_stack.back()->device;
  *free_bytes = static_cast<unsigned int>(s.model.free_bytes(dev));
  *total = static_cast<unsigned int>(s.model.total(dev));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI standin_cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                                             CUdeviceptr /*addr*/, unsigned long long flags) {
  GATE("cuMemAddressReserve");
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  uint64_t va = 0;
  const CUresult rc = to_cu(s.model.reserve(size, alignment, &va));
  if (rc == CUDA_SUCCESS) *ptr = va;
  return rc;
}

CUresult CUDAAPI standin_cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  GATE("cuMemAddressFree");
  return to_cu(s.model.address_free(ptr, size));
}

CUresult CUDAAPI standin_cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                     const CUmemAllocationProp* prop, unsigned long long flags) {
  GATE("cuMemCreate");
  if (handle == nullptr || prop == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return CUDA_ERROR_INVALID_VALUE;
  uint64_t h = 0;
  const CUresult rc = to_cu(s.model.create(size, prop->location.id, &h));
  if (rc == CUDA_SUCCESS) *handle = h;
  return rc;
}

CUresult CUDAAPI standin_cuMemRelease(CUmemGenericAllocationHandle handle) {
  GATE("cuMemRelease");
  return to_cu(s.model.release(handle));
}

CUresult CUDAAPI standin_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                  CUmemGenericAllocationHandle handle, unsigned long long flags) {
  GATE("cuMemMap");
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  return to_cu(s.model.map(ptr, size, offset, handle));
}

CUresult CUDAAPI standin_cuMemUnmap(CUdeviceptr ptr, size_t size) {
  GATE("cuMemUnmap");
  return to_cu(s.model.unmap(ptr, size));
}

CUresult CUDAAPI standin_cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                        size_t count) {
  GATE("cuMemSetAccess");
  if (desc == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i)
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || desc[i].location.id < 0 ||
        desc[i].location.id >= s.devices)
      return CUDA_ERROR_INVALID_DEVICE;
  return to_cu(s.model.set_access(ptr, size));
}

CUresult CUDAAPI standin_cuMemGetAllocationGranularity(size_t* granularity,
                                                       const CUmemAllocationProp* prop,
                                                       CUmemAllocationGranularity_flags option) {
  GATE("cuMemGetAllocationGranularity");
  if (granularity == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
    return CUDA_ERROR_INVALID_VALUE;
  *granularity = device_model::granule;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI standin_cuMemHostRegister(void* p, size_t size, unsigned int /*flags*/) {
  GATE("cuMemHostRegister");
  NEEDS_CONTEXT();
  return to_cu(s.model.host_register(p, size));
}

CUresult CUDAAPI standin_cuMemHostUnregister(void* p) {
  GATE("cuMemHostUnregister");
  NEEDS_CONTEXT();
  return to_cu(s.model.host_unregister(p));
}

// The entry points comfy-aimdo (0.3.0 and later) resolves at init besides the ones above, so that
// its shipped library runs on this driver beside the cuda backend (bench/plugins/
// bench_pager_vs_aimdo.cpp). The queries answer what a plain discrete card would; what allocates
// linear memory, copies or records events is not modelled and answers CUDA_ERROR_NOT_SUPPORTED
// (nothing the benchmark's trace calls). Each has a body of its own, so none share an address:
// aimdo patches the allocation entry points in place (funchook), one hook per function.
CUresult CUDAAPI standin_cuGetErrorString(CUresult error, const char** text) {
  if (text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *text = error == CUDA_SUCCESS ? "no error" : "an error of the CUDA driver stand-in";
  return CUDA_SUCCESS;
}

CUresult CUDAAPI standin_cuCtxGetDevice(CUdevice* dev) {
  GATE("cuCtxGetDevice");
  NEEDS_CONTEXT();
  if (dev == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *dev = ctx_stack.back()->device;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI standin_cuDeviceGetAttribute(int* value, CUdevice_attribute /*attribute*/,
                                              CUdevice dev) {
  GATE("cuDeviceGetAttribute");
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= s.devices) return CUDA_ERROR_INVALID_DEVICE;
  *value = 0;  // a discrete card: not integrated, no attribute the stand-in models
  return CUDA_SUCCESS;
}

CUresult CUDAAPI standin_cuDeviceGetName(char* name, int length, CUdevice dev) {
  GATE("cuDeviceGetName");
  if (name == nullptr || length <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= s.devices) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<size_t>(length), "CUDA driver stand-in %d", dev);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI standin_cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  GATE("cuDeviceGetUuid");
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= s.devices) return CUDA_ERROR_INVALID_DEVICE;
  std::memset(uuid, 0, sizeof *uuid);
  uuid->bytes[0] = static_cast<char>(dev + 1);
  return CUDA_SUCCESS;
}

#define STANDIN_NOT_MODELLED(name, ...)          \
  CUresult CUDAAPI standin_##name(__VA_ARGS__) { \
    GATE(#name);                                 \
    return CUDA_ERROR_NOT_SUPPORTED;             \
  }
STANDIN_NOT_MODELLED(cuMemAlloc, CUdeviceptr*, size_t)
STANDIN_NOT_MODELLED(cuMemFree, CUdeviceptr)
STANDIN_NOT_MODELLED(cuMemAllocAsync, CUdeviceptr*, size_t, CUstream)
STANDIN_NOT_MODELLED(cuMemFreeAsync, CUdeviceptr, CUstream)
STANDIN_NOT_MODELLED(cuMemAllocHost, void**, size_t)
STANDIN_NOT_MODELLED(cuMemFreeHost, void*)
STANDIN_NOT_MODELLED(cuMemcpyHtoDAsync, CUdeviceptr, const void*, size_t, CUstream)
STANDIN_NOT_MODELLED(cuMemcpyDtoHAsync, void*, CUdeviceptr, size_t, CUstream)
STANDIN_NOT_MODELLED(cuEventCreate, CUevent*, unsigned int)
STANDIN_NOT_MODELLED(cuEventRecord, CUevent, CUstream)
STANDIN_NOT_MODELLED(cuEventSynchronize, CUevent)
STANDIN_NOT_MODELLED(cuEventDestroy, CUevent)
#undef STANDIN_NOT_MODELLED

// One variant of a driver symbol: its base name, the CUDA version that introduced it.
struct entry {
  const char* name;
  int version;
  void* fn;
};

#define ENTRY(name, version, fn) entry{name, version, reinterpret_cast<void*>(fn)}

const std::vector<entry>& entries() {
  static const std::vector<entry> table = {
      ENTRY("cuInit", 2000, standin_cuInit),
      ENTRY("cuDriverGetVersion", 2020, standin_cuDriverGetVersion),
      ENTRY("cuDeviceGet", 2000, standin_cuDeviceGet),
      ENTRY("cuDeviceGetCount", 2000, standin_cuDeviceGetCount),
      ENTRY("cuDeviceTotalMem", 2000, standin_cuDeviceTotalMem_v2000),
      ENTRY("cuDeviceTotalMem", 3020, standin_cuDeviceTotalMem),
      ENTRY("cuDevicePrimaryCtxRetain", 7000, standin_cuDevicePrimaryCtxRetain),
      ENTRY("cuDevicePrimaryCtxRelease", 7000, standin_cuDevicePrimaryCtxRelease),
      ENTRY("cuDevicePrimaryCtxRelease", 11000, standin_cuDevicePrimaryCtxRelease),
      ENTRY("cuCtxPushCurrent", 4000, standin_cuCtxPushCurrent),
      ENTRY("cuCtxPopCurrent", 4000, standin_cuCtxPopCurrent),
      ENTRY("cuCtxSynchronize", 2000, standin_cuCtxSynchronize),
      ENTRY("cuCtxSynchronize", 13000, standin_cuCtxSynchronize_v2),
      ENTRY("cuMemGetInfo", 2000, standin_cuMemGetInfo_v2000),
      ENTRY("cuMemGetInfo", 3020, standin_cuMemGetInfo),
      ENTRY("cuMemAddressReserve", 10020, standin_cuMemAddressReserve),
      ENTRY("cuMemAddressFree", 10020, standin_cuMemAddressFree),
      ENTRY("cuMemCreate", 10020, standin_cuMemCreate),
      ENTRY("cuMemRelease", 10020, standin_cuMemRelease),
      ENTRY("cuMemMap", 10020, standin_cuMemMap),
      ENTRY("cuMemUnmap", 10020, standin_cuMemUnmap),
      ENTRY("cuMemSetAccess", 10020, standin_cuMemSetAccess),
      ENTRY("cuMemGetAllocationGranularity", 10020, standin_cuMemGetAllocationGranularity),
      ENTRY("cuMemHostRegister", 4000, standin_cuMemHostRegister),
      ENTRY("cuMemHostRegister", 6050, standin_cuMemHostRegister),
      ENTRY("cuMemHostUnregister", 4000, standin_cuMemHostUnregister),
      // comfy-aimdo's (above)
      ENTRY("cuGetErrorString", 6000, standin_cuGetErrorString),
      ENTRY("cuCtxGetDevice", 2000, standin_cuCtxGetDevice),
      ENTRY("cuDeviceGetAttribute", 2000, standin_cuDeviceGetAttribute),
      ENTRY("cuDeviceGetName", 2000, standin_cuDeviceGetName),
      ENTRY("cuDeviceGetUuid", 9020, standin_cuDeviceGetUuid),
      ENTRY("cuMemAlloc", 3020, standin_cuMemAlloc),
      ENTRY("cuMemFree", 3020, standin_cuMemFree),
      ENTRY("cuMemAllocAsync", 11020, standin_cuMemAllocAsync),
      ENTRY("cuMemFreeAsync", 11020, standin_cuMemFreeAsync),
      ENTRY("cuMemAllocHost", 3020, standin_cuMemAllocHost),
      ENTRY("cuMemFreeHost", 2000, standin_cuMemFreeHost),
      ENTRY("cuMemcpyHtoDAsync", 3020, standin_cuMemcpyHtoDAsync),
      ENTRY("cuMemcpyDtoHAsync", 3020, standin_cuMemcpyDtoHAsync),
      ENTRY("cuEventCreate", 2000, standin_cuEventCreate),
      ENTRY("cuEventRecord", 2000, standin_cuEventRecord),
      ENTRY("cuEventSynchronize", 2000, standin_cuEventSynchronize),
      ENTRY("cuEventDestroy", 4000, standin_cuEventDestroy),
  };
  return table;
}

// $ORCH_STANDIN_CUDA_HIDE: entry points this driver lacks (comma-separated), as a platform
// without virtual memory management answers for cuMemCreate.
bool hidden(const char* symbol) {
  const char* list = std::getenv("ORCH_STANDIN_CUDA_HIDE");
  if (list == nullptr) return false;
  const std::string all = std::string(",") + list + ",";
  return all.find(std::string(",") + symbol + ",") != std::string::npos;
}

CUresult get_proc(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                  CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  driver_state& s = state();
  {
    std::lock_guard lock(s.mutex);
    s.requested[symbol] = cuda_version;
  }
  if (flags > (CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
    return CUDA_ERROR_INVALID_VALUE;
  if (cuda_version > s.version) return CUDA_ERROR_INVALID_VALUE;  // newer than this driver
  bool exists = false;
  const entry* best = nullptr;
  for (const entry& e : entries()) {
    if (std::strcmp(e.name, symbol) != 0 || e.version > s.version || hidden(symbol)) continue;
    exists = true;
    if (e.version <= cuda_version && (best == nullptr || e.version > best->version)) best = &e;
  }
  if (status != nullptr)
    *status = best != nullptr ? CU_GET_PROC_ADDRESS_SUCCESS
              : exists        ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                              : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (best != nullptr) *pfn = best->fn;
  return CUDA_SUCCESS;
}

}  // namespace

// cuda.h renames cuGetProcAddress to cuGetProcAddress_v2; the real driver exports both: CUDA
// 11.3's, without the status, and 12.0's.
#undef cuGetProcAddress
STANDIN_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version,
                                            cuuint64_t flags,
                                            CUdriverProcAddressQueryResult* status) {
  return get_proc(symbol, pfn, cuda_version, flags, status);
}
STANDIN_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version,
                                         cuuint64_t flags) {
  return get_proc(symbol, pfn, cuda_version, flags, nullptr);
}

STANDIN_EXPORT void orch_standin_cuda_fail(const char* entry, int status, int count) {
  driver_state& s = state();
  std::lock_guard lock(s.mutex);
  s.model.fail(entry, status, count);
}
STANDIN_EXPORT void orch_standin_cuda_lose_device() {
  driver_state& s = state();
  std::lock_guard lock(s.mutex);
  s.model.lost = true;
}
STANDIN_EXPORT void orch_standin_cuda_stats(orch_standin_stats* out) {
  driver_state& s = state();
  std::lock_guard lock(s.mutex);
  *out = s.model.stats();
}
STANDIN_EXPORT int orch_standin_cuda_requested_version(const char* entry) {
  driver_state& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.requested.find(entry);
  return it == s.requested.end() ? -1 : it->second;
}
STANDIN_EXPORT int orch_standin_cuda_set_other_usage(int device, uint64_t bytes) {
  driver_state& s = state();
  std::lock_guard lock(s.mutex);
  return s.model.set_other_usage(device, bytes) ? 0 : -1;
}
STANDIN_EXPORT int orch_standin_cuda_set_memory(int device, uint64_t bytes) {
  driver_state& s = state();
  std::lock_guard lock(s.mutex);
  return s.model.set_total(device, bytes) ? 0 : -1;
}
STANDIN_EXPORT int orch_standin_cuda_memory(int device, orch_standin_memory* out) {
  driver_state& s = state();
  std::lock_guard lock(s.mutex);
  return s.model.memory(device, out) ? 0 : -1;
}
