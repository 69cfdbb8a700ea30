// Where a buffer lives, decided per call: device (or managed) memory takes the device path, every
// other pointer - host, pinned host, unregistered - the host path. Built without CUDA, or run
// where no CUDA context exists in the process, everything is host memory.
//
// Asking CUDA about a pointer would create a CUDA context in processes that never use a GPU (and
// break fork-based programs), so the question is only asked once the process has a context:
// libcuda already loaded and a context current or a primary context active.
//
// Also: small allocation and copy helpers over device memory for tools and tests (braid-perf
// --device), so that they need no CUDA headers; they fail cleanly in builds without CUDA.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>

#include "base/status.h"
#include "braid.h"

namespace braid {

struct CallArgs;

enum class MemoryKind { kHost, kDevice };

/// Where one buffer lives; `device` is its CUDA ordinal for device memory, else -1.
struct PointerInfo {
  MemoryKind kind = MemoryKind::kHost;
  int device = -1;
};

/// Classifies `ptr` (nullptr is host memory).
PointerInfo pointerInfo(const void* ptr);

/// How one call runs. device: on the device executor, with buffers on `deviceOrdinal` (-1 when
/// the call names no buffer: the current device).
struct DeviceRoute {
  bool device = false;
  int deviceOrdinal = -1;
};

/// Decides the route of a call: its buffers must all be host or all be device memory of one
/// device; a non-NULL stream requires device buffers and a usable CUDA device.
Result<DeviceRoute> routeCall(const CallArgs& args, braidStream_t stream);

/// Whether this build has CUDA support (BRAID_HAVE_CUDA).
bool builtWithCuda();

/// Replaces pointer classification in this process (tests only): the function answers for the
/// pointers it knows and returns nullopt for the rest. An empty function restores the default.
using PointerClassifier = std::function<std::optional<PointerInfo>(const void*)>;
void setPointerClassifierForTesting(PointerClassifier classifier);

/// Device memory on the current device, for tools: freed with deviceFree.
Result<void*> deviceAllocate(size_t bytes);
void deviceFree(void* ptr);
/// Synchronous copies between host and device memory.
Status copyToDevice(void* deviceDst, const void* hostSrc, size_t bytes);
Status copyToHost(void* hostDst, const void* deviceSrc, size_t bytes);

}  // namespace braid
