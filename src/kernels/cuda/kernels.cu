#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <utility>

#include "base/dtype.h"
#include "kernels/cuda/combine.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.h"

namespace braid::gpu {
namespace {

constexpr int kThreads = 256;

__device__ inline ThreadRange gridRange() {
  return {blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x};
}

__global__ void emptyKernel() {}

__global__ void __launch_bounds__(kThreads) copyKernel(CombineArgs args, size_t bytes) {
  copyBytes(args, bytes, gridRange());
}

template <class Ty, class Op>
__global__ void __launch_bounds__(kThreads) reduceKernel(CombineArgs args) {
  combineTyped<Ty, Op, 2, 1>(args, gridRange());
}

using ReduceKernel = void (*)(CombineArgs);

template <class Ty>
ReduceKernel reduceKernelFor(braidRedOp_t op) {
  switch (op) {
    case braidSum:
    case braidAvg: return reduceKernel<Ty, SumOp>;
    case braidProd: return reduceKernel<Ty, ProdOp>;
    case braidMax: return reduceKernel<Ty, MaxOp>;
    case braidMin: return reduceKernel<Ty, MinOp>;
  }
  return nullptr;
}

ReduceKernel reduceKernelFor(braidDataType_t type, braidRedOp_t op) {
  switch (type) {
    case braidInt8: return reduceKernelFor<NativeType<int8_t>>(op);
    case braidUint8: return reduceKernelFor<NativeType<uint8_t>>(op);
    case braidInt32: return reduceKernelFor<NativeType<int32_t>>(op);
    case braidUint32: return reduceKernelFor<NativeType<uint32_t>>(op);
    case braidInt64: return reduceKernelFor<NativeType<int64_t>>(op);
    case braidUint64: return reduceKernelFor<NativeType<uint64_t>>(op);
    case braidFloat16: return reduceKernelFor<HalfType>(op);
    case braidFloat32: return reduceKernelFor<NativeType<float>>(op);
    case braidFloat64: return reduceKernelFor<NativeType<double>>(op);
    case braidBfloat16: return reduceKernelFor<Bfloat16Type>(op);
  }
  return nullptr;
}

/// How many blocks of `kernel` the current device keeps resident at once (cached).
Result<size_t> residentBlocks(const void* kernel) {
  int device = 0;
  CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, size_t> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find({kernel, device});
  if (it != cache.end()) return it->second;
  int sms = 0;
  int perSm = 0;
  CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, kernel, kThreads, 0));
  const size_t blocks = static_cast<size_t>(sms) * static_cast<size_t>(perSm < 1 ? 1 : perSm);
  cache.emplace(std::make_pair(kernel, device), blocks);
  return blocks;
}

/// Blocks for `work` units of kUnroll * kThreads: at most one resident wave, since the
/// grid-stride loops split the work evenly and a second wave would double the tail.
Result<unsigned> gridFor(const void* kernel, size_t work) {
  ASSIGN_OR_RETURN(const size_t cap, residentBlocks(kernel));
  const size_t perBlock = static_cast<size_t>(kThreads) * kUnroll;
  const size_t wanted = (work + perBlock - 1) / perBlock;
  return static_cast<unsigned>(wanted < 1 ? 1 : wanted < cap ? wanted : cap);
}

}  // namespace

Status launchEmptyKernel(void* stream) {
  emptyKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>();
  return cudaStatus(cudaGetLastError(), "launching an empty kernel");
}

Status launchCopy(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return okStatus();
  CombineArgs args{};
  args.in[0] = static_cast<const char*>(src);
  args.out[0] = static_cast<char*>(dst);
  args.nin = 1;
  args.nout = 1;
  args.count = bytes;
  ASSIGN_OR_RETURN(unsigned blocks,
                   gridFor(reinterpret_cast<const void*>(copyKernel), bytes / kPackBytes));
  copyKernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(args, bytes);
  return cudaStatus(cudaGetLastError(), "launching the copy kernel");
}

Status launchReduce(void* dst, const void* a, const void* b, size_t count, braidDataType_t type,
                    braidRedOp_t op, int nranks, bool final, void* stream) {
  const ReduceKernel kernel = reduceKernelFor(type, op);
  if (kernel == nullptr) return invalidArgument("launchReduce: unknown datatype or op");
  if (count == 0) return okStatus();
  CombineArgs args{};
  args.in[0] = static_cast<const char*>(a);
  args.in[1] = static_cast<const char*>(b);
  args.out[0] = static_cast<char*>(dst);
  args.nin = 2;
  args.nout = 1;
  args.count = count;
  args.reduce = true;
  args.final = final && op == braidAvg;
  args.nranks = nranks < 1 ? 1 : nranks;
  ASSIGN_OR_RETURN(unsigned blocks, gridFor(reinterpret_cast<const void*>(kernel),
                                            count * dataTypeSize(type) / kPackBytes));
  kernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(args);
  return cudaStatus(cudaGetLastError(), "launching the reduce kernel");
}

}  // namespace braid::gpu
