#include "device/device_memory.h"

#include <atomic>
#include <mutex>
#include <string>

#include "braid_build_config.h"
#include "executor/call.h"

#if BRAID_HAVE_CUDA
#include <dlfcn.h>
#include <link.h>

#include <cstddef>

#include "kernels/cuda/cuda_check.h"
#endif

namespace braid {
namespace {

std::atomic<bool> gClassifierSet{false};
std::mutex gClassifierMutex;
PointerClassifier& classifier() {
  static auto* c = new PointerClassifier();
  return *c;
}

std::optional<PointerInfo> testClassification(const void* ptr) {
  if (!gClassifierSet.load(std::memory_order_acquire)) return std::nullopt;
  std::lock_guard<std::mutex> lock(gClassifierMutex);
  if (!classifier()) return std::nullopt;
  return classifier()(ptr);
}

#if BRAID_HAVE_CUDA
// Driver entry points, looked up in an already loaded libcuda (never loaded by this code).
using CuInitFn = int (*)(unsigned int flags);
using CuCtxGetCurrentFn = int (*)(void** context);
using CuDeviceGetCountFn = int (*)(int* count);
using CuDeviceGetFn = int (*)(int* device, int ordinal);
using CuPrimaryCtxGetStateFn = int (*)(int device, unsigned int* flags, int* active);

/// Whether this process has loaded the CUDA driver (every program that made a stream or device
/// memory has). Never loads it.
bool driverLoaded() {
  void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (lib == nullptr) return false;
  dlclose(lib);
  return true;
}

/// Whether some CUDA context exists in this process, without creating one. Once one has been
/// seen the answer stays yes (asking CUDA about a pointer is then cheap and harmless).
/// How many objects the dynamic loader has loaded so far: while it is unchanged, a library that
/// was absent still is.
unsigned long long loaderAdds() {
  unsigned long long adds = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t size, void* data) {
        if (size >= offsetof(dl_phdr_info, dlpi_adds) + sizeof(info->dlpi_adds)) {
          *static_cast<unsigned long long*>(data) = info->dlpi_adds;
        }
        return 1;  // the first object carries the count
      },
      &adds);
  return adds;
}

/// Where the driver is loaded but cannot work (no device, a stub or too old a driver: cuInit
/// fails, and stays failed for the process) the answer is a lasting no: asking the driver again
/// on every call would cost tens of microseconds each time.
bool processHasCudaContext() {
  static std::atomic<bool> seen{false};
  static std::atomic<bool> unusable{false};
  if (seen.load(std::memory_order_relaxed)) return true;
  if (unusable.load(std::memory_order_relaxed)) return false;
  // dlopen searches the library path even with RTLD_NOLOAD (tens of microseconds per call where
  // no driver is installed): ask again only once the loader has loaded something new.
  static std::atomic<unsigned long long> absentAtAdds{~0ull};
  const unsigned long long adds = loaderAdds();
  if (adds != 0 && adds == absentAtAdds.load(std::memory_order_relaxed)) return false;
  void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (lib == nullptr) {
    absentAtAdds.store(adds, std::memory_order_relaxed);
    return false;
  }
  // cuInit neither loads the driver (it is loaded) nor creates a context.
  auto init = reinterpret_cast<CuInitFn>(dlsym(lib, "cuInit"));
  if (init == nullptr || init(0) != 0) {
    dlclose(lib);
    unusable.store(true, std::memory_order_relaxed);
    return false;
  }
  auto getCurrent = reinterpret_cast<CuCtxGetCurrentFn>(dlsym(lib, "cuCtxGetCurrent"));
  auto getCount = reinterpret_cast<CuDeviceGetCountFn>(dlsym(lib, "cuDeviceGetCount"));
  auto getDevice = reinterpret_cast<CuDeviceGetFn>(dlsym(lib, "cuDeviceGet"));
  auto getState =
      reinterpret_cast<CuPrimaryCtxGetStateFn>(dlsym(lib, "cuDevicePrimaryCtxGetState"));
  bool found = false;
  void* context = nullptr;
  if (getCurrent != nullptr && getCurrent(&context) == 0 && context != nullptr) found = true;
  int count = 0;
  if (!found && getCount != nullptr && getDevice != nullptr && getState != nullptr &&
      getCount(&count) == 0) {
    for (int ordinal = 0; ordinal < count && !found; ++ordinal) {
      int device = 0;
      unsigned int flags = 0;
      int active = 0;
      found =
          getDevice(&device, ordinal) == 0 && getState(device, &flags, &active) == 0 && active != 0;
    }
  }
  dlclose(lib);
  if (found) seen.store(true, std::memory_order_relaxed);
  return found;
}

#endif

const char* kindName(MemoryKind kind) { return kind == MemoryKind::kDevice ? "device" : "host"; }

}  // namespace

bool builtWithCuda() { return BRAID_HAVE_CUDA != 0; }

