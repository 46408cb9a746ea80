// A stand-in for libamdhip64.so (docs/gpu.md, "The driver stand-ins"): the HIP runtime entry points
// the hip backend uses, exported by name as the real runtime exports them (the backend resolves
// them with dlsym), over standin_device.hpp's bookkeeping. Each is defined against the installed
// hip_runtime_api.h, so a prototype that drifts from the header does not compile.
//
// The runtime's version is $ORCH_STANDIN_HIP_VERSION in HIP_VERSION's encoding (60200000 is 6.2,
// the default; 50200000 is Debian's ROCm 5.2), its devices $ORCH_STANDIN_HIP_DEVICES (default 1),
// their memory $ORCH_STANDIN_HIP_MEMORY bytes each (default 8 GiB). The current device is per
// thread, as HIP's is. Faults, other processes' usage and a device's size come through
// standin_control.h. Never installed: the backend is pointed at
// this file by $ORCH_HIP_RUNTIME.
#define __HIP_PLATFORM_AMD__ 1
#include <hip/hip_runtime_api.h>

#include <mutex>

#include "standin_control.h"
#include "standin_device.hpp"

#define STANDIN_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using orch::standin::device_model;
using orch::standin::env_u64;
using orch::standin::outcome;

struct runtime_state {
  std::mutex mutex;
  int version = static_cast<int>(env_u64("ORCH_STANDIN_HIP_VERSION", 60200000));
  int devices = static_cast<int>(env_u64("ORCH_STANDIN_HIP_DEVICES", 1));
  device_model model{devices, env_u64("ORCH_STANDIN_HIP_MEMORY", 8ull << 30)};
  bool initialised = false;
};

runtime_state& state() {
  // Never destroyed: a plugin may call in from its own static destructors at exit.
  static auto* s = new runtime_state;
  return *s;
}

thread_local int current_device = 0;

hipError_t to_hip(outcome o) {
  switch (o) {
    case outcome::ok: return hipSuccess;
    case outcome::oom: return hipErrorOutOfMemory;
    case outcome::not_registered: return hipErrorHostMemoryNotRegistered;
    case outcome::already_registered: return hipErrorHostMemoryAlreadyRegistered;
    case outcome::invalid: break;
  }
  return hipErrorInvalidValue;
}

hipError_t gate(runtime_state& s, const char* entry) {
  if (const int st = s.model.injected(entry); st != 0) return static_cast<hipError_t>(st);
  if (s.model.lost) return hipErrorNoDevice;
  if (!s.initialised) return hipErrorNotInitialized;
  return hipSuccess;
}

uint64_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

}  // namespace

#define GATE(name)                                                   \
  runtime_state& s = state();                                        \
  std::lock_guard lock(s.mutex);                                     \
  if (const hipError_t g = gate(s, name); g != hipSuccess) return g

STANDIN_EXPORT hipError_t hipInit(unsigned int flags) {
  runtime_state& s = state();
  std::lock_guard lock(s.mutex);
  if (const int st = s.model.injected("hipInit"); st != 0) return static_cast<hipError_t>(st);
  if (flags != 0) return hipErrorInvalidValue;
  s.initialised = true;
  return hipSuccess;
}

STANDIN_EXPORT hipError_t hipRuntimeGetVersion(int* v) {
  if (v == nullptr) return hipErrorInvalidValue;
  *v = state().version;
  return hipSuccess;
}

STANDIN_EXPORT hipError_t hipGetDeviceCount(int* count) {
  GATE("hipGetDeviceCount");
  if (count == nullptr) return hipErrorInvalidValue;
  *count = s.devices;
  return hipSuccess;
}

STANDIN_EXPORT hipError_t hipSetDevice(int device) {
  GATE("hipSetDevice");
  if (device < 0 || device >= s.devices) return hipErrorInvalidDevice;
  current_device = device;
  return hipSuccess;
}

STANDIN_EXPORT hipError_t hipGetDevice(int* device) {
  GATE("hipGetDevice");
  if (device == nullptr) return hipErrorInvalidValue;
  *device = current_device;
  return hipSuccess;
}

STANDIN_EXPORT hipError_t hipDeviceTotalMem(size_t* bytes, hipDevice_t device) {
  GATE("hipDeviceTotalMem");
  if (bytes == nullptr) return hipErrorInvalidValue;
  if (device < 0 || device >= s.devices) return hipErrorInvalidDevice;
  *bytes = s.model.total(device);
  return hipSuccess;
}

STANDIN_EXPORT hipError_t hipMemGetInfo(size_t* free_bytes, size_t* total) {
  GATE("hipMemGetInfo");
  if (free_bytes == nullptr || total == nullptr) return hipErrorInvalidValue;
  if (!s.model.has(current_device)) return hipErrorInvalidDevice;
  *free_bytes = s.model.free_bytes(current_device);
  *total = s.model.total(current_device);
  return hipSuccess;
}

STANDIN_EXPORT hipError_t hipDeviceSynchronize(void) {
  runtime_state& s = state();
  std::lock_guard lock(s.mutex);
  if (const int st = s.model.injected("hipDeviceSynchronize"); st != 0) {
    s.model.synced(false);
    return static_cast<hipError_t>(st);
  }
  if (s.model.lost) {
    s.model.synced(false);
    return hipErrorNoDevice;
  }
  if (!s.initialised) return hipErrorNotInitialized;
  s.model.synced(true);
  return hipSuccess;
}

