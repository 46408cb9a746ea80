// The hip backend: the driver traits of vmm_backend.hpp, the cuda backend's twin over
// libamdhip64, loaded at run time with dlopen, resolved with dlsym (docs/references.md, aimdo §1.4:
// aimdo's src-hip/dispatch.c does the same). It uses the HIP virtual memory API
// (hipMemAddressReserve / hipMemCreate / hipMemMap / hipMemSetAccess), which the headers declare
// from ROCm 5.2 (HIP_VERSION 5.2); at run time the runtime must implement it, so the backend
// takes the newest runtime of ROCm 6.0 or later and refuses an older one by name (docs/gpu.md).
#define __HIP_PLATFORM_AMD__ 1
#include <dlfcn.h>
#include <hip/hip_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

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
  int version = 0;
  bool ok = false;
  // What was found, or why it was refused. Room for the paths it names (up to PATH_MAX each), and
  // what to do comes before them, so that even a cut message says it.
  char summary[2048] = "no ROCm runtime reached yet";
};

template <typename F>
bool resolve(void* lib, const char* name, F& out) {
  void* p = dlsym(lib, name);
  if (p == nullptr) return false;
  out = reinterpret_cast<F>(p);
  return true;
}

// HIP_VERSION's encoding on AMD: major * 10000000 + minor * 100000 + patch (60241134 is 6.2).
constexpr int oldest_runtime = 60000000;  // ROCm 6.0: the virtual memory calls work from there
int major_of(int v) { return v / 10000000; }
int minor_of(int v) { return v / 100000 % 100; }

// Resolves every entry point of an opened runtime; false names the first one missing.
bool resolve_all(hip_driver& d, const char*& missing) {
  void* l = d.lib;
  const auto need = [&](const char* name, auto& out) {
    if (resolve(l, name, out)) return true;
    missing = name;
    return false;
  };
  return need("hipInit", d.init) && need("hipGetDeviceCount", d.device_count) &&
         need("hipSetDevice", d.set_device) && need("hipGetDevice", d.get_device) &&
         need("hipDeviceTotalMem", d.device_total_mem) && need("hipMemGetInfo", d.mem_get_info) &&
         need("hipMemAddressReserve", d.address_reserve) &&
         need("hipMemAddressFree", d.address_free) && need("hipMemCreate", d.mem_create) &&
         need("hipMemRelease", d.mem_release) && need("hipMemMap", d.mem_map) &&
         need("hipMemUnmap", d.mem_unmap) && need("hipMemSetAccess", d.mem_set_access) &&
         need("hipMemGetAllocationGranularity", d.granularity) &&
         need("hipDeviceSynchronize", d.synchronize) &&
         need("hipHostRegister", d.host_register) && need("hipHostUnregister", d.host_unregister);
}

// The newest ROCm runtime that has what the backend needs (>= 6.0, every entry point): Debian
// installs ROCm 5.2's as libamdhip64.so beside a ROCm 6 one, so the unversioned name alone would
// take the old one. $ORCH_HIP_RUNTIME names the one file to use instead: the tests' stand-in.
void load_runtime(hip_driver& d) {
  const char* path = std::getenv("ORCH_HIP_RUNTIME");
  const bool named = path != nullptr && *path != '\0';
  const char* const system[] = {"libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so",
                                "libamdhip64.so.5"};
  const char* const* first = named ? &path : system;
  const size_t count = named ? 1 : sizeof system / sizeof system[0];
  std::string found;  // what was tried and refused, for the message
  for (size_t i = 0; i < count; ++i) {
    void* lib = dlopen(first[i], RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) continue;
    d = hip_driver{};
    d.lib = lib;
    int v = 0;
    const char* missing = nullptr;
    if (!resolve(lib, "hipRuntimeGetVersion", d.runtime_get_version) ||
        d.runtime_get_version(&v) != hipSuccess) {
      found += std::string(found.empty() ? "" : ", ") + first[i] + " (no version)";
    } else if (v < oldest_runtime) {
      found += std::string(found.empty() ? "" : ", ") + "ROCm " + std::to_string(major_of(v)) +
               "." + std::to_string(minor_of(v)) + " (" + first[i] + ")";
    } else if (!resolve_all(d, missing)) {
      found += std::string(found.empty() ? "" : ", ") + first[i] + " (no " + missing + ")";
    } else {
      d.version = v;
      if (const hipError_t rc = d.init(0); rc != hipSuccess) {
        std::snprintf(d.summary, sizeof d.summary, "ROCm %d.%d runtime (%s): hipInit failed (%d)",
                      major_of(v), minor_of(v), first[i], static_cast<int>(rc));
        return;  // the runtime is right; its devices are not there
      }
      std::snprintf(d.summary, sizeof d.summary, "ROCm %d.%d runtime (%s)", major_of(v),
                    minor_of(v), first[i]);
      d.ok = true;
      return;
    }
    // A refused runtime stays loaded: it has run its initialisers, and unloading it would strand
    // what they allocated (LeakSanitizer reports it) and any exit handler they registered.
    d = hip_driver{};
  }
  if (found.empty())
    std::snprintf(d.summary, sizeof d.summary, "no ROCm runtime (%s not found)",
                  named ? path : "libamdhip64.so.7, .so.6, .so, .so.5");
  else
    std::snprintf(d.summary, sizeof d.summary,
                  "no ROCm runtime the hip backend can use: it needs ROCm %d.%d or newer (its "
                  "virtual memory calls): install ROCm 6; found %s",
                  major_of(oldest_runtime), minor_of(oldest_runtime), found.c_str());
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
    std::call_once(once, [] { load_runtime(d); });
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

  static result runtime_version(const hip_driver& d, int* v) { return d.runtime_get_version(v); }
  static void decode_version(int v, uint32_t* major, uint32_t* minor) {
    *major = static_cast<uint32_t>(major_of(v));
    *minor = static_cast<uint32_t>(minor_of(v));
  }
};

}  // namespace

const orch_backend_api* hip_backend_api() noexcept { return vmm_backend<hip_traits>::api(); }

const char* hip_runtime_summary() noexcept { return hip_traits::driver().summary; }

}  // namespace orch::plugin_detail