void setPointerClassifierForTesting(PointerClassifier c) {
  std::lock_guard<std::mutex> lock(gClassifierMutex);
  classifier() = std::move(c);
  gClassifierSet.store(static_cast<bool>(classifier()), std::memory_order_release);
}

namespace {

/// pointerInfo, given whether some CUDA context exists in the process (none: host memory).
PointerInfo classify(const void* ptr, bool cudaContext) {
  if (ptr == nullptr) return {};
  if (std::optional<PointerInfo> forced = testClassification(ptr)) return *forced;
#if BRAID_HAVE_CUDA
  if (!cudaContext) return {};
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    cudaGetLastError();  // not sticky, but do not leave it for the application to find
    return {};
  }
  if (attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged) {
    return {MemoryKind::kDevice, attributes.device};
  }
#else
  (void)cudaContext;
#endif
  return {};
}

bool cudaContextExists() {
#if BRAID_HAVE_CUDA
  return processHasCudaContext();
#else
  return false;
#endif
}

}  // namespace

PointerInfo pointerInfo(const void* ptr) { return classify(ptr, cudaContextExists()); }

Result<DeviceRoute> routeCall(const CallArgs& args, braidStream_t stream) {
  struct Named {
    const char* name;
    PointerInfo info;
  };
  Named buffers[2];
  int n = 0;
  // Asked once per call: where no context exists, both buffers are host memory.
  const bool cudaContext = cudaContextExists();
  if (args.coll != Collective::kRecv && args.sendbuff != nullptr) {
    buffers[n++] = {"sendbuff", classify(args.sendbuff, cudaContext)};
  }
  if (args.coll != Collective::kSend && args.recvbuff != nullptr) {
    buffers[n++] = {"recvbuff", classify(args.recvbuff, cudaContext)};
  }
  const Named* device = nullptr;
  const Named* host = nullptr;
  for (int i = 0; i < n; ++i) {
    (buffers[i].info.kind == MemoryKind::kDevice ? device : host) = &buffers[i];
  }
  if (n == 2 && buffers[0].info.kind != buffers[1].info.kind) {
    return invalidArgument(std::string("sendbuff is ") + kindName(buffers[0].info.kind) +
                           " memory but recvbuff is " + kindName(buffers[1].info.kind) +
                           " memory: the buffers of one call must all be host or all device "
                           "memory");
  }
  if (n == 2 && device != nullptr && buffers[0].info.device != buffers[1].info.device) {
    return invalidArgument("sendbuff is on CUDA device " + std::to_string(buffers[0].info.device) +
                           " but recvbuff on device " + std::to_string(buffers[1].info.device));
  }
  if (stream == nullptr) {
    if (device == nullptr) return DeviceRoute{};
    return DeviceRoute{true, device->info.device};
  }
#if BRAID_HAVE_CUDA
  if (device != nullptr) return DeviceRoute{true, device->info.device};
  // Checked without initialising CUDA: a process that made a real stream has the driver loaded.
  if (!driverLoaded()) {
    return Status(braidUnhandledCudaError,
                  "a CUDA stream was given but this process has not loaded the CUDA driver "
                  "(libcuda.so.1): no GPU or driver here, or the stream is not a cudaStream_t");
  }
  if (host != nullptr) {
    return invalidUsage(std::string("a CUDA stream was given with host buffers (") + host->name +
                        " is host memory): pass device or managed memory, or a NULL stream");
  }
  return DeviceRoute{true, -1};
#else
  (void)host;
  return Status(braidUnhandledCudaError,
                "a CUDA stream was given but this build of Braid runs host memory only");
#endif
}

#if BRAID_HAVE_CUDA
Result<void*> deviceAllocate(size_t bytes) {
  void* p = nullptr;
  RETURN_IF_ERROR(cudaStatus(cudaMalloc(&p, bytes == 0 ? 1 : bytes),
                             "cudaMalloc of " + std::to_string(bytes) + " bytes"));
  return p;
}

void deviceFree(void* ptr) {
  if (ptr != nullptr) cudaFree(ptr);
}

Status copyToDevice(void* deviceDst, const void* hostSrc, size_t bytes) {
  if (bytes == 0) return okStatus();
  return cudaStatus(cudaMemcpy(deviceDst, hostSrc, bytes, cudaMemcpyHostToDevice),
                    "copying to the device");
}

Status copyToHost(void* hostDst, const void* deviceSrc, size_t bytes) {
  if (bytes == 0) return okStatus();
  return cudaStatus(cudaMemcpy(hostDst, deviceSrc, bytes, cudaMemcpyDeviceToHost),
                    "copying from the device");
}
#else
namespace {
Status noCuda() {
  return Status(braidUnhandledCudaError, "this build of Braid has no CUDA support");
}
}  // namespace

Result<void*> deviceAllocate(size_t) { return noCuda(); }
void deviceFree(void*) {}
Status copyToDevice(void*, const void*, size_t) { return noCuda(); }
Status copyToHost(void*, const void*, size_t) { return noCuda(); }
#endif

}  // namespace braid
