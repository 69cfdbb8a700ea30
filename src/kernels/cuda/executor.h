// The device executor: one CUDA kernel runs the plans of one or more calls of a communicator, one
// thread block per plan lane, over FIFOs in device memory (device_abi.h describes what it reads).
// This header is plain C++: the host code that builds a launch needs no CUDA headers.
#pragma once

#include "base/status.h"
#include "kernels/cuda/device_abi.h"
#include "kernels/ll_protocol.h"

namespace braid::gpu {

/// Enqueues one executor kernel on `stream` (a cudaStream_t) for `ncalls` calls
/// (1..kMaxCallsPerLaunch) whose lanes cover blocks [0, common.nblocks). Returns at once.
Status launchExecutor(const ExecutorArgs& common, const DeviceCall* calls, int ncalls,
                      void* stream);

/// launchExecutor with the low-latency protocol for small messages on the rings of `ll`
/// (ll_executor.h; BRAID_DEVICE_PROTO=ll).
Status launchExecutorLl(const ExecutorArgs& common, const LlArgs& ll, const DeviceCall* calls,
                        int ncalls, void* stream);

/// How many executor blocks the current device keeps resident at once. A launch must not use
/// more: blocks of one launch wait for each other through the FIFOs.
Result<int> executorResidentBlocks();
/// The same for the kernel of launchExecutorLl.
Result<int> executorResidentBlocksLl();

}  // namespace braid::gpu
