// The device executor kernel: the host executor's step semantics (src/executor/executor.cc) with
// one thread block per lane. The protocol - what a lane waits for, checks, combines, posts and
// frees, and how it fails - is kernels/executor_protocol.h, shared with the host threads that
// stand in for this kernel in the tests; this file gives it the GPU's memory operations
// (device_memory_ops.cuh) and a thread block (BlockThreads: thread 0 leads, the block combines).
#include <cuda_runtime.h>

#include <algorithm>
#include <initializer_list>

#include "kernels/cuda/combine.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_memory_ops.cuh"
#include "kernels/cuda/executor.h"
#include "kernels/executor_protocol.h"
#include "kernels/ll_executor.h"

namespace braid::gpu {
namespace {

template <int N>
struct LaunchArgs {
  ExecutorArgs common;
  DeviceCall calls[N];
};

__device__ inline ThreadRange blockRange() { return {threadIdx.x, blockDim.x}; }

// The loops are separate functions, one per (type, op): inlined into one kernel, the 40 variants
// make a function that ptxas needs minutes to allocate registers for.
template <class Ty, class Op>
__device__ __noinline__ void combineBlock(const CombineArgs& a) {
  combineTyped<Ty, Op>(a, blockRange());
}

__device__ __noinline__ void copyBlock(const CombineArgs& a, size_t bytes) {
  copyBytes(a, bytes, blockRange());
}

/// All threads: runs a prepared combination (a copy when nothing reduces or divides).
__device__ void runCombine(const CombineArgs& a, const DeviceCall& call) {
  if (!a.reduce && !a.final) {
    copyBlock(a, a.count * call.elemSize);
    return;
  }
  withType(call.dtype,
           [&]<class Ty>() { withOp(call.op, [&]<class Op>() { combineBlock<Ty, Op>(a); }); });
}

/// The threads of one block running a lane: thread 0 leads.
struct BlockThreads {
  __device__ static bool leader() { return threadIdx.x == 0; }
  __device__ static uint32_t thread() { return threadIdx.x; }
  __device__ static uint32_t threads() { return blockDim.x; }
  __device__ static void sync() { __syncthreads(); }
  __device__ static void combine(const CombineArgs& a, const DeviceCall& call) {
    runCombine(a, call);
  }
  __device__ static void copy(const CombineArgs& a, size_t bytes) { copyBlock(a, bytes); }
  /// Every thread's data writes, visible before thread 0 posts.
  __device__ static void fenceData() { __threadfence_system(); }
};

// The lane's shared state, one variable for both kernels: the combine loops below take their
// arguments from it, and with a single address nvcc reads them there directly.
__shared__ LaneState laneState;

__device__ __noinline__ void runBlock(const ExecutorArgs& args, const DeviceCall* calls) {
  LaneState& s = laneState;
  uint32_t callIndex = 0;
  while (callIndex + 1 < args.ncalls && calls[callIndex + 1].firstBlock <= blockIdx.x) ++callIndex;
  const DeviceCall& call = calls[callIndex];
  const uint32_t laneIndex = blockIdx.x - call.firstBlock;
  if (laneIndex >= call.nlanes) return;
  runLane<DeviceMemoryOps, BlockThreads>(args, call, callIndex, laneIndex, s);
}

template <int N>
__global__ void __launch_bounds__(kExecutorThreads)
    executorKernel(const __grid_constant__ LaunchArgs<N> args) {
  runBlock(args.common, args.calls);
}

// ---- The kernel with the low-latency protocol for small messages (ll_executor.h), launched
// instead of the one above when BRAID_DEVICE_PROTO=ll. A kernel of its own, so the slot-only
// kernel's code stays what it was.

template <int N>
struct LlLaunchArgs {
  ExecutorArgs common;
  LlArgs ll;
  DeviceCall calls[N];
};

__device__ __noinline__ void runBlockLl(const ExecutorArgs& args, const LlArgs& ll,
                                        const DeviceCall* calls, LaneState& s) {
  __shared__ LlLaneState lines;
  __shared__ __align__(16) char stage[(kMaxStepPeers + 1) * kLlMaxMessageBytes];
  uint32_t callIndex = 0;
  while (callIndex + 1 < args.ncalls && calls[callIndex + 1].firstBlock <= blockIdx.x) ++callIndex;
  const DeviceCall& call = calls[callIndex];
  const uint32_t laneIndex = blockIdx.x - call.firstBlock;
  if (laneIndex >= call.nlanes) return;
  if (threadIdx.x == 0) {
    for (int r = 0; r < kMaxStepPeers; ++r) lines.stageIn[r] = stage + r * kLlMaxMessageBytes;
    lines.stageOut = stage + kMaxStepPeers * kLlMaxMessageBytes;
  }
  __syncthreads();
  runLaneLl<DeviceMemoryOps, BlockThreads>(args, ll, call, callIndex, laneIndex, s, lines);
}

template <int N>
__global__ void __launch_bounds__(kExecutorThreads)
    executorKernelLl(const __grid_constant__ LlLaunchArgs<N> args) {
  runBlockLl(args.common, args.ll, args.calls, laneState);
}

template <int N>
Status launchLlWith(const ExecutorArgs& common, const LlArgs& ll, const DeviceCall* calls,
                    int ncalls, cudaStream_t stream) {
  LlLaunchArgs<N> args{};
  args.common = common;
  args.common.ncalls = static_cast<uint32_t>(ncalls);
  args.ll = ll;
  for (int i = 0; i < ncalls; ++i) args.calls[i] = calls[i];
  executorKernelLl<N><<<common.nblocks, kExecutorThreads, 0, stream>>>(args);
  return cudaStatus(cudaGetLastError(), "launching the device executor (low-latency protocol)");
}

template <int N>
Status launchWith(const ExecutorArgs& common, const DeviceCall* calls, int ncalls,
                  cudaStream_t stream) {
  LaunchArgs<N> args{};
  args.common = common;
  args.common.ncalls = static_cast<uint32_t>(ncalls);
  for (int i = 0; i < ncalls; ++i) args.calls[i] = calls[i];
  executorKernel<N><<<common.nblocks, kExecutorThreads, 0, stream>>>(args);
  return cudaStatus(cudaGetLastError(), "launching the device executor");
}

}  // namespace

Status launchExecutor(const ExecutorArgs& common, const DeviceCall* calls, int ncalls,
                      void* stream) {
  if (ncalls < 1 || ncalls > kMaxCallsPerLaunch) {
    return internalError("launchExecutor: " + std::to_string(ncalls) + " calls in one launch");
  }
  if (common.nblocks == 0) return okStatus();
  // Launch arguments sized to the calls: every launch copies them, and room for
  // kMaxCallsPerLaunch is 40 times one call's (docs/performance-notes.md#device-call-speed).
  const auto s = static_cast<cudaStream_t>(stream);
  if (ncalls == 1) return launchWith<1>(common, calls, ncalls, s);
  if (ncalls <= 8) return launchWith<8>(common, calls, ncalls, s);
  return launchWith<kMaxCallsPerLaunch>(common, calls, ncalls, s);
}

Status launchExecutorLl(const ExecutorArgs& common, const LlArgs& ll, const DeviceCall* calls,
                        int ncalls, void* stream) {
  if (ncalls < 1 || ncalls > kMaxCallsPerLaunch) {
    return internalError("launchExecutorLl: " + std::to_string(ncalls) + " calls in one launch");
  }
  if (common.nblocks == 0) return okStatus();
  const auto s = static_cast<cudaStream_t>(stream);
  if (ncalls == 1) return launchLlWith<1>(common, ll, calls, ncalls, s);
  if (ncalls <= 8) return launchLlWith<8>(common, ll, calls, ncalls, s);
  return launchLlWith<kMaxCallsPerLaunch>(common, ll, calls, ncalls, s);
}

namespace {

// Resident blocks a launch may count on: the SMs times the fewest resident blocks of the three
// instantiations (they differ only in their arguments).
Result<int> residentBlocksOf(std::initializer_list<const void*> kernels) {
  int device = 0;
  int sms = 0;
  CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  int perSm = 1 << 30;
  for (const void* kernel : kernels) {
    int blocks = 0;
    CUDA_RETURN_IF_ERROR(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kExecutorThreads, 0));
    perSm = std::min(perSm, blocks);
  }
  return sms * perSm;
}

}  // namespace

Result<int> executorResidentBlocks() {
  return residentBlocksOf({reinterpret_cast<const void*>(executorKernel<1>),
                           reinterpret_cast<const void*>(executorKernel<8>),
                           reinterpret_cast<const void*>(executorKernel<kMaxCallsPerLaunch>)});
}

Result<int> executorResidentBlocksLl() {
  return residentBlocksOf({reinterpret_cast<const void*>(executorKernelLl<1>),
                           reinterpret_cast<const void*>(executorKernelLl<8>),
                           reinterpret_cast<const void*>(executorKernelLl<kMaxCallsPerLaunch>)});
}

}  // namespace braid::gpu
