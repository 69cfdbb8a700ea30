// The device executor's stand-in: runs one launch's calls with a host thread per lane where the
// GPU has a thread block, through the same protocol code (executor_protocol.h) over host memory.
// The tests use it to run plans over the FIFOs the device executor would use - FIFOs in host
// memory, or a network proxy's staged FIFOs - without a GPU.
#pragma once

#include "kernels/cuda/device_abi.h"
#include "kernels/ll_protocol.h"

namespace braid::gpu {

/// Runs every lane of calls[0, ncalls) to its end or its first failure (reported in
/// args.control, as the kernel does). args, the calls, their plans, buffers and FIFOs are host
/// memory. Returns when every lane has stopped.
void runLanesOnHost(const ExecutorArgs& args, const DeviceCall* calls, int ncalls);

/// The same with the low-latency protocol (ll_executor.h) on the rings of `ll`, as the kernel
/// runs it when BRAID_DEVICE_PROTO=ll.
void runLanesOnHost(const ExecutorArgs& args, const LlArgs& ll, const DeviceCall* calls,
                    int ncalls);

}  // namespace braid::gpu
