// The CPU kernels compiled for AVX-512 F/BW/VL/DQ (512-bit vectors); see reduce_kernels_impl.h.
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
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,f16c")
#define BRAID_KERNEL_LEVEL avx512
#define BRAID_KERNEL_WIDTH 512
#include "kernels/cpu/reduce_kernels_impl.h"

namespace braid::kernels {

const KernelTable& avx512Kernels() {
  static const KernelTable table = avx512::makeTable(CpuIsa::kAvx512);
  return table;
}

}  // namespace braid::kernels

#pragma GCC pop_options
