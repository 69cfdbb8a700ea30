// One combination the device executor runs: up to kMaxStepOperands inputs folded into up to
// kMaxStepOutputs outputs (kernels/cuda/combine.cuh runs it on the GPU). Plain data, so that the
// executor's protocol (executor_protocol.h) prepares it on the host too.
#pragma once

#include <cstddef>

#include "kernels/cuda/device_abi.h"

namespace braid::gpu {

/// One combination to run.
struct CombineArgs {
  const char* in[kMaxStepOperands];
  char* out[kMaxStepOutputs];
  int nin;
  int nout;
  size_t count;  ///< elements
  bool reduce;   ///< fold the inputs with the op (else in[0] is copied)
  bool final;    ///< divide the result by nranks (Avg's last step)
  int nranks;
};

}  // namespace braid::gpu
