// The hip backend: the cuda backend's twin over libamdhip64, loaded at run time with dlopen and
// resolved with dlsym (reference/aimdo.md §1.4: aimdo's src-hip/dispatch.c does the same). It
// uses the HIP virtual memory API (hipMemAddressReserve / hipMemCreate / hipMemMap /
// hipMemSetAccess), which the headers declare from ROCm 5.2 (HIP_VERSION 5.2); at run time the
// driver must implement it (ROCm 6.x for real VMM support, see docs/plugin-abi.md).
#define __HIP_PLATFORM_AMD__ 1
#include <dlfcn.h>
#include <hip/hip_runtime_api.h>

#include <mutex>
#include <new>

#include "backends.hpp"

struct orch_device {
  int32_t ordinal = 0;
  uint64_t granularity = 0;
};

namespace orch::plugin_detail {
namespace {

struct hip_driver {
  void* lib = nullptr;
  hipError_t (*init)(unsigned) = nullptr;
  hipError_t (*runtime_get_version)(int*) = nullptr;
  hipError_t (*get_device_count)(int*) = nullptr;
  hipError_t (*set_device)(int) = nullptr;
  hipError_t (*get_device)(int*) = nullptr;
  hipError_t (*device_total_mem)(size_t*, hipDevice_t) = nullptr;
  hipError_t (*mem_get_info)(size_t*, size_t*) = nullptr;
  hipError_t (*address_reserve)(void**, size_t, size_t, void*, unsigned long long) = nullptr;
  hipError_t (*address_free)(void*, size_t) = nullptr;
  hipError_t (*mem_create)(hipMemGenericAllocationHandle_t*, size_t, const hipMemAllocationProp*,
                           unsigned long long) = nullptr;
  hipError_t (*mem_release)(hipMemGenericAllocationHandle_t) = nullptr;
  hipError_t (*mem_map)(void*, size_t, size_t, hipMemGenericAllocationHandle_t,
                        unsigned long long) = nullptr;
  hipError_t (*mem_unmap)(void*, size_t) = nullptr;
  hipError_t (*mem_set_access)(void*, size_t, const hipMemAccessDesc*, size_t) = nullptr;
  hipError_t (*granularity)(size_t*, const hipMemAllocationProp*,
                            hipMemAllocationGranularity_flags) = nullptr;
  hipError_t (*device_synchronize)() = nullptr;
  hipError_t (*host_register)(void*, size_t, unsigned) = nullptr;
  hipError_t (*host_unregister)(void*) = nullptr;
  bool ok = false;
};

template <typename F>
bool resolve(void* lib, const char* name, F& out) {
  void* p = dlsym(lib, name);
  if (p == nullptr) return false;
  out = reinterpret_cast<F>(p);
  return true;
}

const hip_driver& driver() {
  static hip_driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    for (const char* name : {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"}) {
      d.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (d.lib != nullptr) break;
    }
    if (d.lib == nullptr) return;
    void* l = d.lib;
    d.ok = resolve(l, "hipInit", d.init) && resolve(l, "hipGetDeviceCount", d.get_device_count) &&
           resolve(l, "hipRuntimeGetVersion", d.runtime_get_version) &&
           resolve(l, "hipSetDevice", d.set_device) &&
           resolve(l, "hipGetDevice", d.get_device) &&
           resolve(l, "hipDeviceTotalMem", d.device_total_mem) &&
           resolve(l, "hipMemGetInfo", d.mem_get_info) &&
           resolve(l, "hipMemAddressReserve", d.address_reserve) &&
           resolve(l, "hipMemAddressFree", d.address_free) &&
           resolve(l, "hipMemCreate", d.mem_create) && resolve(l, "hipMemRelease", d.mem_release) &&
           resolve(l, "hipMemMap", d.mem_map) && resolve(l, "hipMemUnmap", d.mem_unmap) &&
           resolve(l, "hipMemSetAccess", d.mem_set_access) &&
           resolve(l, "hipMemGetAllocationGranularity", d.granularity) &&
           resolve(l, "hipDeviceSynchronize", d.device_synchronize) &&
           resolve(l, "hipHostRegister", d.host_register) &&
           resolve(l, "hipHostUnregister", d.host_unregister) && d.init(0) == hipSuccess;
  });
  return d;
}

orch_status map_error(hipError_t rc) {
  if (rc == hipSuccess) return ORCH_OK;
  if (rc == hipErrorOutOfMemory) return ORCH_OOM_RETRYABLE;
  if (rc == hipErrorInvalidValue) return ORCH_INVALID;
  if (rc == hipErrorNotSupported) return ORCH_UNSUPPORTED;
  return ORCH_DEVICE_ERROR;
}

// Every call selects the device for its own duration only: the caller's current device (torch's,
// say) is saved on entry and restored on every way out. A failed save or select is a device
// error.
class device_scope {
 public:
  explicit device_scope(const orch_device* dev) noexcept {
    const auto& d = driver();
    if (d.get_device(&previous_) != hipSuccess) return;
    entered_ = previous_ == dev->ordinal || d.set_device(dev->ordinal) == hipSuccess;
    switched_ = entered_ && previous_ != dev->ordinal;
  }
  ~device_scope() {
    if (switched_) (void)driver().set_device(previous_);  // nothing to do if it fails
  }
  device_scope(const device_scope&) = delete;
  device_scope& operator=(const device_scope&) = delete;
  explicit operator bool() const noexcept { return entered_; }

