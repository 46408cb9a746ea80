// The cuda backend. The driver is reached at run time: dlopen("libcuda.so.1"), then every entry
// point through cuGetProcAddress (reference/aimdo.md §1.3: aimdo's "linkless" build). cuda.h
// supplies types only, so a machine without a GPU builds and loads this plugin; device_count then
// answers ORCH_DEVICE_ERROR (no driver) or 0 devices.
//
// Memory: cuMemAddressReserve / cuMemCreate / cuMemMap + cuMemSetAccess, the VMM calls aimdo's
// VBAR uses (§4.2); pressure: cuMemGetInfo; pinning: cuMemHostRegister.
#include <cuda.h>
#include <dlfcn.h>

#include <mutex>
#include <new>

#include "backends.hpp"

struct orch_device {
  int32_t ordinal = 0;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  uint64_t granularity = 0;
};

namespace orch::plugin_detail {
namespace {

struct cuda_driver {
  void* lib = nullptr;
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*driver_get_version)(int*) = nullptr;
  CUresult (*device_get_count)(int*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*device_total_mem)(size_t*, CUdevice) = nullptr;
  CUresult (*primary_ctx_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*primary_ctx_release)(CUdevice) = nullptr;
  CUresult (*ctx_push_current)(CUcontext) = nullptr;
  CUresult (*ctx_pop_current)(CUcontext*) = nullptr;
  CUresult (*ctx_synchronize)() = nullptr;
  CUresult (*mem_get_info)(size_t*, size_t*) = nullptr;
  CUresult (*address_reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long) =
      nullptr;
  CUresult (*address_free)(CUdeviceptr, size_t) = nullptr;
  CUresult (*mem_create)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                         unsigned long long) = nullptr;
  CUresult (*mem_release)(CUmemGenericAllocationHandle) = nullptr;
  CUresult (*mem_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                      unsigned long long) = nullptr;
  CUresult (*mem_unmap)(CUdeviceptr, size_t) = nullptr;
  CUresult (*mem_set_access)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) = nullptr;
  CUresult (*granularity)(size_t*, const CUmemAllocationProp*,
                          CUmemAllocationGranularity_flags) = nullptr;
  CUresult (*host_register)(void*, size_t, unsigned) = nullptr;
  CUresult (*host_unregister)(void*) = nullptr;
  bool ok = false;
};

using get_proc_v2_fn = CUresult (*)(const char*, void**, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult*);
using get_proc_v1_fn = CUresult (*)(const char*, void**, int, cuuint64_t);

template <typename F>
bool resolve(get_proc_v2_fn v2, get_proc_v1_fn v1, const char* name, F& out) {
  void* p = nullptr;
  CUresult rc = CUDA_ERROR_NOT_FOUND;
  if (v2 != nullptr) {
    CUdriverProcAddressQueryResult q{};
    rc = v2(name, &p, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &q);
  } else if (v1 != nullptr) {
    rc = v1(name, &p, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT);
  }
  if (rc != CUDA_SUCCESS || p == nullptr) return false;
  out = reinterpret_cast<F>(p);
  return true;
}

const cuda_driver& driver() {
  static cuda_driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    d.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (d.lib == nullptr) return;
    auto v2 = reinterpret_cast<get_proc_v2_fn>(dlsym(d.lib, "cuGetProcAddress_v2"));
    auto v1 = v2 != nullptr ? nullptr
                            : reinterpret_cast<get_proc_v1_fn>(dlsym(d.lib, "cuGetProcAddress"));
    d.ok = resolve(v2, v1, "cuInit", d.init) &&
           resolve(v2, v1, "cuDriverGetVersion", d.driver_get_version) &&
           resolve(v2, v1, "cuDeviceGetCount", d.device_get_count) &&
           resolve(v2, v1, "cuDeviceGet", d.device_get) &&
           resolve(v2, v1, "cuDeviceTotalMem", d.device_total_mem) &&
           resolve(v2, v1, "cuDevicePrimaryCtxRetain", d.primary_ctx_retain) &&
           resolve(v2, v1, "cuDevicePrimaryCtxRelease", d.primary_ctx_release) &&
           resolve(v2, v1, "cuCtxPushCurrent", d.ctx_push_current) &&
           resolve(v2, v1, "cuCtxPopCurrent", d.ctx_pop_current) &&
           resolve(v2, v1, "cuCtxSynchronize", d.ctx_synchronize) &&
           resolve(v2, v1, "cuMemGetInfo", d.mem_get_info) &&
           resolve(v2, v1, "cuMemAddressReserve", d.address_reserve) &&
           resolve(v2, v1, "cuMemAddressFree", d.address_free) &&
           resolve(v2, v1, "cuMemCreate", d.mem_create) &&
           resolve(v2, v1, "cuMemRelease", d.mem_release) &&
           resolve(v2, v1, "cuMemMap", d.mem_map) &&
           resolve(v2, v1, "cuMemUnmap", d.mem_unmap) &&
           resolve(v2, v1, "cuMemSetAccess", d.mem_set_access) &&
           resolve(v2, v1, "cuMemGetAllocationGranularity", d.granularity) &&
           resolve(v2, v1, "cuMemHostRegister", d.host_register) &&
           resolve(v2, v1, "cuMemHostUnregister", d.host_unregister) && d.init(0) == CUDA_SUCCESS;
  });
  return d;
}

