// Bandwidth of the CUDA copy and reduce kernels against cudaMemcpy device-to-device, the card's
// limit. Bytes count what each operation reads plus what it writes (a copy 2x the size, a
// two-input reduce 3x), so the three compare directly; timed with CUDA events (manual time).
//
//   gpu_benchmark --benchmark_filter=Reduce/float
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>

#include "base/dtype.h"
#include "kernels/cuda/kernels.h"

namespace braid::gpu {
namespace {

constexpr int kLaunchesPerIteration = 10;

/// Three device buffers of `bytes` (a, b, dst), zero-filled; the benchmark is skipped with the
/// reason when CUDA fails.
class Buffers {
 public:
  Buffers(benchmark::State& state, size_t bytes) : state_(state) {
    for (void*& p : ptrs_) {
      if (!check(cudaMalloc(&p, bytes), "cudaMalloc")) return;
      if (!check(cudaMemset(p, 0, bytes), "cudaMemset")) return;
    }
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~Buffers() {
    for (void* p : ptrs_) {
      if (p != nullptr) cudaFree(p);
    }
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
  }
  bool ok() const { return ok_; }
  char* a() const { return static_cast<char*>(ptrs_[0]); }
  char* b() const { return static_cast<char*>(ptrs_[1]); }
  char* dst() const { return static_cast<char*>(ptrs_[2]); }

  bool check(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return true;
    if (ok_) state_.SkipWithError((std::string(what) + ": " + cudaGetErrorString(e)).c_str());
    ok_ = false;
    return false;
  }

  /// Times kLaunchesPerIteration launches of `body` per iteration.
  template <class Body>
  void run(Body body, size_t bytesPerLaunch) {
    if (!ok_) return;
    for (int w = 0; w < 3 && ok_; ++w) ok_ = body();  // warm-up
    for (auto _ : state_) {
      cudaEventRecord(start_);
      for (int i = 0; i < kLaunchesPerIteration && ok_; ++i) ok_ = body();
      cudaEventRecord(stop_);
      if (!check(cudaEventSynchronize(stop_), "cudaEventSynchronize") || !ok_) {
        if (!ok_) state_.SkipWithError("launch failed");
        return;
      }
      float ms = 0;
      cudaEventElapsedTime(&ms, start_, stop_);
      state_.SetIterationTime(ms / 1e3);
    }
    state_.SetBytesProcessed(static_cast<int64_t>(state_.iterations()) * kLaunchesPerIteration *
                             static_cast<int64_t>(bytesPerLaunch));
  }

 private:
  benchmark::State& state_;
  void* ptrs_[3] = {nullptr, nullptr, nullptr};
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
  bool ok_ = true;
};

void BM_MemcpyD2D(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  Buffers buf(state, bytes);
  buf.run(
      [&] {
        return cudaMemcpyAsync(buf.dst(), buf.a(), bytes, cudaMemcpyDeviceToDevice) == cudaSuccess;
      },
      2 * bytes);
}

void BM_Copy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  Buffers buf(state, bytes);
  buf.run([&] { return launchCopy(buf.dst(), buf.a(), bytes, nullptr).ok(); }, 2 * bytes);
}

void BM_Reduce(benchmark::State& state, braidDataType_t type, braidRedOp_t op) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const size_t count = bytes / dataTypeSize(type);
  Buffers buf(state, bytes);
  buf.run(
      [&] {
        return launchReduce(buf.dst(), buf.a(), buf.b(), count, type, op, 2, false, nullptr).ok();
      },
      3 * count * dataTypeSize(type));
}

void sizes(benchmark::internal::Benchmark* b) {
  for (int64_t mb : {4, 64, 512}) b->Arg(mb << 20);
  b->UseManualTime()->Unit(benchmark::kMicrosecond);
}

const bool kRegistered = [] {
  sizes(benchmark::RegisterBenchmark("MemcpyD2D", BM_MemcpyD2D));
  sizes(benchmark::RegisterBenchmark("Copy", BM_Copy));
  for (int t = 0; t < kNumDataTypes; ++t) {
    const auto type = static_cast<braidDataType_t>(t);
    const std::string name = "Reduce/" + std::string(dataTypeName(type)) + "/sum";
    sizes(benchmark::RegisterBenchmark(name.c_str(), BM_Reduce, type, braidSum));
  }
  for (braidRedOp_t op : {braidProd, braidMax, braidMin}) {
    const std::string name = "Reduce/float/" + std::string(redOpName(op));
    sizes(benchmark::RegisterBenchmark(name.c_str(), BM_Reduce, braidFloat32, op));
  }
  return true;
}();

}  // namespace
}  // namespace braid::gpu

BENCHMARK_MAIN();
