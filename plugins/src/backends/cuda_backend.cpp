// The cuda backend: the driver traits of vmm_backend.hpp. The driver is reached at run time:
// dlopen("libcuda.so.1"), then every entry point through cuGetProcAddress at the version of the
// prototype it is declared with (docs/references.md, aimdo §1.3: the "linkless" build; docs/gpu.md,
// "Driver versions"). cuda.h supplies types only, so a machine without a GPU builds
// and loads this plugin; device_count then answers ORCH_DEVICE_ERROR (no driver) or 0 devices.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <type_traits>

#include "backends.hpp"
#include "vmm_backend.hpp"

struct orch_device {};  // never instantiated: handles are vmm_backend<cuda_traits>::device

namespace orch::plugin_detail {
namespace {

// Each entry point is typed by the prototype cudaTypedefs.h gives for one CUDA version and asked
// for at that version (ORCH_CUDA_RESOLVE below names both once): cuGetProcAddress answers the
// newest variant introduced at or before the version asked, so asking at the headers'
// CUDA_VERSION would fail on every older driver (CUDA_ERROR_INVALID_VALUE) and, on a newer one,
// hand back a variant with another prototype (cuCtxSynchronize at 13000 takes a CUcontext).
struct cuda_driver {
  void* lib = nullptr;
  PFN_cuInit_v2000 init = nullptr;
  PFN_cuDriverGetVersion_v2020 driver_get_version = nullptr;
  PFN_cuDeviceGetCount_v2000 device_count = nullptr;
  PFN_cuDeviceGet_v2000 device_get = nullptr;
  PFN_cuDeviceTotalMem_v3020 device_total_mem = nullptr;
  PFN_cuDevicePrimaryCtxRetain_v7000 primary_ctx_retain = nullptr;
  PFN_cuDevicePrimaryCtxRelease_v11000 primary_ctx_release = nullptr;
  PFN_cuCtxPushCurrent_v4000 ctx_push_current = nullptr;
  PFN_cuCtxPopCurrent_v4000 ctx_pop_current = nullptr;
  PFN_cuCtxSynchronize_v2000 ctx_synchronize = nullptr;  // the current context's
  PFN_cuMemGetInfo_v3020 mem_get_info = nullptr;
  PFN_cuMemAddressReserve_v10020 address_reserve = nullptr;
  PFN_cuMemAddressFree_v10020 address_free = nullptr;
  PFN_cuMemCreate_v10020 mem_create = nullptr;
  PFN_cuMemRelease_v10020 mem_release = nullptr;
  PFN_cuMemMap_v10020 mem_map = nullptr;
  PFN_cuMemUnmap_v10020 mem_unmap = nullptr;
  PFN_cuMemSetAccess_v10020 mem_set_access = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 granularity = nullptr;
  PFN_cuMemHostRegister_v6050 host_register = nullptr;
  PFN_cuMemHostUnregister_v4000 host_unregister = nullptr;
  int version = 0;   // the driver's CUDA version (12080 is 12.8); 0 when none was reached
  bool ok = false;
  // What was found, or why it was refused, with room for the driver's path (up to PATH_MAX).
  char summary[2048] = "no CUDA driver reached yet";

  CUresult synchronize() const { return ctx_synchronize(); }
};

// The oldest driver the backend runs on: cuGetProcAddress_v2 and the R525 branch (CUDA 12.0).
constexpr int oldest_driver = 12000;

class proc_lookup {
 public:
  explicit proc_lookup(void* lib)
      : v2_(reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(lib, "cuGetProcAddress_v2"))),
        v1_(v2_ != nullptr
                ? nullptr
                : reinterpret_cast<PFN_cuGetProcAddress_v11030>(dlsym(lib, "cuGetProcAddress"))) {}
  bool usable() const { return v2_ != nullptr || v1_ != nullptr; }

  // The entry point `name` as introduced at `version` (or the newest variant before it).
  template <typename F>
  bool resolve(const char* name, int version, F& out) const {
    void* p = nullptr;
    CUresult rc = CUDA_ERROR_NOT_FOUND;
    if (v2_ != nullptr) {
      CUdriverProcAddressQueryResult q{};
      rc = v2_(name, &p, version, CU_GET_PROC_ADDRESS_DEFAULT, &q);
    } else if (v1_ != nullptr) {
      rc = v1_(name, &p, version, CU_GET_PROC_ADDRESS_DEFAULT);
    }
    if (rc != CUDA_SUCCESS || p == nullptr) return false;
    out = reinterpret_cast<F>(p);
    return true;
  }

