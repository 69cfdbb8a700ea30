// Helpers of the GPU suites: whether a GPU is present (asked in a child process, so that the test
// process itself never initialises CUDA and its forked rank processes can), device buffers with
// guard bytes, and the device counterpart of runAndCheck.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <vector>

#include "braid.h"
#include "tests/support/collective_check.h"

namespace braid::testing {

/// CUDA devices a process can use here (0 without a driver or GPU). Cached.
int visibleGpus();

#define BRAID_SKIP_WITHOUT_GPU()                                                     \
  do {                                                                               \
    if (::braid::testing::visibleGpus() == 0) GTEST_SKIP() << "no CUDA device here"; \
  } while (0)

/// "" when `error` is cudaSuccess, else a description naming `what`.
std::string cudaProblem(cudaError_t error, const std::string& what);

/// Device memory with guard bytes on both sides that must stay untouched.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  /// "" when the allocation and guard set-up worked.
  const std::string& error() const { return error_; }
  char* data() { return base_ + kGuard; }
  size_t size() const { return bytes_; }
  /// Copies host bytes to data() + offset.
  std::string upload(const void* host, size_t bytes, size_t offset = 0);
  /// Copies data() + offset .. + bytes to the host.
  std::string download(std::vector<char>& host, size_t bytes, size_t offset = 0);
  /// "" when both guards are intact.
  std::string checkGuards(const std::string& what);

 private:
  static constexpr size_t kGuard = 256;
  static constexpr unsigned char kPattern = 0xA5;
  char* base_ = nullptr;
  size_t bytes_ = 0;
  std::string error_;
};

/// Runs `c` on comm with device buffers of the current device and checks every output element,
/// the guards and (out of place) the input. stream nullptr: a NULL-stream call; otherwise the call
/// is enqueued on `stream` and synchronised before checking.
std::string runAndCheckOnDevice(braidComm_t comm, int rank, int nranks, const CollCase& c,
                                cudaStream_t stream);

/// A short conformance matrix for the device: every collective at counts 0, 1, 273 and one
/// multi-chunk count, every datatype and op appearing at least once, in and out of place.
std::vector<CollCase> deviceCases(int nranks, size_t largeCount);

}  // namespace braid::testing
