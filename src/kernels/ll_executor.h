// The device executor's steps with the low-latency protocol (ll_protocol.h) for small messages:
// the steps of executor_protocol.h, except that a message to or from a peer whose FIFO has an LL
// ring and that fits it travels as lines. Every thread of the lane polls and writes its own
// lines; the leader only checks for room (credits) and, after the block, advances the counts.
// Messages that do not fit, and peers without a ring (the staged path), take slots exactly as in
// executor_protocol.h, within the same step.
//
// Received lines land in a staging area first and the step's combine runs as usual, reading the
// stage where it would read a slot; what a step sends as lines is combined into a stage and
// written out as lines from there (the send half of a SendRecv writes its lines straight from the
// caller's buffer). The kernel keeps the stages in shared memory.
//
// This file is compiled into the kernel only when LL is chosen (BRAID_DEVICE_PROTO, see
// docs/tuning.md), so the slot-only kernel is the code it was.
#pragma once

#include "kernels/executor_protocol.h"
#include "kernels/ll_protocol.h"

namespace braid::gpu {

BRAID_HOST_DEVICE inline LlFifo* llFifoOf(LlFifo* table, const StepContext& c, int peer) {
  return table + static_cast<size_t>(peer) * c.args.maxChannels + c.channel;
}

/// Every thread: its lines of each message of the step that arrives as lines, into the stages.
/// Returns false when the lane must stop.
template <class Mem, class Block>
BRAID_HOST_DEVICE bool llReceive(const StepContext& c, const Step& step, int nrecv, uint32_t bytes,
                                 LaneState& s, LlLaneState& l) {
  const uint32_t digest = llDigest(c.call.call, bytes);
  Waiter<Mem> waiter(c.args);
  for (int r = 0; r < nrecv; ++r) {
    if (l.recvs[r] == nullptr) continue;
    uint64_t badLine = 0;
    const uint32_t code = llRead<Mem>(
        *l.recvs[r], l.stageIn[r], bytes, digest, Block::thread(), Block::threads(),
        [&waiter] { return waiter.poll(); }, &badLine);
    if (code != 0) {
      FailureSite site = siteOf(c, step.recvPeers[r]);
      site.expected = &c.call.call;
      site.expectedBytes = bytes;
      fail<Mem>(c.args, s, code, site);
      break;
    }
  }
  Block::sync();
  return s.stop == 0;
}

/// A step whose sends depend on its receives (runDependent with lines). Returns false when the
/// lane must stop.
template <class Mem, class Block>
BRAID_HOST_DEVICE bool runDependentLl(const StepContext& c, const Step& step,
                                      const StepShape& shape, LaneState& s, const LlArgs& ll,
                                      LlLaneState& l) {
  if (step.bytes == 0) return true;
  const uint32_t lines = llLinesFor(step.bytes);
  if (Block::leader()) {
    CombineArgs& a = s.main;
    takeLocalOperands(c, step, shape, s);
    l.recvLines = 0;
    l.sendLines = 0;
    l.slots = 0;
    Waiter<Mem> waiter(c.args);
    for (int r = 0; r < s.nrecv && !s.stop; ++r) {
      LlFifo* ring = llFifoOf(ll.recvFifos, c, step.recvPeers[r]);
      l.recvs[r] = llCarries(*ring, step.bytes) ? ring : nullptr;
      if (l.recvs[r] != nullptr) {
        l.recvLines = 1;
        a.in[a.nin++] = l.stageIn[r];
        continue;
      }
      l.slots = 1;
      takeRecvSlot<Mem>(c, step, r, waiter, s);
    }
    for (int i = 0; i < s.nsend && !s.stop; ++i) {
      LlFifo* ring = llFifoOf(ll.sendFifos, c, step.sendPeers[i]);
      l.sends[i] = llCarries(*ring, step.bytes) ? ring : nullptr;
      if (l.sends[i] == nullptr) {
        l.slots = 1;
        takeSendSlot<Mem>(c, step, i, waiter, s);
        continue;
      }
      uint32_t code = 0;
      while (code == 0 && !llRoom<Mem>(*ring, lines)) code = waiter.poll();
      if (code != 0) {
        fail<Mem>(c.args, s, code, siteOf(c, step.sendPeers[i]));
        break;
      }
      if (l.sendLines == 0) a.out[a.nout++] = l.stageOut;
      l.sendLines = 1;
    }
    finishOperands<Mem>(c, step, shape, s);
  }
  Block::sync();
  if (s.stop) return false;
  if (l.recvLines && !llReceive<Mem, Block>(c, step, s.nrecv, step.bytes, s, l)) return false;
  Block::combine(s.main, c.call);
  if (l.slots) Block::fenceData();
  Block::sync();
  if (l.sendLines) {
    const uint32_t digest = llDigest(c.call.call, step.bytes);
    for (int i = 0; i < s.nsend; ++i) {
      if (l.sends[i] == nullptr) continue;
      llWrite<Mem>(*l.sends[i], l.stageOut, step.bytes, digest, Block::thread(), Block::threads());
    }
    Block::sync();  // every line written before the leader moves the counts on
  }
  if (Block::leader()) {
    for (int i = 0; i < s.nsend; ++i) {
      if (l.sends[i] != nullptr) {
        llSent(*l.sends[i], step.bytes);
      } else {
        post<Mem>(s.sends[i], step.bytes, c.call.call);
      }
    }
    for (int r = 0; r < s.nrecv; ++r) {
      if (l.recvs[r] != nullptr) {
        llConsumed<Mem>(*l.recvs[r], step.bytes);
      } else {
        release<Mem>(s.recvs[r]);
      }
    }
  }
  return true;
}

/// SendRecv / SendRecvReduce with lines: the halves move independently, as in runIndependent.
template <class Mem, class Block>
BRAID_HOST_DEVICE bool runIndependentLl(const StepContext& c, const Step& step,
                                        const StepShape& shape, LaneState& s, const LlArgs& ll,
                                        LlLaneState& l) {
  bool sendDone = step.sendBytes == 0;
  bool recvDone = step.bytes == 0;
  while (!(sendDone && recvDone)) {
    if (Block::leader()) {
      LlFifo* sendRing = nullptr;
      LlFifo* recvRing = nullptr;
      DeviceFifo* sf = nullptr;
      DeviceFifo* rf = nullptr;
      if (!sendDone) {
        LlFifo* ring = llFifoOf(ll.sendFifos, c, step.sendPeers[0]);
        if (llCarries(*ring, step.sendBytes)) {
          sendRing = ring;
        } else {
          sf = fifoOf(c.args.sendFifos, c, step.sendPeers[0]);
        }
      }
      if (!recvDone) {
        LlFifo* ring = llFifoOf(ll.recvFifos, c, step.recvPeers[0]);
        if (llCarries(*ring, step.bytes)) {
          recvRing = ring;
        } else {
          rf = fifoOf(c.args.recvFifos, c, step.recvPeers[0]);
        }
      }
      s.sends[0] = sf;
      s.recvs[0] = rf;
      l.sends[0] = sendRing;
      l.recvs[0] = recvRing;
      // At most one of each pair is set: a half travels as lines or takes a slot.
      const auto sendReady = [&] {
        return (sendRing != nullptr && llRoom<Mem>(*sendRing, llLinesFor(step.sendBytes))) ||
               (sf != nullptr && slotFree<Mem>(sf));
      };
      const auto recvReady = [&] {
        return (recvRing != nullptr && llFirstLineCame<Mem>(*recvRing)) ||
               (rf != nullptr && slotArrived<Mem>(rf));
      };
      if (awaitHalves<Mem>(c, step, recvDone, rf, sendReady, recvReady, s)) {
        if (s.doSend && sf != nullptr) prepareSendHalf(c, step, slotData(sf), s.send);
        if (s.doRecv) {
          prepareRecvHalf(c, step, shape, recvRing != nullptr ? l.stageIn[0] : slotData(rf),
                          s.main);
        }
      }
    }
    Block::sync();
    if (s.stop) return false;
    const bool didSend = s.doSend != 0;
    const bool didRecv = s.doRecv != 0;
    const bool sendLines = didSend && l.sends[0] != nullptr;
    const bool recvLines = didRecv && l.recvs[0] != nullptr;
    if (recvLines && !llReceive<Mem, Block>(c, step, 1, step.bytes, s, l)) return false;
    if (sendLines) {
      llWrite<Mem>(*l.sends[0], inPtr(c.call, step.src), step.sendBytes,
                   llDigest(c.call.call, step.sendBytes), Block::thread(), Block::threads());
    } else if (didSend) {
      Block::copy(s.send, step.sendBytes);
    }
    if (didRecv) Block::combine(s.main, c.call);
    if ((didSend && !sendLines) || (didRecv && !recvLines)) Block::fenceData();
    Block::sync();
    if (Block::leader()) {
      if (sendLines) {
        llSent(*l.sends[0], step.sendBytes);
      } else if (didSend) {
        post<Mem>(s.sends[0], step.sendBytes, c.call.call);
      }
      if (recvLines) {
        llConsumed<Mem>(*l.recvs[0], step.bytes);
      } else if (didRecv) {
        release<Mem>(s.recvs[0]);
      }
    }
    sendDone = sendDone || didSend;
    recvDone = recvDone || didRecv;
  }
  return true;
}

/// The steps with lines, for runSteps.
template <class Mem, class Block>
struct LlSteps {
  BRAID_HOST_DEVICE static bool run(const StepContext& c, const Step& step, const StepShape& shape,
                                    LaneState& s, const LlArgs& ll, LlLaneState& l) {
    return shape.independent ? runIndependentLl<Mem, Block>(c, step, shape, s, ll, l)
                             : runDependentLl<Mem, Block>(c, step, shape, s, ll, l);
  }
};

/// runLane with lines: lane `laneIndex` of call `callIndex` to its end or its first failure.
/// l's stages must be set.
template <class Mem, class Block>
BRAID_HOST_DEVICE void runLaneLl(const ExecutorArgs& args, const LlArgs& ll, const DeviceCall& call,
                                 uint32_t callIndex, uint32_t laneIndex, LaneState& s,
                                 LlLaneState& l) {
  runSteps<Mem, Block, LlSteps<Mem, Block>>(args, call, callIndex, laneIndex, s, ll, l);
}

}  // namespace braid::gpu
