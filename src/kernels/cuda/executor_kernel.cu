// The device executor kernel: the host executor's step semantics (src/executor/executor.cc) with
// one thread block per lane.
//
// Per step, thread 0 waits for what the step needs - a slot from every receive peer (whose header
// it checks against this rank's call), a free slot at every send peer - while the other threads
// wait at a barrier; then all threads combine the operands (local ones first, as on the host, so
// in-place steps read before they write); then thread 0 publishes: slot headers, a system-wide
// fence, the new head of each send FIFO and the new tail of each receive FIFO. The two SendRecv
// ops move their halves independently, whichever is ready first, exactly as the host does.
//
// Waiting polls volatile counters and, now and then, the communicator's abort flag (pinned host
// memory), the error latch (another block failed) and the timeout (%globaltimer). The first
// failure fills DeviceControl and stops every block of every later kernel of the communicator.
#include <cuda_runtime.h>

#include "kernels/cuda/combine.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/executor.h"

namespace braid::gpu {
namespace {

/// Returned by a wait that ended because another block already reported a failure.
constexpr uint32_t kStopQuietly = 0xFFFFFFFFu;

template <int N>
struct LaunchArgs {
  ExecutorArgs common;
  DeviceCall calls[N];
};

/// What thread 0 prepares for the whole block.
struct BlockState {
  CombineArgs main;  // a dependent step; the receive half of an independent one
  CombineArgs send;  // the send half of an independent step
  DeviceFifo* recvs[kMaxStepPeers];
  DeviceFifo* sends[kMaxStepPeers];
  int nrecv;
  int nsend;
  int doSend;
  int doRecv;
  int stop;
};

__device__ inline uint64_t loadVolatile(const uint64_t* p) {
  return *reinterpret_cast<const volatile uint64_t*>(p);
}
__device__ inline void storeVolatile(uint64_t* p, uint64_t v) {
  *reinterpret_cast<volatile uint64_t*>(p) = v;
}
__device__ inline uint32_t loadVolatile(const uint32_t* p) {
  return *reinterpret_cast<const volatile uint32_t*>(p);
}
__device__ inline void storeVolatile(uint32_t* p, uint32_t v) {
  *reinterpret_cast<volatile uint32_t*>(p) = v;
}
__device__ inline void storeVolatile(int32_t* p, int32_t v) {
  *reinterpret_cast<volatile int32_t*>(p) = v;
}

__device__ inline uint64_t globalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// CallDescriptor and SlotHeader are 8-byte multiples; they move as 64-bit words through volatile
// accesses so that every word is read from (or written to) memory exactly once.
static_assert(sizeof(CallDescriptor) % 8 == 0 && sizeof(SlotHeader) % 8 == 0);
constexpr int kDescriptorWords = sizeof(CallDescriptor) / 8;
constexpr int kHeaderWords = sizeof(SlotHeader) / 8;

__device__ inline void copyWordsVolatile(void* dst, const void* src, int words, bool volatileDst) {
  for (int w = 0; w < words; ++w) {
    if (volatileDst) {
      storeVolatile(static_cast<uint64_t*>(dst) + w, static_cast<const uint64_t*>(src)[w]);
    } else {
      static_cast<uint64_t*>(dst)[w] = loadVolatile(static_cast<const uint64_t*>(src) + w);
    }
  }
}

__device__ inline bool sameCall(const CallDescriptor& a, const CallDescriptor& b) {
  const uint64_t* x = reinterpret_cast<const uint64_t*>(&a);
  const uint64_t* y = reinterpret_cast<const uint64_t*>(&b);
  for (int w = 0; w < kDescriptorWords; ++w) {
    if (x[w] != y[w]) return false;
  }
  return true;
}

/// Where one failure happened, for DeviceControl.
struct FailureSite {
  int32_t peer = -1;
  int32_t callIndex = -1;
  int32_t lane = -1;
  int32_t step = -1;
  uint32_t expectedBytes = 0;
  uint32_t gotBytes = 0;
  const CallDescriptor* expected = nullptr;
  const CallDescriptor* got = nullptr;
};

/// Thread 0: stops the block and, if this is the communicator's first failure, reports it.
__device__ void fail(const ExecutorArgs& args, BlockState& s, uint32_t code,
                     const FailureSite& site) {
  s.stop = 1;
  if (code == kStopQuietly) return;
  if (atomicCAS(args.errorLatch, 0u, code) != 0u) return;
  DeviceControl* c = args.control;
  storeVolatile(&c->peer, site.peer);
  storeVolatile(&c->callIndex, site.callIndex);
  storeVolatile(&c->lane, site.lane);
  storeVolatile(&c->step, site.step);
  storeVolatile(&c->expectedBytes, site.expectedBytes);
  storeVolatile(&c->gotBytes, site.gotBytes);
  if (site.expected != nullptr)
    copyWordsVolatile(&c->expected, site.expected, kDescriptorWords, true);
  if (site.got != nullptr) copyWordsVolatile(&c->got, site.got, kDescriptorWords, true);
  __threadfence_system();
  storeVolatile(&c->error, code);
  __threadfence_system();
}

/// Thread 0's bookkeeping while it polls: returns 0 to keep waiting, else why to stop.
class Waiter {
 public:
  __device__ explicit Waiter(const ExecutorArgs& args) : args_(args), start_(globalTimerNs()) {}

