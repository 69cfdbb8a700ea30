// The CPU kernels compiled for AVX2 with F16C (256-bit vectors); see reduce_kernels_impl.h.
// Every header the loops use is included before the target pragma so that its inline
// functions keep the baseline target; reduce_kernels_impl.h says why kernels/reduce_ops.h is not.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/halfs.h"
#include "kernels/cpu/kernel_table.h"

#pragma GCC push_options
#pragma GCC target("avx2,f16c")
#define BRAID_KERNEL_LEVEL avx2
#define BRAID_KERNEL_WIDTH 256
#include "kernels/cpu/reduce_kernels_impl.h"

namespace braid::kernels {

const KernelTable& avx2Kernels() {
  static const KernelTable table = avx2::makeTable(CpuIsa::kAvx2);
  return table;
}

}  // namespace braid::kernels

#pragma GCC pop_options
