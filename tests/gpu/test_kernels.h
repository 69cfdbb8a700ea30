// Small kernels the GPU tests put on a stream around Braid's calls (plain C++ interface).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace braid::testing {

/// Spins until *flag (mapped pinned memory) is non-zero; after timeoutNs it gives up and sets
/// *timedOut (mapped pinned memory) so a test fails instead of hanging.
cudaError_t launchGate(const int* flag, int* timedOut, uint64_t timeoutNs, cudaStream_t stream);
/// buf[i] = base + (i % 7).
cudaError_t launchFill(float* buf, size_t n, float base, cudaStream_t stream);
/// buf[i] *= factor.
cudaError_t launchScale(float* buf, size_t n, float factor, cudaStream_t stream);

}  // namespace braid::testing
