// The CPU kernels compiled for baseline x86-64 (SSE2), for any CPU; see reduce_kernels_impl.h.
// Every header the loops use is included before the target pragma so that its inline
// functions keep the baseline target; reduce_kernels_impl.h says why kernels/reduce_ops.h is not.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/halfs.h"
#include "kernels/cpu/kernel_table.h"

#define BRAID_KERNEL_LEVEL baseline
#define BRAID_KERNEL_WIDTH 128
#include "kernels/cpu/reduce_kernels_impl.h"

namespace braid::kernels {

const KernelTable& baselineKernels() {
  static const KernelTable table = baseline::makeTable(CpuIsa::kBaseline);
  return table;
}

}  // namespace braid::kernels
