// The CPU kernels of one instruction-set level, as a table of function pointers. The same loops
// (reduce_kernels_impl.h) are compiled once per level; reduce.cc picks the best level the CPU
// supports once, and a Reducer binds its entries at construction, so the data path never
// re-dispatches. Internal: tests and benchmarks reach individual levels through it.
#pragma once

#include <cstddef>

#include "base/dtype.h"
#include "kernels/cpu/reduce.h"

namespace braid::kernels {

using ReduceFn = void (*)(void* dst, const void* a, const void* b, size_t count, int nranks);
using FinalizeFn = void (*)(void* dst, const void* src, size_t count, int nranks);
using CopyFn = void (*)(void* dst, const void* src, size_t bytes);
using Copy2Fn = void (*)(void* dst1, void* dst2, const void* src, size_t bytes);

struct KernelTable {
  CpuIsa isa;
  /// Indexed [braidDataType_t][braidRedOp_t].
  ReduceFn reduce[kNumDataTypes][kNumRedOps];
  ReduceFn reduceFinal[kNumDataTypes][kNumRedOps];
  FinalizeFn finalize[kNumDataTypes][kNumRedOps];
  /// Copies through the cache with ordinary stores (regions must not overlap unless equal).
  /// copy() uses memcpy for this case; the kernel stays as the comparison in the benchmark.
  CopyFn copyCached;
  /// Copies with non-temporal stores and ends with a store fence.
  CopyFn copyStreaming;
  /// One pass of ordinary stores to both destinations. copy2() uses two memcpys for this case
  /// (see there); the kernel stays as the comparison in BM_FifoStream.
  Copy2Fn copy2Cached;
  Copy2Fn copy2Streaming;
};

/// One table per level, each built from reduce_kernels_impl.h under its own target options. Only
/// call one whose level cpuIsaSupported() says the CPU has.
const KernelTable& baselineKernels();
const KernelTable& avx2Kernels();
const KernelTable& avx512Kernels();

/// The table of `isa`, or of the best supported level if the CPU lacks `isa`.
const KernelTable& kernelTable(CpuIsa isa);
/// The table of bestCpuIsa(), chosen on first use.
const KernelTable& bestKernelTable();

/// copy() of at least this many bytes uses non-temporal stores, copy2() from 2/3 of it: half the
/// last-level cache, where source plus destination no longer fit (see reduce.cc for the numbers).
size_t streamingCopyThreshold();

}  // namespace braid::kernels
