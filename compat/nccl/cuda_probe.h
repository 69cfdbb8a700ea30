// What the shim asks of the CUDA driver, where one is installed: whether a pointer is device
// memory (host-side work such as PreMulSum scaling must not touch it) and device allocation for
// ncclMemAlloc. The driver is loaded with dlopen, so the shim builds and runs without CUDA; with
// no driver every pointer is host memory and nothing is allocated on a device.
#pragma once

#include <cstddef>

namespace braid::ncclshim {

/// True when the CUDA driver knows ptr as device or managed memory.
bool isDevicePointer(const void* ptr);

/// True when the driver is loaded and the calling thread has a current CUDA context.
bool hasCurrentContext();

/// Device memory from the current CUDA context; nullptr when the driver refuses (or is absent).
void* deviceAlloc(size_t bytes);

/// Frees memory from deviceAlloc; false when the driver refuses (or is absent).
bool deviceFree(void* ptr);

}  // namespace braid::ncclshim
