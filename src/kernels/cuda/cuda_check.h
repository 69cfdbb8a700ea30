// CUDA runtime errors as Status: braidUnhandledCudaError with the call, the error's name and its
// text. Only CUDA builds include this header.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>

#include "base/status.h"

namespace braid {

/// ok for cudaSuccess, else braidUnhandledCudaError naming `what` and the error.
inline Status cudaStatus(cudaError_t error, std::string_view what) {
  if (error == cudaSuccess) return okStatus();
  return Status(braidUnhandledCudaError, std::string(what) + ": " + cudaGetErrorName(error) + " (" +
                                             cudaGetErrorString(error) + ")");
}

}  // namespace braid

/// Returns braidUnhandledCudaError from the enclosing function when the CUDA call fails.
#define CUDA_RETURN_IF_ERROR(call) RETURN_IF_ERROR(::braid::cudaStatus((call), #call))
