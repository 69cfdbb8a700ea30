// RAII owners of CUDA runtime resources (device and pinned memory, streams, events) and guards
// for the current device and the stream-capture mode. CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <utility>

#include "kernels/cuda/cuda_check.h"

namespace braid {

/// Makes a device current until the guard ends, then restores the caller's device.
class DeviceGuard {
 public:
  DeviceGuard() = default;
  ~DeviceGuard() {
    if (previous_ >= 0 && previous_ != current_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

  Status set(int device) {
    int previous = 0;
    RETURN_IF_ERROR(cudaStatus(cudaGetDevice(&previous), "cudaGetDevice"));
    previous_ = previous;
    current_ = device;
    if (device != previous) {
      RETURN_IF_ERROR(
          cudaStatus(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")"));
    }
    return okStatus();
  }

 private:
  int previous_ = -1;
  int current_ = -1;
};

/// Lets this thread make allocations and synchronous calls while another of its streams is being
/// captured into a graph (cudaStreamCaptureModeGlobal would refuse them), for the guard's life.
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~RelaxedCaptureMode() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

/// cudaMalloc'd memory.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  ~DeviceMemory() { reset(); }
  DeviceMemory(DeviceMemory&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(o.bytes_) {}
  DeviceMemory& operator=(DeviceMemory&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = o.bytes_;
    }
    return *this;
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  /// On the current device.
  static Result<DeviceMemory> allocate(size_t bytes) {
    DeviceMemory m;
    RETURN_IF_ERROR(cudaStatus(cudaMalloc(&m.ptr_, bytes == 0 ? 1 : bytes),
                               "cudaMalloc of " + std::to_string(bytes) + " bytes"));
    m.bytes_ = bytes;
    return m;
  }
  char* data() const { return static_cast<char*>(ptr_); }
  size_t size() const { return bytes_; }

 private:
  void reset() {
    if (ptr_ != nullptr) cudaFree(ptr_);
    ptr_ = nullptr;
  }
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

/// Pinned host memory mapped into every device's address space (zero-filled).
class PinnedMemory {
 public:
  PinnedMemory() = default;
  ~PinnedMemory() {
    if (ptr_ != nullptr) cudaFreeHost(ptr_);
  }
  PinnedMemory(PinnedMemory&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), device_(o.device_) {}
  PinnedMemory& operator=(PinnedMemory&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(device_, o.device_);
    return *this;
  }
  PinnedMemory(const PinnedMemory&) = delete;
  PinnedMemory& operator=(const PinnedMemory&) = delete;

  static Result<PinnedMemory> allocate(size_t bytes) {
    PinnedMemory m;
    CUDA_RETURN_IF_ERROR(
        cudaHostAlloc(&m.ptr_, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
    std::memset(m.ptr_, 0, bytes);
    CUDA_RETURN_IF_ERROR(cudaHostGetDevicePointer(&m.device_, m.ptr_, 0));
    return m;
  }
  void* host() const { return ptr_; }
  void* device() const { return device_; }

 private:
  void* ptr_ = nullptr;
  void* device_ = nullptr;
};

/// A non-blocking stream (no implicit ordering with the legacy default stream).
class CudaStream {
 public:
  CudaStream() = default;
  ~CudaStream() {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  CudaStream(CudaStream&& o) noexcept : stream_(std::exchange(o.stream_, nullptr)) {}
  CudaStream& operator=(CudaStream&& o) noexcept {
    std::swap(stream_, o.stream_);
    return *this;
  }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  static Result<CudaStream> create() {
    CudaStream s;
    CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s.stream_, cudaStreamNonBlocking));
    return s;
  }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

/// An event without timing.
class CudaEvent {
 public:
  CudaEvent() = default;
  ~CudaEvent() {
    if (event_ != nullptr) cudaEventDestroy(event_);
  }
  CudaEvent(CudaEvent&& o) noexcept : event_(std::exchange(o.event_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&& o) noexcept {
    std::swap(event_, o.event_);
    return *this;
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  static Result<CudaEvent> create() {
    CudaEvent e;
    CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e.event_, cudaEventDisableTiming));
    return e;
  }
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

/// Whether `stream` is being captured into a graph.
inline Result<bool> isCapturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace braid
