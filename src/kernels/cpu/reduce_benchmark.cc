// Memory bandwidth of the CPU copy and reduce kernels against memcpy.
//
// bytes_per_second counts every byte the operation must move through memory once: memcpy and copy
// read `size` and write `size` (2 x size); copy2 reads `size` once and writes it twice (3 x size);
// reduce reads a and b and writes dst, each `size` bytes (3 x size, out of place). `size` is the
// argument: the bytes of one buffer. Buffers are allocated and touched once per size and reused.
//
//   braid_benchmarks --benchmark_filter='BM_(Memcpy|Copy|Reduce)'
//   braid_benchmarks --benchmark_filter='BM_ReduceLevel'  # one loop per instruction-set level
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "base/dtype.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/reduce.h"

namespace braid::kernels {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

/// Page-aligned, already-touched buffers, kept per (slot, size) so repeated runs reuse them.
void* buffer(int slot, size_t size) {
  static std::map<std::pair<int, size_t>, std::unique_ptr<void, FreeDeleter>> buffers;
  auto& entry = buffers[{slot, size}];
  if (!entry) {
    const size_t rounded = (size + 4095) / 4096 * 4096;
    entry.reset(std::aligned_alloc(4096, rounded));
    // Small non-zero values: sums and products stay finite and normal in every type.
    std::memset(entry.get(), 0x11 * (slot + 1), rounded);
  }
  return entry.get();
}

void setBytes(benchmark::State& state, size_t bytesPerIteration) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(bytesPerIteration));
}

void sizes(benchmark::internal::Benchmark* b) {
  b->RangeMultiplier(16)->Range(4 << 10, 256 << 20)->Unit(benchmark::kMicrosecond);
}

void BM_Memcpy(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  void* dst = buffer(0, size);
  const void* src = buffer(1, size);
  for (auto _ : state) {
    std::memcpy(dst, src, size);
    benchmark::ClobberMemory();
  }
  setBytes(state, 2 * size);
}
BENCHMARK(BM_Memcpy)->Apply(sizes);

/// copy(): memcpy below the streaming threshold, non-temporal stores above it.
void BM_Copy(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  void* dst = buffer(0, size);
  const void* src = buffer(1, size);
  for (auto _ : state) {
    copy(dst, src, size);
    benchmark::ClobberMemory();
  }
  setBytes(state, 2 * size);
}
BENCHMARK(BM_Copy)->Apply(sizes);

/// The two strategies copy() chooses between, forced, to place the threshold.
void BM_CopyCached(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  void* dst = buffer(0, size);
  const void* src = buffer(1, size);
  const KernelTable& t = bestKernelTable();
  for (auto _ : state) {
    t.copyCached(dst, src, size);
    benchmark::ClobberMemory();
  }
  setBytes(state, 2 * size);
}
BENCHMARK(BM_CopyCached)->Apply(sizes);

void BM_CopyStreaming(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  void* dst = buffer(0, size);
  const void* src = buffer(1, size);
  const KernelTable& t = bestKernelTable();
  for (auto _ : state) {
    t.copyStreaming(dst, src, size);
    benchmark::ClobberMemory();
  }
  setBytes(state, 2 * size);
}
BENCHMARK(BM_CopyStreaming)->Apply(sizes);

void BM_Copy2(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  void* dst1 = buffer(0, size);
  void* dst2 = buffer(2, size);
  const void* src = buffer(1, size);
  for (auto _ : state) {
    copy2(dst1, dst2, src, size);
    benchmark::ClobberMemory();
  }
  setBytes(state, 3 * size);
}
BENCHMARK(BM_Copy2)->Apply(sizes);

void BM_Copy2Cached(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  void* dst1 = buffer(0, size);
  void* dst2 = buffer(2, size);
  const void* src = buffer(1, size);
  const KernelTable& t = bestKernelTable();
  for (auto _ : state) {
    t.copy2Cached(dst1, dst2, src, size);
    benchmark::ClobberMemory();
  }
  setBytes(state, 3 * size);
}
BENCHMARK(BM_Copy2Cached)->Apply(sizes);

void BM_Copy2Streaming(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  void* dst1 = buffer(0, size);
  void* dst2 = buffer(2, size);
  const void* src = buffer(1, size);
  const KernelTable& t = bestKernelTable();
  for (auto _ : state) {
    t.copy2Streaming(dst1, dst2, src, size);
    benchmark::ClobberMemory();
  }
  setBytes(state, 3 * size);
}
BENCHMARK(BM_Copy2Streaming)->Apply(sizes);

/// Two memcpy calls, what copy2 replaces.
void BM_Copy2TwoMemcpys(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  void* dst1 = buffer(0, size);
  void* dst2 = buffer(2, size);
  const void* src = buffer(1, size);
  for (auto _ : state) {
    std::memcpy(dst1, src, size);
    std::memcpy(dst2, src, size);
    benchmark::ClobberMemory();
  }
  setBytes(state, 3 * size);
}
BENCHMARK(BM_Copy2TwoMemcpys)->Apply(sizes);

void runReduce(benchmark::State& state, const Reducer& reducer) {
  const size_t size = static_cast<size_t>(state.range(0));
  const size_t count = size / reducer.elemSize();
  void* dst = buffer(0, size);
  const void* a = buffer(1, size);
  const void* b = buffer(2, size);
  for (auto _ : state) {
    reducer.reduce(dst, a, b, count);
    benchmark::ClobberMemory();
  }
  setBytes(state, 3 * size);
}

void BM_Reduce(benchmark::State& state, braidDataType_t type, braidRedOp_t op) {
  runReduce(state, Reducer(type, op, 2));
}
BENCHMARK_CAPTURE(BM_Reduce, float_sum, braidFloat32, braidSum)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Reduce, half_sum, braidFloat16, braidSum)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Reduce, bfloat16_sum, braidBfloat16, braidSum)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Reduce, int32_sum, braidInt32, braidSum)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Reduce, double_max, braidFloat64, braidMax)->Apply(sizes);

/// One in-cache size per instruction-set level: the ratio between levels shows that each level's
/// loop is vectorised at its width (a scalar loop would be several times slower than SSE2).
void BM_ReduceLevel(benchmark::State& state, braidDataType_t type, braidRedOp_t op) {
  const auto isa = static_cast<CpuIsa>(state.range(1));
  if (!cpuIsaSupported(isa)) {
    state.SkipWithError("instruction-set level not supported here");
    return;
  }
  state.SetLabel(cpuIsaName(isa));
  runReduce(state, Reducer(type, op, 2, isa));
}

void levels(benchmark::internal::Benchmark* b) {
  for (int isa = 0; isa <= static_cast<int>(CpuIsa::kAvx512); ++isa) b->Args({16 << 10, isa});
}
BENCHMARK_CAPTURE(BM_ReduceLevel, float_sum, braidFloat32, braidSum)->Apply(levels);
BENCHMARK_CAPTURE(BM_ReduceLevel, half_sum, braidFloat16, braidSum)->Apply(levels);
BENCHMARK_CAPTURE(BM_ReduceLevel, bfloat16_sum, braidBfloat16, braidSum)->Apply(levels);
BENCHMARK_CAPTURE(BM_ReduceLevel, int8_prod, braidInt8, braidProd)->Apply(levels);
BENCHMARK_CAPTURE(BM_ReduceLevel, double_max, braidFloat64, braidMax)->Apply(levels);

}  // namespace
}  // namespace braid::kernels
