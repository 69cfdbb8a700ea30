#include "tests/gpu/test_kernels.h"

namespace braid::testing {
namespace {

__global__ void gateKernel(const int* flag, int* timedOut, uint64_t timeoutNs) {
  uint64_t start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  while (*reinterpret_cast<const volatile int*>(flag) == 0) {
    uint64_t now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start > timeoutNs) {
      *reinterpret_cast<volatile int*>(timedOut) = 1;
      return;
    }
    __nanosleep(1000);
  }
}

__global__ void fillKernel(float* buf, size_t n, float base) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    buf[i] = base + static_cast<float>(i % 7);
  }
}

__global__ void scaleKernel(float* buf, size_t n, float factor) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    buf[i] *= factor;
  }
}

}  // namespace

cudaError_t launchGate(const int* flag, int* timedOut, uint64_t timeoutNs, cudaStream_t stream) {
  gateKernel<<<1, 1, 0, stream>>>(flag, timedOut, timeoutNs);
  return cudaGetLastError();
}

cudaError_t launchFill(float* buf, size_t n, float base, cudaStream_t stream) {
  fillKernel<<<256, 256, 0, stream>>>(buf, n, base);
  return cudaGetLastError();
}

cudaError_t launchScale(float* buf, size_t n, float factor, cudaStream_t stream) {
  scaleKernel<<<256, 256, 0, stream>>>(buf, n, factor);
  return cudaGetLastError();
}

}  // namespace braid::testing
