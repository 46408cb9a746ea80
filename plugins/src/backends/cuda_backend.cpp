// The cuda backend: the driver traits of vmm_backend.hpp. The driver is reached at run time:
// dlopen("libcuda.so.1"), then every entry point through cuGetProcAddress (docs/references.md,
// aimdo §1.3: the "linkless" build). cuda.h supplies types only, so a machine without a GPU builds
// and loads this plugin; device_count then answers ORCH_DEVICE_ERROR (no driver) or 0 devices.
#include <cuda.h>
#include <dlfcn.h>

#include <mutex>

#include "backends.hpp"
#include "vmm_backend.hpp"

struct orch_device {};  // never instantiated: handles are vmm_backend<cuda_traits>::device

namespace orch::plugin_detail {
namespace {

struct cuda_driver {
  void* lib = nullptr;
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*driver_get_version)(int*) = nullptr;
  CUresult (*device_count)(int*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*device_total_mem)(size_t*, CUdevice) = nullptr;
  CUresult (*primary_ctx_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*primary_ctx_release)(CUdevice) = nullptr;
  CUresult (*ctx_push_current)(CUcontext) = nullptr;
  CUresult (*ctx_pop_current)(CUcontext*) = nullptr;
  CUresult (*synchronize)() = nullptr;  // cuCtxSynchronize
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
    std::call_once(once, [] {
      d.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
      if (d.lib == nullptr) return;
      auto v2 = reinterpret_cast<get_proc_v2_fn>(dlsym(d.lib, "cuGetProcAddress_v2"));
      auto v1 = v2 != nullptr ? nullptr
                              : reinterpret_cast<get_proc_v1_fn>(dlsym(d.lib, "cuGetProcAddress"));
      d.ok = resolve(v2, v1, "cuInit", d.init) &&
             resolve(v2, v1, "cuDriverGetVersion", d.driver_get_version) &&
             resolve(v2, v1, "cuDeviceGetCount", d.device_count) &&
             resolve(v2, v1, "cuDeviceGet", d.device_get) &&
             resolve(v2, v1, "cuDeviceTotalMem", d.device_total_mem) &&
             resolve(v2, v1, "cuDevicePrimaryCtxRetain", d.primary_ctx_retain) &&
             resolve(v2, v1, "cuDevicePrimaryCtxRelease", d.primary_ctx_release) &&
             resolve(v2, v1, "cuCtxPushCurrent", d.ctx_push_current) &&
             resolve(v2, v1, "cuCtxPopCurrent", d.ctx_pop_current) &&
             resolve(v2, v1, "cuCtxSynchronize", d.synchronize) &&
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
             resolve(v2, v1, "cuMemHostUnregister", d.host_unregister) &&
             d.init(0) == CUDA_SUCCESS;
    });
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

}  // namespace orch::plugin_detail
