// Stand-alone CUDA copy and reduce kernels over device memory, for every datatype x op, with the
// element operators of the CPU kernels (kernels/reduce_ops.h). The device executor uses the same
// loops inside its blocks; these entry points serve the micro-benchmarks and the kernel tests.
#pragma once

#include <cstddef>

#include "base/status.h"
#include "braid.h"

namespace braid::gpu {

/// Enqueues a kernel of one thread that does nothing: the floor of any launch on `stream`.
Status launchEmptyKernel(void* stream);

/// Enqueues dst <- src (bytes bytes, regions must not overlap) on `stream` (a cudaStream_t;
/// nullptr is the legacy default stream). Any alignment.
Status launchCopy(void* dst, const void* src, size_t bytes, void* stream);

/// Enqueues dst[i] = a[i] op b[i] for count elements of `type` on `stream`; with `final` and Avg
/// the sum is divided by nranks. dst may be a or b exactly. Any alignment.
Status launchReduce(void* dst, const void* a, const void* b, size_t count, braidDataType_t type,
                    braidRedOp_t op, int nranks, bool final, void* stream);

}  // namespace braid::gpu