  __device__ uint32_t poll() {
    ++spins_;
    // Long waits back off a little: fewer polls of (possibly remote) memory.
    if (spins_ > 8192) __nanosleep(256);
    if ((spins_ & 63u) == 0 && loadVolatile(args_.errorLatch) != 0) return kStopQuietly;
    if ((spins_ & 1023u) == 0) {
      if (loadVolatile(&args_.control->abort) != 0) return kDeviceAborted;
      if (args_.timeoutNs != 0 && globalTimerNs() - start_ > args_.timeoutNs) return kDeviceTimeout;
    }
    return 0;
  }

 private:
  const ExecutorArgs& args_;
  uint64_t start_;
  uint32_t spins_ = 0;
};

__device__ inline bool slotArrived(DeviceFifo* f) { return loadVolatile(f->head) > f->count; }
__device__ inline bool slotFree(DeviceFifo* f) {
  return f->count < loadVolatile(f->tail) + f->nslots;
}
__device__ inline char* slotData(DeviceFifo* f) {
  return f->data + (f->count % f->nslots) * static_cast<uint64_t>(f->slotBytes);
}

/// Thread 0: checks the header of the slot that arrived in f. Returns 0 or an error code.
__device__ uint32_t checkSlot(DeviceFifo* f, const DeviceCall& call, uint32_t expectedBytes,
                              FailureSite& site, SlotHeader& header) {
  __threadfence_system();  // the header and data were published before head; read them after
  copyWordsVolatile(&header, f->headers + (f->count % f->nslots), kHeaderWords, false);
  if (!sameCall(header.call, call.call)) {
    site.expected = &call.call;
    site.got = &header.call;
    return kDeviceCallMismatch;
  }
  if (header.bytes != expectedBytes) {
    site.expectedBytes = expectedBytes;
    site.gotBytes = header.bytes;
    return kDeviceBytesMismatch;
  }
  return 0;
}

/// Thread 0, after the block wrote a slot: header, fence, head.
__device__ void post(DeviceFifo* f, uint32_t bytes, const CallDescriptor& call) {
  SlotHeader header;
  header.bytes = bytes;
  header.reserved = 0;
  header.call = call;
  copyWordsVolatile(f->headers + (f->count % f->nslots), &header, kHeaderWords, true);
  __threadfence_system();
  f->count += 1;
  storeVolatile(f->head, f->count);
}

/// Thread 0, after the block read a slot: the sender may reuse it.
__device__ void release(DeviceFifo* f) {
  __threadfence_system();
  f->count += 1;
  storeVolatile(f->tail, f->count);
}

__device__ inline const char* inPtr(const DeviceCall& call, BufferRef ref) {
  switch (ref.buffer) {
    case BufferId::kInput: return call.input + ref.offset;
    case BufferId::kOutput: return call.output + ref.offset;
    case BufferId::kScratch: return call.scratch + ref.offset;
    case BufferId::kNone: break;
  }
  return nullptr;
}

__device__ inline char* outPtr(const DeviceCall& call, BufferRef ref) {
  switch (ref.buffer) {
    case BufferId::kOutput: return call.output + ref.offset;
    case BufferId::kScratch: return call.scratch + ref.offset;
    case BufferId::kInput:
    case BufferId::kNone: break;
  }
  return nullptr;
}

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

struct StepContext {
  const ExecutorArgs& args;
  const DeviceCall& call;
  int32_t callIndex;
  int32_t lane;
  int32_t channel;
  int32_t stepIndex;
};

__device__ inline DeviceFifo* fifoOf(DeviceFifo* table, const StepContext& c, int peer) {
  return table + static_cast<size_t>(peer) * c.args.maxChannels + c.channel;
}

__device__ inline FailureSite siteOf(const StepContext& c, int peer) {
  FailureSite site;
  site.peer = peer;
  site.callIndex = c.callIndex;
  site.lane = c.lane;
  site.step = c.stepIndex;
  return site;
}

/// A step whose sends depend on its receives. Returns false when the block must stop.
__device__ bool runDependent(const StepContext& c, const Step& step, const StepShape& shape,
                             BlockState& s) {
  if (step.bytes == 0) return true;
  if (threadIdx.x == 0) {
    CombineArgs& a = s.main;
    a.nin = 0;
    a.nout = 0;
    if (shape.readsSrc) a.in[a.nin++] = inPtr(c.call, step.src);
    if (shape.readsSrc2) a.in[a.nin++] = inPtr(c.call, step.src2);
    if (shape.writesDst) a.out[a.nout++] = outPtr(c.call, step.dst);
    s.nrecv = shape.recvs ? step.nrecv : 0;
    s.nsend = shape.sends ? step.nsend : 0;
    Waiter waiter(c.args);
    for (int r = 0; r < s.nrecv && !s.stop; ++r) {
      DeviceFifo* f = fifoOf(c.args.recvFifos, c, step.recvPeers[r]);
      s.recvs[r] = f;
      FailureSite site = siteOf(c, step.recvPeers[r]);
      uint32_t code = 0;
      while (code == 0 && !slotArrived(f)) code = waiter.poll();
      SlotHeader header;
      if (code == 0) code = checkSlot(f, c.call, step.bytes, site, header);
      if (code != 0) {
        fail(c.args, s, code, site);
        break;
      }
      a.in[a.nin++] = slotData(f);
    }
    for (int i = 0; i < s.nsend && !s.stop; ++i) {
      DeviceFifo* f = fifoOf(c.args.sendFifos, c, step.sendPeers[i]);
      s.sends[i] = f;
      uint32_t code = 0;
      while (code == 0 && !slotFree(f)) code = waiter.poll();
      if (code != 0) {
        fail(c.args, s, code, siteOf(c, step.sendPeers[i]));
        break;
      }
      a.out[a.nout++] = slotData(f);
    }
    a.count = step.bytes / c.call.elemSize;
    a.reduce = shape.reduces && a.nin > 1;
    a.final = (step.flags & kStepFinalize) != 0 && c.call.op == braidAvg;
    a.nranks = c.call.nranks;
    if (!s.stop && (a.nin == 0 || a.nout == 0)) fail(c.args, s, kDeviceBadStep, siteOf(c, -1));
  }
  __syncthreads();
  if (s.stop) return false;
  runCombine(s.main, c.call);
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 0; i < s.nsend; ++i) post(s.sends[i], step.bytes, c.call.call);
    for (int r = 0; r < s.nrecv; ++r) release(s.recvs[r]);
  }
  return true;
}