 private:
  int previous_ = 0;
  bool entered_ = false;
  bool switched_ = false;
};

hipMemAllocationProp prop_for(const orch_device* dev) {
  hipMemAllocationProp prop{};
  prop.type = hipMemAllocationTypePinned;
  prop.location.type = hipMemLocationTypeDevice;
  prop.location.id = dev->ordinal;
  return prop;
}

void* as_ptr(uint64_t va) { return reinterpret_cast<void*>(static_cast<uintptr_t>(va)); }

orch_status hip_device_count(int32_t* count) {
  if (count == nullptr) return ORCH_INVALID;
  const auto& d = driver();
  if (!d.ok) return ORCH_DEVICE_ERROR;
  int n = 0;
  if (const orch_status st = map_error(d.get_device_count(&n)); st != ORCH_OK) return st;
  *count = n;
  return ORCH_OK;
}

orch_status hip_device_open(const orch_device_config* config, orch_device** out) {
  if (config == nullptr || out == nullptr || config->struct_size < sizeof(orch_device_config))
    return ORCH_INVALID;
  const auto& d = driver();
  if (!d.ok) return ORCH_DEVICE_ERROR;
  auto* dev = new (std::nothrow) orch_device;
  if (dev == nullptr) return ORCH_OOM_RETRYABLE;
  dev->ordinal = config->ordinal;
  size_t g = 0;
  const hipMemAllocationProp prop = prop_for(dev);
  orch_status st = ORCH_DEVICE_ERROR;
  {
    const device_scope scope(dev);
    if (scope) st = map_error(d.granularity(&g, &prop, hipMemAllocationGranularityRecommended));
  }
  if (st != ORCH_OK) {
    delete dev;
    return st;
  }
  dev->granularity = g;
  *out = dev;
  return ORCH_OK;
}

void hip_device_close(orch_device* dev) { delete dev; }

orch_status hip_total_mem(orch_device* dev, uint64_t* bytes) {
  if (dev == nullptr || bytes == nullptr) return ORCH_INVALID;
  size_t n = 0;
  const orch_status st = map_error(driver().device_total_mem(&n, dev->ordinal));
  *bytes = n;
  return st;
}

orch_status hip_granularity(orch_device* dev, uint64_t* bytes) {
  if (dev == nullptr || bytes == nullptr) return ORCH_INVALID;
  *bytes = dev->granularity;
  return ORCH_OK;
}

orch_status hip_mem_get_info(orch_device* dev, uint64_t* free_bytes, uint64_t* total_bytes) {
  if (free_bytes == nullptr || dev == nullptr) return ORCH_INVALID;
  const device_scope scope(dev);
  if (!scope) return ORCH_DEVICE_ERROR;
  size_t f = 0;
  size_t t = 0;
  const orch_status st = map_error(driver().mem_get_info(&f, &t));
  *free_bytes = f;
  if (total_bytes != nullptr) *total_bytes = t;
  return st;
}

orch_status hip_va_reserve(orch_device* dev, uint64_t size, uint64_t* va) {
  if (va == nullptr || size == 0 || dev == nullptr) return ORCH_INVALID;
  const device_scope scope(dev);
  if (!scope) return ORCH_DEVICE_ERROR;
  void* p = nullptr;
  const orch_status st =
      map_error(driver().address_reserve(&p, size, dev->granularity, nullptr, 0));
  *va = reinterpret_cast<uintptr_t>(p);
  return st;
}

orch_status hip_va_free(orch_device* dev, uint64_t va, uint64_t size) {
  if (dev == nullptr) return ORCH_INVALID;
  const device_scope scope(dev);
  if (!scope) return ORCH_DEVICE_ERROR;
  return map_error(driver().address_free(as_ptr(va), size));
}

orch_status hip_phys_create(orch_device* dev, uint64_t size, uint64_t* handle) {
  if (handle == nullptr || size == 0 || dev == nullptr) return ORCH_INVALID;
  const device_scope scope(dev);
  if (!scope) return ORCH_DEVICE_ERROR;
  const hipMemAllocationProp prop = prop_for(dev);
  hipMemGenericAllocationHandle_t h = nullptr;
  const orch_status st = map_error(driver().mem_create(&h, size, &prop, 0));
  *handle = reinterpret_cast<uintptr_t>(h);
  return st;
}

orch_status hip_phys_release(orch_device* dev, uint64_t handle) {
  if (dev == nullptr) return ORCH_INVALID;
  const device_scope scope(dev);
  if (!scope) return ORCH_DEVICE_ERROR;
  return map_error(driver().mem_release(
      reinterpret_cast<hipMemGenericAllocationHandle_t>(static_cast<uintptr_t>(handle))));
}

orch_status hip_map(orch_device* dev, uint64_t va, uint64_t size, uint64_t handle) {
  if (dev == nullptr) return ORCH_INVALID;
  const device_scope scope(dev);
  if (!scope) return ORCH_DEVICE_ERROR;
  const auto& d = driver();
  auto h = reinterpret_cast<hipMemGenericAllocationHandle_t>(static_cast<uintptr_t>(handle));
  if (const orch_status st = map_error(d.mem_map(as_ptr(va), size, 0, h, 0)); st != ORCH_OK)
    return st;
  hipMemAccessDesc access{};
  access.location.type = hipMemLocationTypeDevice;
  access.location.id = dev->ordinal;
  access.flags = hipMemAccessFlagsProtReadWrite;
  const orch_status st = map_error(d.mem_set_access(as_ptr(va), size, &access, 1));
  if (st != ORCH_OK) (void)d.mem_unmap(as_ptr(va), size);
  return st;
}

orch_status hip_unmap(orch_device* dev, uint64_t va, uint64_t size) {
  if (dev == nullptr) return ORCH_INVALID;
  const device_scope scope(dev);
  if (!scope) return ORCH_DEVICE_ERROR;
  return map_error(driver().mem_unmap(as_ptr(va), size));
}

orch_status hip_synchronize(orch_device* dev) {
  if (dev == nullptr) return ORCH_INVALID;
  const device_scope scope(dev);
  if (!scope) return ORCH_DEVICE_ERROR;
  return map_error(driver().device_synchronize());
}

orch_status hip_host_register(orch_device* dev, void* ptr, uint64_t size) {
  if (ptr == nullptr || size == 0 || dev == nullptr) return ORCH_INVALID;
  const device_scope scope(dev);
  if (!scope) return ORCH_DEVICE_ERROR;
  return map_error(driver().host_register(ptr, size, 0));
}

orch_status hip_host_unregister(orch_device* dev, void* ptr) {
  if (ptr == nullptr || dev == nullptr) return ORCH_INVALID;
  const device_scope scope(dev);
  if (!scope) return ORCH_DEVICE_ERROR;
  return map_error(driver().host_unregister(ptr));
}

// HIP_VERSION's encoding on AMD: major * 10000000 + minor * 100000 + patch (60241134 is 6.2).
orch_status hip_runtime_version(orch_device* dev, uint32_t* major, uint32_t* minor) {
  if (dev == nullptr || major == nullptr || minor == nullptr) return ORCH_INVALID;
  int v = 0;
  if (const orch_status st = map_error(driver().runtime_get_version(&v)); st != ORCH_OK) return st;
  if (v < 0) return ORCH_DEVICE_ERROR;
  *major = static_cast<uint32_t>(v / 10000000);
  *minor = static_cast<uint32_t>(v / 100000 % 100);
  return ORCH_OK;
}

constexpr orch_backend_api hip_api{
    sizeof(orch_backend_api), 0,
    hip_device_count, hip_device_open, hip_device_close, hip_total_mem, hip_granularity,
    hip_mem_get_info, hip_va_reserve, hip_va_free, hip_phys_create, hip_phys_release, hip_map,
    hip_unmap, hip_synchronize, hip_host_register, hip_host_unregister, nullptr, nullptr,
    hip_runtime_version};

}  // namespace

const orch_backend_api* hip_backend_api() noexcept { return &hip_api; }

}  // namespace orch::plugin_detail
