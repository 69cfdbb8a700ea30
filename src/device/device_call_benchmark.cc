// The host side of a device call: what braidAllReduce on CUDA buffers costs the calling thread
// from entry to return (validation, routing, plan lookup, the launch), against the floor of any
// call, an empty kernel launched on the same kind of stream. Two communicators of one process
// share the GPU (braidCommInitAll), so the calls also run; the timed loop only enqueues, and the
// streams are drained outside it. Skips without a GPU.
//
//   device_call_benchmark --benchmark_repetitions=5
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <array>
#include <string>

#include "braid.h"
#include "kernels/cuda/kernels.h"

namespace braid {
namespace {

/// Calls enqueued between two drains of the streams: enough to amortise the drain, few enough
/// that the GPU keeps up with the host.
constexpr int kCallsPerDrain = 64;

bool haveGpu(benchmark::State& state) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    state.SkipWithError("no CUDA device");
    return false;
  }
  return true;
}

void BM_EmptyKernelLaunch(benchmark::State& state) {
  if (!haveGpu(state)) return;
  cudaStream_t stream = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    return state.SkipWithError("cudaStreamCreate failed");
  }
  int enqueued = 0;
  for (auto _ : state) {
    if (!gpu::launchEmptyKernel(stream).ok()) return state.SkipWithError("launch failed");
    if (++enqueued == kCallsPerDrain) {
      state.PauseTiming();
      cudaStreamSynchronize(stream);
      enqueued = 0;
      state.ResumeTiming();
    }
  }
  cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
}
BENCHMARK(BM_EmptyKernelLaunch)->Unit(benchmark::kMicrosecond);

/// Two ranks on GPU 0, each with its buffers and stream.
class TwoRanksOneGpu {
 public:
  explicit TwoRanksOneGpu(size_t bytes) {
    const int devices[2] = {0, 0};
    if (braidCommInitAll(comms_.data(), 2, devices) != braidSuccess) return;
    for (int r = 0; r < 2; ++r) {
      if (cudaMalloc(&send_[r], bytes) != cudaSuccess) return;
      if (cudaMalloc(&recv_[r], bytes) != cudaSuccess) return;
      if (cudaStreamCreateWithFlags(&streams_[r], cudaStreamNonBlocking) != cudaSuccess) return;
    }
    ok_ = true;
  }
  ~TwoRanksOneGpu() {
    for (int r = 0; r < 2; ++r) {
      if (streams_[r] != nullptr) cudaStreamSynchronize(streams_[r]);
      if (comms_[r] != nullptr) braidCommDestroy(comms_[r]);
      if (send_[r] != nullptr) cudaFree(send_[r]);
      if (recv_[r] != nullptr) cudaFree(recv_[r]);
      if (streams_[r] != nullptr) cudaStreamDestroy(streams_[r]);
    }
  }
  bool ok() const { return ok_; }
  /// Rank r's all-reduce of `count` floats on its stream; returns when enqueued.
  bool allReduce(int r, size_t count) {
    return braidAllReduce(send_[r], recv_[r], count, braidFloat32, braidSum, comms_[r],
                          streams_[r]) == braidSuccess;
  }
  void drain() {
    for (cudaStream_t s : streams_) cudaStreamSynchronize(s);
  }

 private:
  std::array<braidComm_t, 2> comms_{};
  std::array<void*, 2> send_{};
  std::array<void*, 2> recv_{};
  std::array<cudaStream_t, 2> streams_{};
  bool ok_ = false;
};

/// One iteration: each rank's call once (both must be enqueued for either to finish); the time
/// per call is half the iteration's.
void BM_DeviceAllReduceHostSide(benchmark::State& state) {
  if (!haveGpu(state)) return;
  const size_t count = static_cast<size_t>(state.range(0)) / sizeof(float);
  TwoRanksOneGpu ranks(count * sizeof(float));
  if (!ranks.ok()) return state.SkipWithError("cannot set up two ranks on GPU 0");
  for (int w = 0; w < 10; ++w) {  // plans uploaded, FIFOs touched
    if (!ranks.allReduce(0, count) || !ranks.allReduce(1, count)) {
      return state.SkipWithError("braidAllReduce failed");
    }
  }
  ranks.drain();
  int enqueued = 0;
  for (auto _ : state) {
    if (!ranks.allReduce(0, count) || !ranks.allReduce(1, count)) {
      return state.SkipWithError("braidAllReduce failed");
    }
    if (++enqueued == kCallsPerDrain) {
      state.PauseTiming();
      ranks.drain();
      enqueued = 0;
      state.ResumeTiming();
    }
  }
  ranks.drain();
  state.counters["per_call_us"] = benchmark::Counter(
      2.0 * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_DeviceAllReduceHostSide)->Arg(8)->Arg(32 << 10)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace braid

BENCHMARK_MAIN();