/// SendRecv / SendRecvReduce: the send half and the receive half move independently.
__device__ bool runIndependent(const StepContext& c, const Step& step, const StepShape& shape,
                               BlockState& s) {
  bool sendDone = step.sendBytes == 0;
  bool recvDone = step.bytes == 0;
  while (!(sendDone && recvDone)) {
    if (threadIdx.x == 0) {
      DeviceFifo* sf = sendDone ? nullptr : fifoOf(c.args.sendFifos, c, step.sendPeers[0]);
      DeviceFifo* rf = recvDone ? nullptr : fifoOf(c.args.recvFifos, c, step.recvPeers[0]);
      s.sends[0] = sf;
      s.recvs[0] = rf;
      s.doSend = 0;
      s.doRecv = 0;
      Waiter waiter(c.args);
      uint32_t code = 0;
      int waitingOn = -1;
      while (code == 0) {
        if (sf != nullptr && slotFree(sf)) s.doSend = 1;
        if (rf != nullptr && slotArrived(rf)) s.doRecv = 1;
        if (s.doSend || s.doRecv) break;
        waitingOn = rf != nullptr ? step.recvPeers[0] : step.sendPeers[0];
        code = waiter.poll();
      }
      FailureSite site = siteOf(c, waitingOn);
      if (code == 0 && s.doRecv) {
        SlotHeader header;
        site = siteOf(c, step.recvPeers[0]);
        code = checkSlot(rf, c.call, step.bytes, site, header);
      }
      if (code != 0) {
        fail(c.args, s, code, site);
      } else {
        if (s.doSend) {
          CombineArgs& a = s.send;
          a.in[0] = inPtr(c.call, step.src);
          a.out[0] = slotData(sf);
          a.nin = 1;
          a.nout = 1;
          a.count = step.sendBytes / c.call.elemSize;
          a.reduce = false;
          a.final = false;
          a.nranks = c.call.nranks;
        }
        if (s.doRecv) {
          CombineArgs& a = s.main;
          a.in[0] = slotData(rf);
          a.nin = 1;
          if (shape.reduces) a.in[a.nin++] = inPtr(c.call, step.src2);
          a.out[0] = outPtr(c.call, step.dst);
          a.nout = 1;
          a.count = step.bytes / c.call.elemSize;
          a.reduce = shape.reduces;
          a.final = (step.flags & kStepFinalize) != 0 && c.call.op == braidAvg;
          a.nranks = c.call.nranks;
        }
      }
    }
    __syncthreads();
    if (s.stop) return false;
    // Thread 0 rewrites these in the next round only after every thread passed the barrier below.
    const bool didSend = s.doSend != 0;
    const bool didRecv = s.doRecv != 0;
    if (didSend) copyBlock(s.send, step.sendBytes);
    if (didRecv) runCombine(s.main, c.call);
    __threadfence_system();
    __syncthreads();
    if (threadIdx.x == 0) {
      if (didSend) post(s.sends[0], step.sendBytes, c.call.call);
      if (didRecv) release(s.recvs[0]);
    }
    sendDone = sendDone || didSend;
    recvDone = recvDone || didRecv;
  }
  return true;
}

