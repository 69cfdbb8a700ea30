// What the host hands the device executor: plain structs that both the C++ host code and the CUDA
// kernels read, so no CUDA header is needed to build a launch.
//
// A launch runs one or more calls of one communicator; each call's plan lanes become consecutive
// thread blocks. FIFO ends live in a per-communicator table in device memory, indexed
// [peer * maxChannels + channel]; each end keeps its own progress counter there, so a kernel (or
// a replay of a captured graph) always continues where the previous one stopped.
#pragma once

#include <cstdint>

#include "algorithms/plan.h"
#include "fifo/fifo.h"
#include "kernels/host_device.h"

namespace braid::gpu {

/// Threads per executor block (one block per lane).
constexpr int kExecutorThreads = 512;
/// Most calls one executor launch carries (a group's concurrent point-to-point calls).
constexpr int kMaxCallsPerLaunch = 64;
/// Operands of one step: src, src2 and up to kMaxStepPeers received slots.
constexpr int kMaxStepOperands = kMaxStepPeers + 2;
/// Destinations of one step: dst and up to kMaxStepPeers send slots.
constexpr int kMaxStepOutputs = kMaxStepPeers + 1;

/// One end of a FIFO as the device executor sees it. The counters and slots live in the
/// receiver's memory; `count` is this end's own progress (slots posted by a send end, slots
/// consumed by a receive end) and is only touched by the block that runs the lane using it.
struct DeviceFifo {
  uint64_t* head = nullptr;  ///< slots posted so far; written by the sender
  uint64_t* tail = nullptr;  ///< slots freed so far; written by the receiver
  SlotHeader* headers = nullptr;
  char* data = nullptr;
  uint32_t nslots = 0;
  uint32_t slotBytes = 0;
  uint64_t count = 0;
};

/// A lane of a plan in device memory: steps [firstStep, firstStep + nsteps) of the plan's array.
struct DeviceLane {
  uint32_t firstStep = 0;
  uint32_t nsteps = 0;
  int32_t channel = 0;
  uint32_t reserved = 0;
};

/// One call of a launch: its plan (in device memory), buffers, reduction and descriptor.
struct DeviceCall {
  const DeviceLane* lanes = nullptr;
  const Step* steps = nullptr;
  uint32_t nlanes = 0;
  uint32_t elemSize = 1;
  const char* input = nullptr;
  char* output = nullptr;
  char* scratch = nullptr;
  CallDescriptor call;
  uint8_t dtype = 0;  ///< braidDataType_t
  uint8_t op = 0;     ///< braidRedOp_t (Sum for collectives that do not reduce)
  uint16_t reserved = 0;
  int32_t nranks = 1;       ///< divisor of Avg
  uint32_t firstBlock = 0;  ///< blocks [firstBlock, firstBlock + nlanes) run this call
};

/// Why a kernel stopped early; written into DeviceControl::error.
enum DeviceError : uint32_t {
  kDeviceOk = 0,
  kDeviceCallMismatch = 1,   ///< a slot's CallDescriptor differs from this rank's call
  kDeviceBytesMismatch = 2,  ///< a slot's size differs from what the step expects
  kDeviceTimeout = 3,        ///< no progress for timeoutNs
  kDeviceAborted = 4,        ///< the host raised DeviceControl::abort
  kDeviceBadStep = 5,        ///< a step the executor cannot run (a bug, reported not hidden)
  /// A low-latency line whose digest (ll_protocol.h) differs from this rank's call and size.
  kDeviceDigestMismatch = 6,
};

/// Shared between the host and the kernels in mapped pinned memory, one per communicator. The
/// first failing block (chosen by an atomic latch in device memory) fills the details, then
/// publishes `error`; the host reads it without synchronising with the stream.
struct DeviceControl {
  uint32_t abort = 0;  ///< raised by the host: running and future kernels stop
  uint32_t error = 0;  ///< DeviceError; written last
  int32_t peer = -1;
  int32_t callIndex = -1;
  int32_t lane = -1;
  int32_t step = -1;
  uint32_t expectedBytes = 0;
  uint32_t gotBytes = 0;
  CallDescriptor expected;
  CallDescriptor got;
};

/// What every block of a launch shares.
struct ExecutorArgs {
  DeviceFifo* sendFifos = nullptr;  ///< [peer * maxChannels + channel], device memory
  DeviceFifo* recvFifos = nullptr;
  int32_t maxChannels = 1;
  int32_t rank = 0;
  DeviceControl* control = nullptr;  ///< device view of the mapped pinned control block
  uint32_t* errorLatch = nullptr;    ///< device memory; non-zero once some block failed
  uint64_t timeoutNs = 0;            ///< 0: wait forever (the abort flag still ends waits)
  uint32_t ncalls = 0;
  uint32_t nblocks = 0;
};

/// The shape of each step op, as the device reads it; must equal stepShape() (a unit test checks).
BRAID_HOST_DEVICE inline StepShape deviceStepShape(StepOp op) {
  //                                                 recvs  sends  src    src2   dst    reduce indep
  switch (op) {
    case StepOp::kSend: return StepShape{false, true, true, false, false, false, false};
    case StepOp::kRecv: return StepShape{true, false, false, false, true, false, false};
    case StepOp::kRecvReduceSend: return StepShape{true, true, true, false, false, true, false};
    case StepOp::kRecvReduceCopy: return StepShape{true, false, true, false, true, true, false};
    case StepOp::kRecvCopySend: return StepShape{true, true, false, false, true, false, false};
    case StepOp::kRecvReduceCopySend: return StepShape{true, true, true, false, true, true, false};
    case StepOp::kCopySend: return StepShape{false, true, true, false, true, false, false};
    case StepOp::kLocalCopy: return StepShape{false, false, true, false, true, false, false};
    case StepOp::kLocalReduce: return StepShape{false, false, true, true, true, true, false};
    case StepOp::kSendRecv: return StepShape{true, true, true, false, true, false, true};
    case StepOp::kSendRecvReduce: return StepShape{true, true, true, true, true, true, true};
  }
  return StepShape{false, false, false, false, false, false, false};
}

}  // namespace braid::gpu