orch_status map_error(CUresult rc) {
  if (rc == CUDA_SUCCESS) return ORCH_OK;
  if (rc == CUDA_ERROR_OUT_OF_MEMORY) return ORCH_OOM_RETRYABLE;
  if (rc == CUDA_ERROR_INVALID_VALUE) return ORCH_INVALID;
  if (rc == CUDA_ERROR_NOT_SUPPORTED) return ORCH_UNSUPPORTED;
  return ORCH_DEVICE_ERROR;
}

// Every call makes the device's primary context current on the calling thread for the call's
// duration only: plugins get explicit handles, never a thread-local "current device" (reference
// §6.1), and the caller's own current context (torch's, say) must be what it finds afterwards.
// Push on entry, pop on every way out; a push that fails is a device error.
class context_scope {
 public:
  explicit context_scope(const orch_device* dev) noexcept
      : entered_(driver().ctx_push_current(dev->ctx) == CUDA_SUCCESS) {}
  ~context_scope() {
    CUcontext popped = nullptr;
    if (entered_) (void)driver().ctx_pop_current(&popped);
  }
  context_scope(const context_scope&) = delete;
  context_scope& operator=(const context_scope&) = delete;
  explicit operator bool() const noexcept { return entered_; }

 private:
  bool entered_;
};

CUmemAllocationProp prop_for(const orch_device* dev) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev->ordinal;
  return prop;
}

orch_status cu_device_count(int32_t* count) {
  if (count == nullptr) return ORCH_INVALID;
  const auto& d = driver();
  if (!d.ok) return ORCH_DEVICE_ERROR;
  int n = 0;
  if (const orch_status st = map_error(d.device_get_count(&n)); st != ORCH_OK) return st;
  *count = n;
  return ORCH_OK;
}