__device__ __noinline__ void runBlock(const ExecutorArgs& args, const DeviceCall* calls) {
  __shared__ BlockState s;
  uint32_t callIndex = 0;
  while (callIndex + 1 < args.ncalls && calls[callIndex + 1].firstBlock <= blockIdx.x) ++callIndex;
  const DeviceCall& call = calls[callIndex];
  const uint32_t laneIndex = blockIdx.x - call.firstBlock;
  if (laneIndex >= call.nlanes) return;
  const DeviceLane lane = call.lanes[laneIndex];
  const StepContext context{
      args,         call, static_cast<int32_t>(callIndex), static_cast<int32_t>(laneIndex),
      lane.channel, 0};
  if (threadIdx.x == 0) {
    s.stop = 0;
    if (loadVolatile(args.errorLatch) != 0) {
      s.stop = 1;  // the communicator already failed; its host side reports why
    } else if (loadVolatile(&args.control->abort) != 0) {
      fail(args, s, kDeviceAborted, siteOf(context, -1));
    }
  }
  __syncthreads();
  if (s.stop) return;
  for (uint32_t i = 0; i < lane.nsteps; ++i) {
    const Step step = call.steps[lane.firstStep + i];
    const StepShape shape = deviceStepShape(step.op);
    StepContext c = context;
    c.stepIndex = static_cast<int32_t>(i);
    const bool ok =
        shape.independent ? runIndependent(c, step, shape, s) : runDependent(c, step, shape, s);
    if (!ok) return;
  }
}

template <int N>
__global__ void __launch_bounds__(kExecutorThreads)
    executorKernel(const __grid_constant__ LaunchArgs<N> args) {
  runBlock(args.common, args.calls);
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
  return launchWith<kMaxCallsPerLaunch>(common, calls, ncalls, static_cast<cudaStream_t>(stream));
}

Result<int> executorResidentBlocks() {
  int device = 0;
  int sms = 0;
  int perSm = 0;
  CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &perSm, executorKernel<kMaxCallsPerLaunch>, kExecutorThreads, 0));
  return sms * perSm;
}

}  // namespace braid::gpu