STANDIN_EXPORT hipError_t hipMemAddressReserve(void** ptr, size_t size, size_t alignment,
                                               void* /*addr*/, unsigned long long flags) {
  GATE("hipMemAddressReserve");
  if (ptr == nullptr || flags != 0) return hipErrorInvalidValue;
  uint64_t va = 0;
  const hipError_t rc = to_hip(s.model.reserve(size, alignment, &va));
  if (rc == hipSuccess) *ptr = reinterpret_cast<void*>(static_cast<uintptr_t>(va));
  return rc;
}

STANDIN_EXPORT hipError_t hipMemAddressFree(void* ptr, size_t size) {
  GATE("hipMemAddressFree");
  return to_hip(s.model.address_free(addr(ptr), size));
}

STANDIN_EXPORT hipError_t hipMemCreate(hipMemGenericAllocationHandle_t* handle, size_t size,
                                       const hipMemAllocationProp* prop,
                                       unsigned long long flags) {
  GATE("hipMemCreate");
  if (handle == nullptr || prop == nullptr || flags != 0) return hipErrorInvalidValue;
  if (prop->type != hipMemAllocationTypePinned || prop->location.type != hipMemLocationTypeDevice)
    return hipErrorInvalidValue;
  uint64_t h = 0;
  const hipError_t rc = to_hip(s.model.create(size, prop->location.id, &h));
  // A handle is an opaque pointer to HIP: the stand-in's are small numbers, never dereferenced.
  if (rc == hipSuccess)
    *handle = reinterpret_cast<hipMemGenericAllocationHandle_t>(static_cast<uintptr_t>(h));
  return rc;
}

STANDIN_EXPORT hipError_t hipMemRelease(hipMemGenericAllocationHandle_t handle) {
  GATE("hipMemRelease");
  return to_hip(s.model.release(addr(handle)));
}

STANDIN_EXPORT hipError_t hipMemMap(void* ptr, size_t size, size_t offset,
                                    hipMemGenericAllocationHandle_t handle,
                                    unsigned long long flags) {
  GATE("hipMemMap");
  if (flags != 0) return hipErrorInvalidValue;
  return to_hip(s.model.map(addr(ptr), size, offset, addr(handle)));
}

STANDIN_EXPORT hipError_t hipMemUnmap(void* ptr, size_t size) {
  GATE("hipMemUnmap");
  return to_hip(s.model.unmap(addr(ptr), size));
}

STANDIN_EXPORT hipError_t hipMemSetAccess(void* ptr, size_t size, const hipMemAccessDesc* desc,
                                          size_t count) {
  GATE("hipMemSetAccess");
  if (desc == nullptr || count == 0) return hipErrorInvalidValue;
  for (size_t i = 0; i < count; ++i)
    if (desc[i].location.type != hipMemLocationTypeDevice || desc[i].location.id < 0 ||
        desc[i].location.id >= s.devices)
      return hipErrorInvalidDevice;
  return to_hip(s.model.set_access(addr(ptr), size));
}

STANDIN_EXPORT hipError_t hipMemGetAllocationGranularity(size_t* granularity,
                                                         const hipMemAllocationProp* prop,
                                                         hipMemAllocationGranularity_flags option) {
  GATE("hipMemGetAllocationGranularity");
  if (granularity == nullptr || prop == nullptr) return hipErrorInvalidValue;
  if (option != hipMemAllocationGranularityMinimum &&
      option != hipMemAllocationGranularityRecommended)
    return hipErrorInvalidValue;
  *granularity = device_model::granule;
  return hipSuccess;
}

STANDIN_EXPORT hipError_t hipHostRegister(void* p, size_t size, unsigned int /*flags*/) {
  GATE("hipHostRegister");
  return to_hip(s.model.host_register(p, size));
}

STANDIN_EXPORT hipError_t hipHostUnregister(void* p) {
  GATE("hipHostUnregister");
  return to_hip(s.model.host_unregister(p));
}

STANDIN_EXPORT void orch_standin_hip_fail(const char* entry, int status, int count) {
  runtime_state& s = state();
  std::lock_guard lock(s.mutex);
  s.model.fail(entry, status, count);
}
STANDIN_EXPORT void orch_standin_hip_lose_device() {
  runtime_state& s = state();
  std::lock_guard lock(s.mutex);
  s.model.lost = true;
}
STANDIN_EXPORT void orch_standin_hip_stats(orch_standin_stats* out) {
  runtime_state& s = state();
  std::lock_guard lock(s.mutex);
  *out = s.model.stats();
}
STANDIN_EXPORT int orch_standin_hip_set_other_usage(int device, uint64_t bytes) {
  runtime_state& s = state();
  std::lock_guard lock(s.mutex);
  return s.model.set_other_usage(device, bytes) ? 0 : -1;
}
STANDIN_EXPORT int orch_standin_hip_set_memory(int device, uint64_t bytes) {
  runtime_state& s = state();
  std::lock_guard lock(s.mutex);
  return s.model.set_total(device, bytes) ? 0 : -1;
}
STANDIN_EXPORT int orch_standin_hip_memory(int device, orch_standin_memory* out) {
  runtime_state& s = state();
  std::lock_guard lock(s.mutex);
  return s.model.memory(device, out) ? 0 : -1;
}