orch_status cu_device_open(const orch_device_config* config, orch_device** out) {
  if (config == nullptr || out == nullptr || config->struct_size < sizeof(orch_device_config))
    return ORCH_INVALID;
  const auto& d = driver();
  if (!d.ok) return ORCH_DEVICE_ERROR;
  auto* dev = new (std::nothrow) orch_device;
  if (dev == nullptr) return ORCH_OOM_RETRYABLE;
  dev->ordinal = config->ordinal;
  orch_status st = map_error(d.device_get(&dev->dev, config->ordinal));
  if (st == ORCH_OK) st = map_error(d.primary_ctx_retain(&dev->ctx, dev->dev));
  if (st != ORCH_OK) {
    delete dev;
    return st;
  }
  size_t g = 0;
  const CUmemAllocationProp prop = prop_for(dev);
  {
    const context_scope scope(dev);
    st = scope ? map_error(d.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
               : ORCH_DEVICE_ERROR;
  }
  if (st != ORCH_OK) {
    d.primary_ctx_release(dev->dev);
    delete dev;
    return st;
  }
  dev->granularity = g;
  *out = dev;
  return ORCH_OK;
}

void cu_device_close(orch_device* dev) {
  if (dev == nullptr) return;
  driver().primary_ctx_release(dev->dev);
  delete dev;
}

orch_status cu_total_mem(orch_device* dev, uint64_t* bytes) {
  if (dev == nullptr || bytes == nullptr) return ORCH_INVALID;
  size_t n = 0;
  const orch_status st = map_error(driver().device_total_mem(&n, dev->dev));
  *bytes = n;
  return st;
}

orch_status cu_granularity(orch_device* dev, uint64_t* bytes) {
  if (dev == nullptr || bytes == nullptr) return ORCH_INVALID;
  *bytes = dev->granularity;
  return ORCH_OK;
}

orch_status cu_mem_get_info(orch_device* dev, uint64_t* free_bytes, uint64_t* total_bytes) {
  if (free_bytes == nullptr || dev == nullptr) return ORCH_INVALID;
  const context_scope scope(dev);
  if (!scope) return ORCH_DEVICE_ERROR;
  size_t f = 0;
  size_t t = 0;
  const orch_status st = map_error(driver().mem_get_info(&f, &t));
  *free_bytes = f;
  if (total_bytes != nullptr) *total_bytes = t;
  return st;
}

orch_status cu_va_reserve(orch_device* dev, uint64_t size, uint64_t* va) {
  if (va == nullptr || size == 0 || dev == nullptr) return ORCH_INVALID;
  const context_scope scope(dev);
  if (!scope) return ORCH_DEVICE_ERROR;
  CUdeviceptr p = 0;
  const orch_status st = map_error(driver().address_reserve(&p, size, dev->granularity, 0, 0));
  *va = p;
  return st;
}

orch_status cu_va_free(orch_device* dev, uint64_t va, uint64_t size) {
  if (dev == nullptr) return ORCH_INVALID;
  const context_scope scope(dev);
  if (!scope) return ORCH_DEVICE_ERROR;
  return map_error(driver().address_free(va, size));
}

orch_status cu_phys_create(orch_device* dev, uint64_t size, uint64_t* handle) {
  if (handle == nullptr || size == 0 || dev == nullptr) return ORCH_INVALID;
  const context_scope scope(dev);
  if (!scope) return ORCH_DEVICE_ERROR;
  const CUmemAllocationProp prop = prop_for(dev);
  CUmemGenericAllocationHandle h = 0;
  const orch_status st = map_error(driver().mem_create(&h, size, &prop, 0));
  *handle = h;
  return st;
}

orch_status cu_phys_release(orch_device* dev, uint64_t handle) {
  if (dev == nullptr) return ORCH_INVALID;
  const context_scope scope(dev);
  if (!scope) return ORCH_DEVICE_ERROR;
  return map_error(driver().mem_release(handle));
}

orch_status cu_map(orch_device* dev, uint64_t va, uint64_t size, uint64_t handle) {
  if (dev == nullptr) return ORCH_INVALID;
  const context_scope scope(dev);
  if (!scope) return ORCH_DEVICE_ERROR;
  const auto& d = driver();
  if (const orch_status st = map_error(d.mem_map(va, size, 0, handle, 0)); st != ORCH_OK)
    return st;
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = dev->ordinal;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  // cuMemSetAccess is where "device not ready" surfaces (reference §4.11); undo the map so the
  // caller's state stays consistent.
  const orch_status st = map_error(d.mem_set_access(va, size, &access, 1));
  if (st != ORCH_OK) d.mem_unmap(va, size);
  return st;
}

orch_status cu_unmap(orch_device* dev, uint64_t va, uint64_t size) {
  if (dev == nullptr) return ORCH_INVALID;
  const context_scope scope(dev);
  if (!scope) return ORCH_DEVICE_ERROR;
  return map_error(driver().mem_unmap(va, size));
}

orch_status cu_synchronize(orch_device* dev) {
  if (dev == nullptr) return ORCH_INVALID;
  const context_scope scope(dev);
  if (!scope) return ORCH_DEVICE_ERROR;
  return map_error(driver().ctx_synchronize());
}

orch_status cu_host_register(orch_device* dev, void* ptr, uint64_t size) {
  if (ptr == nullptr || size == 0 || dev == nullptr) return ORCH_INVALID;
  const context_scope scope(dev);
  if (!scope) return ORCH_DEVICE_ERROR;
  return map_error(driver().host_register(ptr, size, 0));
}

orch_status cu_host_unregister(orch_device* dev, void* ptr) {
  if (ptr == nullptr || dev == nullptr) return ORCH_INVALID;
  const context_scope scope(dev);
  if (!scope) return ORCH_DEVICE_ERROR;
  return map_error(driver().host_unregister(ptr));
}

// The driver's CUDA version: 12080 is 12.8.
orch_status cu_runtime_version(orch_device* dev, uint32_t* major, uint32_t* minor) {
  if (dev == nullptr || major == nullptr || minor == nullptr) return ORCH_INVALID;
  int v = 0;
  if (const orch_status st = map_error(driver().driver_get_version(&v)); st != ORCH_OK) return st;
  if (v < 0) return ORCH_DEVICE_ERROR;
  *major = static_cast<uint32_t>(v / 1000);
  *minor = static_cast<uint32_t>(v % 1000 / 10);
  return ORCH_OK;
}

constexpr orch_backend_api cuda_api{
    sizeof(orch_backend_api), 0,
    cu_device_count, cu_device_open, cu_device_close, cu_total_mem, cu_granularity,
    cu_mem_get_info, cu_va_reserve, cu_va_free, cu_phys_create, cu_phys_release, cu_map,
    cu_unmap, cu_synchronize, cu_host_register, cu_host_unregister, nullptr, nullptr,
    cu_runtime_version};

}  // namespace

const orch_backend_api* cuda_backend_api() noexcept { return &cuda_api; }

}  // namespace orch::plugin_detail
