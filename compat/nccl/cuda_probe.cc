#include "cuda_probe.h"

#include <dlfcn.h>

#include <cstdint>
#include <mutex>

namespace braid::ncclshim {
namespace {

// The few driver API entry points used, with the driver's documented C signatures.
using CuResult = int;
using CuDevicePtr = unsigned long long;
using CuInitFn = CuResult (*)(unsigned int);
using CuPointerGetAttributeFn = CuResult (*)(void*, int, CuDevicePtr);
using CuCtxGetCurrentFn = CuResult (*)(void**);
using CuMemAllocFn = CuResult (*)(CuDevicePtr*, size_t);
using CuMemFreeFn = CuResult (*)(CuDevicePtr);

constexpr int kPointerAttributeMemoryType = 2;  // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr unsigned kMemoryTypeDevice = 2;       // CU_MEMORYTYPE_DEVICE
constexpr unsigned kMemoryTypeUnified = 4;      // CU_MEMORYTYPE_UNIFIED

struct Driver {
  CuPointerGetAttributeFn pointerGetAttribute = nullptr;
  CuCtxGetCurrentFn ctxGetCurrent = nullptr;
  CuMemAllocFn memAlloc = nullptr;
  CuMemFreeFn memFree = nullptr;
  bool ok = false;
};

const Driver& driver() {
  static Driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;  // no driver: a host-only machine
    auto init = reinterpret_cast<CuInitFn>(dlsym(lib, "cuInit"));
    d.pointerGetAttribute =
        reinterpret_cast<CuPointerGetAttributeFn>(dlsym(lib, "cuPointerGetAttribute"));
    d.ctxGetCurrent = reinterpret_cast<CuCtxGetCurrentFn>(dlsym(lib, "cuCtxGetCurrent"));
    d.memAlloc = reinterpret_cast<CuMemAllocFn>(dlsym(lib, "cuMemAlloc_v2"));
    d.memFree = reinterpret_cast<CuMemFreeFn>(dlsym(lib, "cuMemFree_v2"));
    d.ok = init != nullptr && d.pointerGetAttribute != nullptr && d.ctxGetCurrent != nullptr &&
           d.memAlloc != nullptr && d.memFree != nullptr && init(0) == 0;
  });
  return d;
}

}  // namespace

bool isDevicePointer(const void* ptr) {
  const Driver& d = driver();
  if (!d.ok || ptr == nullptr) return false;
  unsigned memoryType = 0;
  // Plain host memory is unknown to the driver: the query fails, which means host.
  if (d.pointerGetAttribute(&memoryType, kPointerAttributeMemoryType,
                            reinterpret_cast<uintptr_t>(ptr)) != 0) {
    return false;
  }
  return memoryType == kMemoryTypeDevice || memoryType == kMemoryTypeUnified;
}

bool hasCurrentContext() {
  const Driver& d = driver();
  void* context = nullptr;
  return d.ok && d.ctxGetCurrent(&context) == 0 && context != nullptr;
}

void* deviceAlloc(size_t bytes) {
  const Driver& d = driver();
  if (!d.ok) return nullptr;
  CuDevicePtr ptr = 0;
  if (d.memAlloc(&ptr, bytes) != 0) return nullptr;
  return reinterpret_cast<void*>(static_cast<uintptr_t>(ptr));
}

bool deviceFree(void* ptr) {
  const Driver& d = driver();
  return d.ok && d.memFree(reinterpret_cast<uintptr_t>(ptr)) == 0;
}

}  // namespace braid::ncclshim
