// The hip backend: the driver traits of vmm_backend.hpp, the cuda backend's twin over
// libamdhip64, loaded at run time with dlopen, resolved with dlsym (docs/references.md, aimdo §1.4:
// aimdo's src-hip/dispatch.c does the same). It uses the HIP virtual memory API
// (hipMemAddressReserve / hipMemCreate / hipMemMap / hipMemSetAccess), which the headers declare
// from ROCm 5.2 (HIP_VERSION 5.2); at run time the driver must implement it (ROCm 6.x for real
// VMM support, see docs/plugin-abi.md).
#define __HIP_PLATFORM_AMD__ 1
#include <dlfcn.h>
#include <hip/hip_runtime_api.h>

#include <mutex>

#include "backends.hpp"
#include "vmm_backend.hpp"

struct orch_device {};  // never instantiated: handles are vmm_backend<hip_traits>::device

namespace orch::plugin_detail {
namespace {

struct hip_driver {
  void* lib = nullptr;
  hipError_t (*init)(unsigned) = nullptr;
  hipError_t (*runtime_get_version)(int*) = nullptr;
  hipError_t (*device_count)(int*) = nullptr;  // hipGetDeviceCount
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
  hipError_t (*synchronize)() = nullptr;  // hipDeviceSynchronize
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

struct hip_traits {
  using result = hipError_t;
  static constexpr result success = hipSuccess;
  static constexpr result out_of_memory = hipErrorOutOfMemory;
  static constexpr result invalid_value = hipErrorInvalidValue;
  static constexpr result not_supported = hipErrorNotSupported;
  static constexpr hipMemAllocationGranularity_flags granularity_recommended =
      hipMemAllocationGranularityRecommended;
  using va = void*;
  using handle = hipMemGenericAllocationHandle_t;
  using driver_table = hip_driver;

  static const hip_driver& driver() {
    static hip_driver d;
    static std::once_flag once;
    std::call_once(once, [] {
      for (const char* name : {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"}) {
        d.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (d.lib != nullptr) break;
      }
      if (d.lib == nullptr) return;
      void* l = d.lib;
      d.ok = resolve(l, "hipInit", d.init) && resolve(l, "hipGetDeviceCount", d.device_count) &&
             resolve(l, "hipRuntimeGetVersion", d.runtime_get_version) &&
             resolve(l, "hipSetDevice", d.set_device) &&
             resolve(l, "hipGetDevice", d.get_device) &&
             resolve(l, "hipDeviceTotalMem", d.device_total_mem) &&
             resolve(l, "hipMemGetInfo", d.mem_get_info) &&
             resolve(l, "hipMemAddressReserve", d.address_reserve) &&
             resolve(l, "hipMemAddressFree", d.address_free) &&
             resolve(l, "hipMemCreate", d.mem_create) &&
             resolve(l, "hipMemRelease", d.mem_release) && resolve(l, "hipMemMap", d.mem_map) &&
             resolve(l, "hipMemUnmap", d.mem_unmap) &&
             resolve(l, "hipMemSetAccess", d.mem_set_access) &&
             resolve(l, "hipMemGetAllocationGranularity", d.granularity) &&
             resolve(l, "hipDeviceSynchronize", d.synchronize) &&
             resolve(l, "hipHostRegister", d.host_register) &&
             resolve(l, "hipHostUnregister", d.host_unregister) && d.init(0) == hipSuccess;
    });
    return d;
  }

  // A device is its ordinal: nothing to hold while it is open.
  struct device_state {};
  static result open(const hip_driver& /*d*/, int32_t /*ordinal*/, device_state& /*s*/) {
    return hipSuccess;
  }
  static void close(const hip_driver& /*d*/, const device_state& /*s*/) {}

  // The device selected for the call: the caller's current device (torch's, say) is saved on
  // entry and restored on every way out. A failed save or select is a device error.
  class scope {
   public:
    scope(const hip_driver& d, int32_t ordinal, const device_state& /*s*/) noexcept : d_(d) {
      if (d.get_device(&previous_) != hipSuccess) return;
      entered_ = previous_ == ordinal || d.set_device(ordinal) == hipSuccess;
      switched_ = entered_ && previous_ != ordinal;
    }
    ~scope() {
      if (switched_) (void)d_.set_device(previous_);  // nothing to do if it fails
    }
    scope(const scope&) = delete;
    scope& operator=(const scope&) = delete;
    explicit operator bool() const noexcept { return entered_; }

   private:
    const hip_driver& d_;
    int previous_ = 0;
    bool entered_ = false;
    bool switched_ = false;
  };

  static va to_va(uint64_t v) { return reinterpret_cast<void*>(static_cast<uintptr_t>(v)); }
  static uint64_t from_va(va v) { return reinterpret_cast<uintptr_t>(v); }
  static handle to_handle(uint64_t h) {
    return reinterpret_cast<hipMemGenericAllocationHandle_t>(static_cast<uintptr_t>(h));
  }
  static uint64_t from_handle(handle h) { return reinterpret_cast<uintptr_t>(h); }

  static hipMemAllocationProp allocation_prop(int32_t ordinal) {
    hipMemAllocationProp prop{};
    prop.type = hipMemAllocationTypePinned;
    prop.location.type = hipMemLocationTypeDevice;
    prop.location.id = ordinal;
    return prop;
  }
  static hipMemAccessDesc access_desc(int32_t ordinal) {
    hipMemAccessDesc access{};
    access.location.type = hipMemLocationTypeDevice;
    access.location.id = ordinal;
    access.flags = hipMemAccessFlagsProtReadWrite;
    return access;
  }

  static result total_mem(const hip_driver& d, int32_t ordinal, const device_state& /*s*/,
                          size_t* bytes) {
    return d.device_total_mem(bytes, ordinal);
  }

  // HIP_VERSION's encoding on AMD: major * 10000000 + minor * 100000 + patch (60241134 is 6.2).
  static result runtime_version(const hip_driver& d, int* v) { return d.runtime_get_version(v); }
  static void decode_version(int v, uint32_t* major, uint32_t* minor) {
    *major = static_cast<uint32_t>(v / 10000000);
    *minor = static_cast<uint32_t>(v / 100000 % 100);
  }
};

}  // namespace

const orch_backend_api* hip_backend_api() noexcept { return vmm_backend<hip_traits>::api(); }

}  // namespace orch::plugin_detail
