// The device executor's protocol, written once: how a lane of a plan waits for its slots, checks
// what arrived, combines, posts and frees, and how it gives up (abort, timeout, another lane's
// failure). The CUDA kernel (cuda/executor_kernel.cu) runs it with one thread block per lane; the
// tests run the very same code on host threads standing in for the blocks (host_lane_runner.h),
// over host memory, under TSan too.
//
// Two policies make it concrete:
//
//   Mem    the memory operations on what other agents read and write (FIFO counters, headers,
//          flags). cuda/device_memory_ops.cuh: volatile accesses ordered by system-scope fences
//          (the other end may be another GPU, or a proxy thread reading mapped host memory);
//          host_memory_ops.h: acquire loads and release stores of the counters and flags, plain
//          accesses of headers (so TSan checks they are ordered by the counters).
//   Block  the threads that run one lane: which one waits and publishes (leader), their barrier,
//          their combine and copy loops, and the fence that makes their data writes visible
//          before the leader publishes.
//
// Per step, the leader waits for what the step needs - a slot from every receive peer (whose
// header it checks against this rank's call), a free slot at every send peer - while the other
// threads wait at the barrier; then all threads combine the operands (local ones first, as on
// the host, so in-place steps read before they write); then the leader publishes: slot headers, a
// fence, the new head of each send FIFO and the new tail of each receive FIFO. The two SendRecv
// ops move their halves independently, whichever is ready first, exactly as the host does. A
// step that moves no bytes posts and frees nothing (countDeviceSlots counts the same way).
//
// Waiting polls the counters and, now and then, the communicator's abort flag, the error latch
// (another lane failed) and the timeout. The first failure fills DeviceControl and stops every
// lane of every later launch of the communicator.
#pragma once

#include <cstdint>
#include <vector>

#include "algorithms/plan.h"
#include "braid.h"
#include "kernels/combine_args.h"
#include "kernels/cuda/device_abi.h"
#include "kernels/host_device.h"