 private:
  PFN_cuGetProcAddress_v12000 v2_;
  PFN_cuGetProcAddress_v11030 v1_;
};

// The field's type must be the prototype of `symbol` at `version`: a mismatch does not compile.
#define ORCH_CUDA_RESOLVE(lookup, d, field, symbol, ver)                                     \
  [&] {                                                                                      \
    static_assert(std::is_same_v<decltype(d.field), PFN_##symbol##_v##ver>);                 \
    if ((lookup).resolve(#symbol, ver, d.field)) return true;                                \
    std::snprintf(d.summary, sizeof d.summary,                                               \
                  "CUDA %d.%d driver lacks %s (CUDA %d.%d): the cuda backend cannot use it", \
                  d.version / 1000, d.version % 1000 / 10, #symbol, (ver) / 1000,            \
                  (ver) % 1000 / 10);                                                        \
    return false;                                                                            \
  }()

void load_driver(cuda_driver& d) {
  // $ORCH_CUDA_DRIVER names another driver file: the tests' stand-in (docs/gpu.md).
  const char* path = std::getenv("ORCH_CUDA_DRIVER");
  const char* file = path != nullptr && *path != '\0' ? path : "libcuda.so.1";
  d.lib = dlopen(file, RTLD_NOW | RTLD_LOCAL);
  if (d.lib == nullptr) {
    std::snprintf(d.summary, sizeof d.summary, "no CUDA driver (%s not found)", file);
    return;
  }
  const proc_lookup lookup(d.lib);
  if (!lookup.usable() ||
      !lookup.resolve("cuDriverGetVersion", 2020, d.driver_get_version) ||
      d.driver_get_version(&d.version) != CUDA_SUCCESS) {
    std::snprintf(d.summary, sizeof d.summary,
                  "%s has no cuGetProcAddress or cuDriverGetVersion: not a CUDA driver the cuda "
                  "backend can use (it needs CUDA %d.%d or newer)",
                  file, oldest_driver / 1000, oldest_driver % 1000 / 10);
    return;
  }
  if (d.version < oldest_driver) {
    std::snprintf(d.summary, sizeof d.summary,
                  "CUDA %d.%d driver found; the cuda backend needs CUDA %d.%d (R525) or newer: "
                  "update the NVIDIA driver",
                  d.version / 1000, d.version % 1000 / 10, oldest_driver / 1000,
                  oldest_driver % 1000 / 10);
    return;
  }
  const bool all =
      ORCH_CUDA_RESOLVE(lookup, d, init, cuInit, 2000) &&
      ORCH_CUDA_RESOLVE(lookup, d, device_count, cuDeviceGetCount, 2000) &&
      ORCH_CUDA_RESOLVE(lookup, d, device_get, cuDeviceGet, 2000) &&
      ORCH_CUDA_RESOLVE(lookup, d, device_total_mem, cuDeviceTotalMem, 3020) &&
      ORCH_CUDA_RESOLVE(lookup, d, primary_ctx_retain, cuDevicePrimaryCtxRetain, 7000) &&
      ORCH_CUDA_RESOLVE(lookup, d, primary_ctx_release, cuDevicePrimaryCtxRelease, 11000) &&
      ORCH_CUDA_RESOLVE(lookup, d, ctx_push_current, cuCtxPushCurrent, 4000) &&
      ORCH_CUDA_RESOLVE(lookup, d, ctx_pop_current, cuCtxPopCurrent, 4000) &&
      ORCH_CUDA_RESOLVE(lookup, d, ctx_synchronize, cuCtxSynchronize, 2000) &&
      ORCH_CUDA_RESOLVE(lookup, d, mem_get_info, cuMemGetInfo, 3020) &&
      // Virtual memory management: CUDA 10.2.
      ORCH_CUDA_RESOLVE(lookup, d, address_reserve, cuMemAddressReserve, 10020) &&
      ORCH_CUDA_RESOLVE(lookup, d, address_free, cuMemAddressFree, 10020) &&
      ORCH_CUDA_RESOLVE(lookup, d, mem_create, cuMemCreate, 10020) &&
      ORCH_CUDA_RESOLVE(lookup, d, mem_release, cuMemRelease, 10020) &&
      ORCH_CUDA_RESOLVE(lookup, d, mem_map, cuMemMap, 10020) &&
      ORCH_CUDA_RESOLVE(lookup, d, mem_unmap, cuMemUnmap, 10020) &&
      ORCH_CUDA_RESOLVE(lookup, d, mem_set_access, cuMemSetAccess, 10020) &&
      ORCH_CUDA_RESOLVE(lookup, d, granularity, cuMemGetAllocationGranularity, 10020) &&
      // Host registration: cuMemHostRegister's 6.5 prototype (size_t bytes).
      ORCH_CUDA_RESOLVE(lookup, d, host_register, cuMemHostRegister, 6050) &&
      ORCH_CUDA_RESOLVE(lookup, d, host_unregister, cuMemHostUnregister, 4000);
  if (!all) return;
  if (const CUresult rc = d.init(0); rc != CUDA_SUCCESS) {
    std::snprintf(d.summary, sizeof d.summary, "CUDA %d.%d driver found; cuInit failed (%d)",
                  d.version / 1000, d.version % 1000 / 10, static_cast<int>(rc));
    return;
  }
  std::snprintf(d.summary, sizeof d.summary, "CUDA %d.%d driver (%s)", d.version / 1000,
                d.version % 1000 / 10, file);
  d.ok = true;
}

struct cuda_traits {
  using result = CUresult;
  static constexpr result success = CUDA_SUCCESS;
  static constexpr result out_of_memory = CUDA_ERROR_OUT_OF_MEMORY;
  static constexpr result invalid_value = CUDA_ERROR_INVALID_VALUE;
  static constexpr result not_supported = CUDA_ERROR_NOT_SUPPORTED;
  static constexpr CUmemAllocationGranularity_flags granularity_recommended =
      CU_MEM_ALLOC_GRANULARITY_RECOMMENDED;
  using va = CUdeviceptr;
  using handle = CUmemGenericAllocationHandle;
  using driver_table = cuda_driver;

  static const cuda_driver& driver() {
    static cuda_driver d;
    static std::once_flag once;
    std::call_once(once, [] { load_driver(d); });
    return d;
  }

  // Each device retains its primary context for as long as it is open.
  struct device_state {
    CUdevice dev = 0;
    CUcontext ctx = nullptr;
  };
  static result open(const cuda_driver& d, int32_t ordinal, device_state& s) {
    const result rc = d.device_get(&s.dev, ordinal);
    return rc == CUDA_SUCCESS ? d.primary_ctx_retain(&s.ctx, s.dev) : rc;
  }
  static void close(const cuda_driver& d, const device_state& s) { d.primary_ctx_release(s.dev); }

  // The device's primary context, pushed for the call and popped on every way out, so the
  // caller's own current context (torch's, say) is what it finds afterwards. A push that fails
  // is a device error.
  class scope {
   public:
    scope(const cuda_driver& d, int32_t /*ordinal*/, const device_state& s) noexcept
        : d_(d), entered_(d.ctx_push_current(s.ctx) == CUDA_SUCCESS) {}
    ~scope() {
      CUcontext popped = nullptr;
      if (entered_) (void)d_.ctx_pop_current(&popped);
    }
    scope(const scope&) = delete;
    scope& operator=(const scope&) = delete;
    explicit operator bool() const noexcept { return entered_; }

   private:
    const cuda_driver& d_;
    bool entered_;
  };

  static va to_va(uint64_t v) { return v; }
  static uint64_t from_va(va v) { return v; }
  static handle to_handle(uint64_t h) { return h; }
  static uint64_t from_handle(handle h) { return h; }

  static CUmemAllocationProp allocation_prop(int32_t ordinal) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = ordinal;
    return prop;
  }
  static CUmemAccessDesc access_desc(int32_t ordinal) {
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = ordinal;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return access;
  }

  static result total_mem(const cuda_driver& d, int32_t /*ordinal*/, const device_state& s,
                          size_t* bytes) {
    return d.device_total_mem(bytes, s.dev);
  }

  // The driver's CUDA version: 12080 is 12.8.
  static result runtime_version(const cuda_driver& d, int* v) { return d.driver_get_version(v); }
  static void decode_version(int v, uint32_t* major, uint32_t* minor) {
    *major = static_cast<uint32_t>(v / 1000);
    *minor = static_cast<uint32_t>(v % 1000 / 10);
  }
};

}  // namespace

const orch_backend_api* cuda_backend_api() noexcept { return vmm_backend<cuda_traits>::api(); }

const char* cuda_driver_summary() noexcept { return cuda_traits::driver().summary; }

}  // namespace orch::plugin_detail