namespace braid::gpu {

/// Returned by a wait that ended because another lane already reported a failure.
constexpr uint32_t kStopQuietly = 0xFFFFFFFFu;

/// What a lane's leader prepares for all its threads.
struct LaneState {
  CombineArgs main;  ///< a dependent step; the receive half of an independent one
  CombineArgs send;  ///< the send half of an independent step
  DeviceFifo* recvs[kMaxStepPeers];
  DeviceFifo* sends[kMaxStepPeers];
  int nrecv;
  int nsend;
  int doSend;
  int doRecv;
  int stop;
};

// CallDescriptor and SlotHeader are 8-byte multiples; they move as 64-bit words, each read from
// (or written to) shared memory exactly once.
static_assert(sizeof(CallDescriptor) % 8 == 0 && sizeof(SlotHeader) % 8 == 0);
constexpr int kDescriptorWords = sizeof(CallDescriptor) / 8;
constexpr int kHeaderWords = sizeof(SlotHeader) / 8;

/// Copies words into shared memory (toShared) or out of it.
template <class Mem>
BRAID_HOST_DEVICE inline void copyWords(void* dst, const void* src, int words, bool toShared) {
  for (int w = 0; w < words; ++w) {
    if (toShared) {
      Mem::writeWord(static_cast<uint64_t*>(dst) + w, static_cast<const uint64_t*>(src)[w]);
    } else {
      static_cast<uint64_t*>(dst)[w] = Mem::readWord(static_cast<const uint64_t*>(src) + w);
    }
  }
}

BRAID_HOST_DEVICE inline bool sameCall(const CallDescriptor& a, const CallDescriptor& b) {
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

/// The leader: stops the lane and, if this is the communicator's first failure, reports it.
template <class Mem>
BRAID_HOST_DEVICE void fail(const ExecutorArgs& args, LaneState& s, uint32_t code,
                            const FailureSite& site) {
  s.stop = 1;
  if (code == kStopQuietly) return;
  if (Mem::compareExchange(args.errorLatch, 0u, code) != 0u) return;
  DeviceControl* c = args.control;
  Mem::writeField(&c->peer, site.peer);
  Mem::writeField(&c->callIndex, site.callIndex);
  Mem::writeField(&c->lane, site.lane);
  Mem::writeField(&c->step, site.step);
  Mem::writeField(&c->expectedBytes, site.expectedBytes);
  Mem::writeField(&c->gotBytes, site.gotBytes);
  if (site.expected != nullptr) copyWords<Mem>(&c->expected, site.expected, kDescriptorWords, true);
  if (site.got != nullptr) copyWords<Mem>(&c->got, site.got, kDescriptorWords, true);
  Mem::fenceRelease();
  Mem::store(&c->error, code);
  Mem::fenceRelease();
}

/// The leader's bookkeeping while it polls: poll() returns 0 to keep waiting, else why to stop.
template <class Mem>
class Waiter {
 public:
  BRAID_HOST_DEVICE explicit Waiter(const ExecutorArgs& args) : args_(args), start_(Mem::nowNs()) {}

  BRAID_HOST_DEVICE uint32_t poll() {
    ++spins_;
    // Long waits back off a little: fewer polls of (possibly remote) memory.
    if (spins_ > 8192) Mem::backoff();
    if ((spins_ & 63u) == 0 && Mem::load(args_.errorLatch) != 0) return kStopQuietly;
    if ((spins_ & 1023u) == 0) {
      if (Mem::load(&args_.control->abort) != 0) return kDeviceAborted;
      if (args_.timeoutNs != 0 && Mem::nowNs() - start_ > args_.timeoutNs) return kDeviceTimeout;
    }
    return 0;
  }

 private:
  const ExecutorArgs& args_;
  uint64_t start_;
  uint32_t spins_ = 0;
};

/// Whether the next slot of receive FIFO f has arrived.
template <class Mem>
BRAID_HOST_DEVICE inline bool slotArrived(DeviceFifo* f) {
  return Mem::load(f->head) > f->count;
}
/// Whether send FIFO f has a free slot.
template <class Mem>
BRAID_HOST_DEVICE inline bool slotFree(DeviceFifo* f) {
  return f->count < Mem::load(f->tail) + f->nslots;
}
BRAID_HOST_DEVICE inline char* slotData(DeviceFifo* f) {
  return f->data + (f->count % f->nslots) * static_cast<uint64_t>(f->slotBytes);
}

/// The leader: checks the header of the slot that arrived in f. Returns 0 or an error code.
template <class Mem>
BRAID_HOST_DEVICE uint32_t checkSlot(DeviceFifo* f, const DeviceCall& call, uint32_t expectedBytes,
                                     FailureSite& site, SlotHeader& header) {
  Mem::fenceAcquire();  // the header and data were published before head; read them after
  copyWords<Mem>(&header, f->headers + (f->count % f->nslots), kHeaderWords, false);
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

/// The leader, after the lane wrote a slot: header, fence, head.
template <class Mem>
BRAID_HOST_DEVICE void post(DeviceFifo* f, uint32_t bytes, const CallDescriptor& call) {
  SlotHeader header;
  header.bytes = bytes;
  header.reserved = 0;
  header.call = call;
  copyWords<Mem>(f->headers + (f->count % f->nslots), &header, kHeaderWords, true);
  Mem::fenceRelease();
  f->count += 1;
  Mem::store(f->head, f->count);
}

/// The leader, after the lane read a slot: the sender may reuse it.
template <class Mem>
BRAID_HOST_DEVICE void release(DeviceFifo* f) {
  Mem::fenceRelease();
  f->count += 1;
  Mem::store(f->tail, f->count);
}

BRAID_HOST_DEVICE inline const char* inPtr(const DeviceCall& call, BufferRef ref) {
  switch (ref.buffer) {
    case BufferId::kInput: return call.input + ref.offset;
    case BufferId::kOutput: return call.output + ref.offset;
    case BufferId::kScratch: return call.scratch + ref.offset;
    case BufferId::kNone: break;
  }
  return nullptr;
}

BRAID_HOST_DEVICE inline char* outPtr(const DeviceCall& call, BufferRef ref) {
  switch (ref.buffer) {
    case BufferId::kOutput: return call.output + ref.offset;
    case BufferId::kScratch: return call.scratch + ref.offset;
    case BufferId::kInput:
    case BufferId::kNone: break;
  }
  return nullptr;
}

struct StepContext {
  const ExecutorArgs& args;
  const DeviceCall& call;
  int32_t callIndex;
  int32_t lane;
  int32_t channel;
  int32_t stepIndex;
};

BRAID_HOST_DEVICE inline DeviceFifo* fifoOf(DeviceFifo* table, const StepContext& c, int peer) {
  return table + static_cast<size_t>(peer) * c.args.maxChannels + c.channel;
}

BRAID_HOST_DEVICE inline FailureSite siteOf(const StepContext& c, int peer) {
  FailureSite site;
  site.peer = peer;
  site.callIndex = c.callIndex;
  site.lane = c.lane;
  site.step = c.stepIndex;
  return site;
}

// ---- The leader's parts of a step, shared with the steps that carry small messages as lines
// (ll_executor.h).

/// The leader, starting a dependent step: its local operands into s.main, and how many peers it
/// receives from and sends to. The peers' slots follow as more operands.
BRAID_HOST_DEVICE inline void takeLocalOperands(const StepContext& c, const Step& step,
                                                const StepShape& shape, LaneState& s) {
  CombineArgs& a = s.main;
  a.nin = 0;
  a.nout = 0;
  if (shape.readsSrc) a.in[a.nin++] = inPtr(c.call, step.src);
  if (shape.readsSrc2) a.in[a.nin++] = inPtr(c.call, step.src2);
  if (shape.writesDst) a.out[a.nout++] = outPtr(c.call, step.dst);
  s.nrecv = shape.recvs ? step.nrecv : 0;
  s.nsend = shape.sends ? step.nsend : 0;
}

/// The leader: waits for the slot from receive peer r of a dependent step, checks its header and
/// makes it an input of s.main. A failure stops the lane (s.stop).
template <class Mem>
BRAID_HOST_DEVICE void takeRecvSlot(const StepContext& c, const Step& step, int r,
                                    Waiter<Mem>& waiter, LaneState& s) {
  DeviceFifo* f = fifoOf(c.args.recvFifos, c, step.recvPeers[r]);
  s.recvs[r] = f;
  FailureSite site = siteOf(c, step.recvPeers[r]);
  uint32_t code = 0;
  while (code == 0 && !slotArrived<Mem>(f)) code = waiter.poll();
  SlotHeader header;
  if (code == 0) code = checkSlot<Mem>(f, c.call, step.bytes, site, header);
  if (code != 0) {
    fail<Mem>(c.args, s, code, site);
    return;
  }
  s.main.in[s.main.nin++] = slotData(f);
}

/// The leader: waits for a free slot at send peer i of a dependent step and makes it an output of
/// s.main. A failure stops the lane (s.stop).
template <class Mem>
BRAID_HOST_DEVICE void takeSendSlot(const StepContext& c, const Step& step, int i,
                                    Waiter<Mem>& waiter, LaneState& s) {
  DeviceFifo* f = fifoOf(c.args.sendFifos, c, step.sendPeers[i]);
  s.sends[i] = f;
  uint32_t code = 0;
  while (code == 0 && !slotFree<Mem>(f)) code = waiter.poll();
  if (code != 0) {
    fail<Mem>(c.args, s, code, siteOf(c, step.sendPeers[i]));
    return;
  }
  s.main.out[s.main.nout++] = slotData(f);
}

/// The leader, once a dependent step's operands are in s.main: what the combine does with them.
/// A step left without an input or an output is malformed and stops the lane.
template <class Mem>
BRAID_HOST_DEVICE void finishOperands(const StepContext& c, const Step& step,
                                      const StepShape& shape, LaneState& s) {
  CombineArgs& a = s.main;
  a.count = step.bytes / c.call.elemSize;
  a.reduce = shape.reduces && a.nin > 1;
  a.final = (step.flags & kStepFinalize) != 0 && c.call.op == braidAvg;
  a.nranks = c.call.nranks;
  if (!s.stop && (a.nin == 0 || a.nout == 0)) fail<Mem>(c.args, s, kDeviceBadStep, siteOf(c, -1));
}

/// The leader, for one round of an independent step: waits until its send half can move
/// (sendReady()) or its receive half can (recvReady()), marking s.doSend and s.doRecv, and checks
/// the header of a slot that arrived at recvSlot (nullptr where the receive half takes no slot).
/// A failure stops the lane; returns whether the marked halves may move.
template <class Mem, class SendReady, class RecvReady>
BRAID_HOST_DEVICE bool awaitHalves(const StepContext& c, const Step& step, bool recvDone,
                                   DeviceFifo* recvSlot, const SendReady& sendReady,
                                   const RecvReady& recvReady, LaneState& s) {
  s.doSend = 0;
  s.doRecv = 0;
  Waiter<Mem> waiter(c.args);
  uint32_t code = 0;
  int waitingOn = -1;
  while (code == 0) {
    if (sendReady()) s.doSend = 1;
    if (recvReady()) s.doRecv = 1;
    if (s.doSend || s.doRecv) break;
    waitingOn = recvDone ? step.sendPeers[0] : step.recvPeers[0];
    code = waiter.poll();
  }
  FailureSite site = siteOf(c, waitingOn);
  if (code == 0 && s.doRecv && recvSlot != nullptr) {
    SlotHeader header;
    site = siteOf(c, step.recvPeers[0]);
    code = checkSlot<Mem>(recvSlot, c.call, step.bytes, site, header);
  }
  if (code != 0) fail<Mem>(c.args, s, code, site);
  return code == 0;
}

/// The leader: the send half of an independent step copies the caller's data to `to`.
BRAID_HOST_DEVICE inline void prepareSendHalf(const StepContext& c, const Step& step, char* to,
                                              CombineArgs& a) {
  a.in[0] = inPtr(c.call, step.src);
  a.out[0] = to;
  a.nin = 1;
  a.nout = 1;
  a.count = step.sendBytes / c.call.elemSize;
  a.reduce = false;
  a.final = false;
  a.nranks = c.call.nranks;
}

/// The leader: the receive half of an independent step combines what arrived at `from` (with
/// the local operand where it reduces) into its destination.
BRAID_HOST_DEVICE inline void prepareRecvHalf(const StepContext& c, const Step& step,
                                              const StepShape& shape, const char* from,
                                              CombineArgs& a) {
  a.in[0] = from;
  a.nin = 1;
  if (shape.reduces) a.in[a.nin++] = inPtr(c.call, step.src2);
  a.out[0] = outPtr(c.call, step.dst);
  a.nout = 1;
  a.count = step.bytes / c.call.elemSize;
  a.reduce = shape.reduces;
  a.final = (step.flags & kStepFinalize) != 0 && c.call.op == braidAvg;
  a.nranks = c.call.nranks;
}

/// Runs lane `laneIndex` of call `callIndex` (of args.ncalls) to its end or its first failure:
/// Steps::run(context, step, shape, s, extra...) runs one step and returns false when the lane
/// must stop. The protocols differ only in their steps (runLane, runLaneLl). A policy type rather
/// than a lambda: a closure holding a reference to the lane's shared state costs the kernels
/// stack and spills.
template <class Mem, class Block, class Steps, class... Extra>
BRAID_HOST_DEVICE void runSteps(const ExecutorArgs& args, const DeviceCall& call,
                                uint32_t callIndex, uint32_t laneIndex, LaneState& s,
                                Extra&... extra) {
  const DeviceLane lane = call.lanes[laneIndex];
  const StepContext context{
      args,         call, static_cast<int32_t>(callIndex), static_cast<int32_t>(laneIndex),
      lane.channel, 0};
  if (Block::leader()) {
    s.stop = 0;
    if (Mem::load(args.errorLatch) != 0) {
      s.stop = 1;  // the communicator already failed; its host side reports why
    } else if (Mem::load(&args.control->abort) != 0) {
      fail<Mem>(args, s, kDeviceAborted, siteOf(context, -1));
    }
  }
  Block::sync();
  if (s.stop) return;
  for (uint32_t i = 0; i < lane.nsteps; ++i) {
    const Step step = call.steps[lane.firstStep + i];
    StepContext c = context;
    c.stepIndex = static_cast<int32_t>(i);
    if (!Steps::run(c, step, deviceStepShape(step.op), s, extra...)) return;
  }
}

// ---- The steps with slots only.

/// A step whose sends depend on its receives. Returns false when the lane must stop.
template <class Mem, class Block>
BRAID_HOST_DEVICE bool runDependent(const StepContext& c, const Step& step, const StepShape& shape,
                                    LaneState& s) {
  if (step.bytes == 0) return true;
  if (Block::leader()) {
    takeLocalOperands(c, step, shape, s);
    Waiter<Mem> waiter(c.args);
    for (int r = 0; r < s.nrecv && !s.stop; ++r) takeRecvSlot<Mem>(c, step, r, waiter, s);
    for (int i = 0; i < s.nsend && !s.stop; ++i) takeSendSlot<Mem>(c, step, i, waiter, s);
    finishOperands<Mem>(c, step, shape, s);
  }
  Block::sync();
  if (s.stop) return false;
  Block::combine(s.main, c.call);
  Block::fenceData();
  Block::sync();
  if (Block::leader()) {
    for (int i = 0; i < s.nsend; ++i) post<Mem>(s.sends[i], step.bytes, c.call.call);
    for (int r = 0; r < s.nrecv; ++r) release<Mem>(s.recvs[r]);
  }
  return true;
}

/// SendRecv / SendRecvReduce: the send half and the receive half move independently.
template <class Mem, class Block>
BRAID_HOST_DEVICE bool runIndependent(const StepContext& c, const Step& step,
                                      const StepShape& shape, LaneState& s) {
  bool sendDone = step.sendBytes == 0;
  bool recvDone = step.bytes == 0;
  while (!(sendDone && recvDone)) {
    if (Block::leader()) {
      DeviceFifo* sf = sendDone ? nullptr : fifoOf(c.args.sendFifos, c, step.sendPeers[0]);
      DeviceFifo* rf = recvDone ? nullptr : fifoOf(c.args.recvFifos, c, step.recvPeers[0]);
      s.sends[0] = sf;
      s.recvs[0] = rf;
      const auto sendReady = [sf] { return sf != nullptr && slotFree<Mem>(sf); };
      const auto recvReady = [rf] { return rf != nullptr && slotArrived<Mem>(rf); };
      if (awaitHalves<Mem>(c, step, recvDone, rf, sendReady, recvReady, s)) {
        if (s.doSend) prepareSendHalf(c, step, slotData(sf), s.send);
        if (s.doRecv) prepareRecvHalf(c, step, shape, slotData(rf), s.main);
      }
    }
    Block::sync();
    if (s.stop) return false;
    // The leader rewrites these in the next round only after every thread passed the barrier
    // below.
    const bool didSend = s.doSend != 0;
    const bool didRecv = s.doRecv != 0;
    if (didSend) Block::copy(s.send, step.sendBytes);
    if (didRecv) Block::combine(s.main, c.call);
    Block::fenceData();
    Block::sync();
    if (Block::leader()) {
      if (didSend) post<Mem>(s.sends[0], step.sendBytes, c.call.call);
      if (didRecv) release<Mem>(s.recvs[0]);
    }
    sendDone = sendDone || didSend;
    recvDone = recvDone || didRecv;
  }
  return true;
}

/// The steps with slots only, for runSteps.
template <class Mem, class Block>
struct SlotSteps {
  BRAID_HOST_DEVICE static bool run(const StepContext& c, const Step& step, const StepShape& shape,
                                    LaneState& s) {
    return shape.independent ? runIndependent<Mem, Block>(c, step, shape, s)
                             : runDependent<Mem, Block>(c, step, shape, s);
  }
};

/// Runs lane `laneIndex` of call `callIndex` (of args.ncalls) to its end or its first failure.
template <class Mem, class Block>
BRAID_HOST_DEVICE void runLane(const ExecutorArgs& args, const DeviceCall& call, uint32_t callIndex,
                               uint32_t laneIndex, LaneState& s) {
  runSteps<Mem, Block, SlotSteps<Mem, Block>>(args, call, callIndex, laneIndex, s);
}

// ---- Slot counting (host): what one run of a plan posts and frees per FIFO, as the steps above
// do, for the proxies that move the slots of FIFOs a kernel cannot ring (network_proxy.h).

/// Slots one run of a plan posts to the send FIFO and frees from the receive FIFO of one
/// (peer, channel).
struct FifoSlotCount {
  int32_t peer = -1;
  int32_t channel = 0;
  uint32_t posts = 0;     ///< slots posted to `peer` on `channel`
  uint32_t releases = 0;  ///< slots received from `peer` on `channel` and freed

  bool operator==(const FifoSlotCount&) const = default;
};

/// Per (peer, channel) the plan exchanges with, sorted by peer then channel, the slots the
/// device executor posts and frees running it once: a step that moves no bytes moves no slot.
std::vector<FifoSlotCount> countDeviceSlots(const Plan& plan);

/// A plan laid out as the device executor reads it: the lanes, then their steps.
struct FlatPlan {
  std::vector<DeviceLane> lanes;
  std::vector<Step> steps;
};
FlatPlan flattenPlan(const Plan& plan);

}  // namespace braid::gpu
