#include "executor/executor.h"

#include <sched.h>

#include <memory>
#include <sstream>

#include "base/dtype.h"
#include "transport/shm/shared_buffers.h"

namespace braid {
namespace {

constexpr int kMaxOperands = kMaxStepPeers + 2;

// Payloads that fit a FIFO line's own area are copied even where they could be lent: that copy
// is as cheap as a lent read. Larger ones are lent wherever they can be, which beats copying them
// (docs/performance-notes.md#lending-payloads).
constexpr uint32_t kMinLentBytes = kSmallBytes + 1;
// In place a rank lends only what it has finished (the all-gather half of a ring or rhd
// all-reduce), and waits at the end of the call until its readers are done with it, where a
// copying rank would start its next call. Below about a MiB that wait costs more than the copy
// saves; from it lending wins, until calls so large that a copying rank, rewriting lines it has
// just read, wins again (docs/performance-notes.md#lending-payloads).
constexpr uint64_t kMinInPlaceLentCallBytes = uint64_t{1} << 20;
constexpr uint64_t kMaxInPlaceLentCallBytes = uint64_t{32} << 20;

bool overlap(const char* a, uint64_t aBytes, const char* b, uint64_t bBytes) {
  return a < b + bBytes && b < a + aBytes;
}

// Whether a run may lend at all: a collective (a lone send must not wait for its receiver),
// and in place only one of middling size.
bool mayLend(const Plan& plan, const PlanBuffers& buffers, const CallDescriptor& call) {
  if (call.coll == static_cast<uint8_t>(Collective::kSend)) return false;
  const bool inPlace = overlap(buffers.input, plan.inputBytes, buffers.output, plan.outputBytes);
  const uint64_t bytes = std::max(plan.inputBytes, plan.outputBytes);
  return !inPlace || (bytes >= kMinInPlaceLentCallBytes && bytes < kMaxInPlaceLentCallBytes);
}

// Copies `value` to each of `dsts`, two at a time (copy2 picks how).
void copyToAll(char* const* dsts, int n, const char* value, size_t bytes) {
  int i = 0;
  for (; i + 1 < n; i += 2) kernels::copy2(dsts[i], dsts[i + 1], value, bytes);
  if (i < n) kernels::copy(dsts[i], value, bytes);
}

// Whether outputs go out through non-temporal stores: only where the working set of every rank
// on the host exceeds the cache (kernels::streamOutputs), and not in place when the output lies
// within the input. Such a call reads each output line before it writes it, so the line is
// cached and a non-temporal store would evict it without saving a read for ownership
// (docs/performance-notes.md#non-temporal-output-stores).
bool streamsOutput(const Plan& plan, const PlanBuffers& buffers) {
  if (plan.outputBytes <= plan.inputBytes &&
      overlap(buffers.input, plan.inputBytes, buffers.output, plan.outputBytes)) {
    return false;
  }
  // Every rank of the plan shares this cache when they share the host (an overestimate across
  // hosts, where outputs that large stream anyway).
  return kernels::streamOutputs((plan.inputBytes + plan.outputBytes) *
                                static_cast<uint64_t>(plan.nranks));
}

}  // namespace

std::string describeCall(const CallDescriptor& call, int rank) {
  std::ostringstream os;
  // Both ends describe a transfer as the send to its receiver (root).
  const bool receives = call.coll == static_cast<uint8_t>(Collective::kSend) && call.root == rank;
  const auto coll = receives ? Collective::kRecv : static_cast<Collective>(call.coll);
  const auto type = static_cast<braidDataType_t>(call.dtype);
  const auto op = static_cast<braidRedOp_t>(call.op);
  os << collectiveName(coll) << "(count=" << call.count << ", " << dataTypeName(type);
  switch (coll) {
    case Collective::kAllReduce:
    case Collective::kReduceScatter: os << ", " << redOpName(op); break;
    case Collective::kReduce: os << ", " << redOpName(op) << ", root=" << call.root; break;
    case Collective::kBroadcast: os << ", root=" << call.root; break;
    case Collective::kSend: os << ", peer=" << call.root; break;
    case Collective::kRecv: os << ", peer=" << call.from; break;
    default: break;
  }
  os << ") #" << call.seq << " [" << algorithmName(static_cast<Algorithm>(call.algo)) << "]";
  return os.str();
}

PlanRun::PlanRun(const Plan& plan, PlanBuffers buffers, const kernels::Reducer& reducer,
                 const CallDescriptor& call, ConnectorTable* connectors, bool mayStream,
                 CallCheckLedger* checks)
    : plan_(plan),
      buffers_(buffers),
      reducer_(reducer),
      call_(call),
      connectors_(connectors),
      checks_(checks),
      moreLanes_(plan.lanes.size() > kInlineLanes ? plan.lanes.size() : 0),
      lanes_(moreLanes_.empty() ? inlineLanes_.states : moreLanes_.data()),
      streamOutput_(mayStream && streamsOutput(plan, buffers)),
      lends_(mayLend(plan, buffers, call)) {
  if (moreLanes_.empty()) std::uninitialized_value_construct_n(lanes_, plan.lanes.size());
  for (const Lane& lane : plan.lanes) lanesLeft_ += lane.steps.empty() ? 0 : 1;
}

const char* PlanRun::in(BufferRef ref) const {
  switch (ref.buffer) {
    case BufferId::kInput: return buffers_.input + ref.offset;
    case BufferId::kOutput: return buffers_.output + ref.offset;
    case BufferId::kScratch: return buffers_.scratch + ref.offset;
    case BufferId::kNone: break;
  }
  return nullptr;
}

char* PlanRun::out(BufferRef ref) const {
  switch (ref.buffer) {
    case BufferId::kOutput: return buffers_.output + ref.offset;
    case BufferId::kScratch: return buffers_.scratch + ref.offset;
    case BufferId::kInput:
    case BufferId::kNone: break;
  }
  return nullptr;
}

std::optional<LentSpan> PlanRun::lendable(const SendConnector& send, const Step& step,
                                          uint32_t bytes) {
  if (!lends_ || (step.flags & kStepLendable) == 0 || bytes < kMinLentBytes) return std::nullopt;
  const BufferRef src = lentSource(step);
  const bool input = src.buffer == BufferId::kInput;
  const char* base = input ? buffers_.input : buffers_.output;
  if (base == nullptr) return std::nullopt;
  LentSpan span;
  switch (send.lending()) {
    case Lending::kNone: return std::nullopt;
    case Lending::kSameProcess:
      span.offset = reinterpret_cast<uintptr_t>(base + src.offset);
      return span;
    case Lending::kSharedBuffers: {
      SharedSpan& shared = input ? inputShared_ : outputShared_;
      if (shared.state == SharedSpan::State::kUnknown) {
        std::optional<LentSpan> found =
            findSharedBuffer(base, input ? plan_.inputBytes : plan_.outputBytes);
        shared.state = found ? SharedSpan::State::kYes : SharedSpan::State::kNo;
        if (found) shared.span = *found;
      }
      if (shared.state == SharedSpan::State::kNo) return std::nullopt;
      span = shared.span;
      span.offset += src.offset;
      return span;
    }
  }
  return std::nullopt;
}

void PlanRun::lend(SendConnector* send, int peer, uint32_t bytes, const LentSpan& span) {
  send->lend(bytes, call_, span);
  for (const LentTo& l : lentTo_) {
    if (l.send == send) return;
  }
  lentTo_.push_back(LentTo{peer, send});
}

bool PlanRun::lentReturned() const {
  for (const LentTo& l : lentTo_) {
    if (!l.send->lentReturned()) return false;
  }
  return true;
}

void PlanRun::withdrawLent(const std::function<bool(int)>& peerAlive) {
  for (const LentTo& l : lentTo_) {
    // A reader in the middle of a payload finishes it within a kernel; one whose process has
    // gone reads nothing more.
    while (!l.send->lentReturned() && !l.send->tryWithdrawLent() && peerAlive(l.peer)) {
      sched_yield();
    }
  }
}

Result<const char*> PlanRun::received(RecvConnector& recv, int peer) const {
  const char* data = recv.slotData();
  if (data == nullptr && recv.lentWithdrawn()) {
    return remoteError("rank " + std::to_string(peer) + " failed and took back what it lent rank " +
                       std::to_string(plan_.rank) + " in " + describeCall(call_, plan_.rank));
  }
  if (data == nullptr) {
    return systemError("rank " + std::to_string(peer) + " lent rank " + std::to_string(plan_.rank) +
                       " data it cannot read in " + describeCall(call_, plan_.rank) +
                       " (BRAID_DEBUG=WARN says why)");
  }
  return data;
}

Status PlanRun::checkSlot(const SlotHeader& header, int peer, uint32_t expectedBytes) const {
  if (header.call != call_) {
    // Sequence numbers differ when one rank skipped or added a call; say so plainly.
    return invalidUsage("rank " + std::to_string(peer) + " called " +
                        describeCall(header.call, peer) + " where rank " +
                        std::to_string(plan_.rank) + " called " + describeCall(call_, plan_.rank));
  }
  if (header.bytes != expectedBytes) {
    return invalidUsage("rank " + std::to_string(peer) + " sent " + std::to_string(header.bytes) +
                        " bytes where rank " + std::to_string(plan_.rank) + " expected " +
                        std::to_string(expectedBytes) + " in " + describeCall(call_, plan_.rank) +
                        " (BRAID_CHUNK_BYTES or BRAID_ALGO differ between ranks?)");
  }
  return okStatus();
}

Result<PlanRun::StepResult> PlanRun::tryDependent(const Step& step, int channel, LaneState& state) {
  const StepShape shape = stepShape(step.op);
  if (step.bytes == 0) return StepResult::kDone;

  RecvConnector* recvs[kMaxStepPeers] = {};
  if (shape.recvs) {
    for (int i = 0; i < step.nrecv; ++i) {
      ASSIGN_OR_RETURN(recvs[i], connectors_->recv(step.recvPeers[i], channel));
      const SlotHeader* header = recvs[i]->tryPeek();
      if (header == nullptr) {
        state.blockedOn = recvs[i]->peerWaker();
        return StepResult::kBlocked;
      }
      RETURN_IF_ERROR(checkSlot(*header, step.recvPeers[i], step.bytes));
    }
  }
  SendConnector* sends[kMaxStepPeers] = {};
  std::optional<LentSpan> lent[kMaxStepPeers];
  char* outputs[kMaxStepPeers + 1];
  int noutputs = 0;
  if (shape.writesDst) outputs[noutputs++] = out(step.dst);
  if (shape.sends) {
    for (int i = 0; i < step.nsend; ++i) {
      ASSIGN_OR_RETURN(sends[i], connectors_->send(step.sendPeers[i], channel));
      lent[i] = lendable(*sends[i], step, step.bytes);
      char* slot = lent[i] ? nullptr : sends[i]->trySlot(step.bytes, plan_.sendWindow);
      if (lent[i] ? !sends[i]->lineFree() : slot == nullptr) {
        state.blockedOn = sends[i]->peerWaker();
        return StepResult::kBlocked;
      }
      if (slot != nullptr) outputs[noutputs++] = slot;
    }
  }
  // Local operands first: in place, dst is src, and it must be read before it is overwritten.
  const char* operands[kMaxOperands];
  int noperands = 0;
  if (shape.readsSrc) operands[noperands++] = in(step.src);
  if (shape.readsSrc2) operands[noperands++] = in(step.src2);
  for (int i = 0; shape.recvs && i < step.nrecv; ++i) {
    Result<const char*> data = received(*recvs[i], step.recvPeers[i]);
    if (!data.ok()) {
      // Lent payloads already being read: their senders may take them back now.
      for (int j = 0; j < i; ++j) recvs[j]->doneReading();
      return data.status();
    }
    operands[noperands++] = *data;
  }

  const size_t count = step.bytes / plan_.elemSize;
  const bool finalize = (step.flags & kStepFinalize) != 0;
  // A large output is written with non-temporal stores: its lines would be read from memory
  // only to be overwritten, and evicted before anyone reads them. Slots stay cached for the peer.
  // Not where dst is lent: the peer reads it next.
  const bool lendsDst = lentSource(step) == step.dst;
  bool dstLent = false;
  for (int i = 0; i < step.nsend && shape.sends; ++i) dstLent |= lent[i] && lendsDst;
  const bool streamDst =
      streamOutput_ && shape.writesDst && step.dst.buffer == BufferId::kOutput && !dstLent;
  if (shape.reduces && shape.writesDst && (!streamDst || noutputs == 1)) {
    kernels::reduceAll(reducer_, outputs[0], operands, noperands, count, finalize);
    copyToAll(outputs + 1, noutputs - 1, outputs[0], step.bytes);
  } else if (shape.reduces) {
    // Into slots, and a streamed dst: built in a cached buffer and copied out (see reduceToAll).
    kernels::reduceToAll(reducer_, outputs, noutputs, streamDst, operands, noperands, step.bytes,
                         finalize);
  } else if (finalize) {
    reducer_.finalize(outputs[0], operands[0], count);
    copyToAll(outputs + 1, noutputs - 1, outputs[0], step.bytes);
  } else if (streamDst) {
    kernels::copyStreaming(outputs[0], operands[0], step.bytes);
    copyToAll(outputs + 1, noutputs - 1, operands[0], step.bytes);
  } else if (noutputs == 2) {
    kernels::copy2(outputs[0], outputs[1], operands[0], step.bytes);
  } else {
    for (int i = 0; i < noutputs; ++i) kernels::copy(outputs[i], operands[0], step.bytes);
  }

  for (int i = 0; shape.sends && i < step.nsend; ++i) {
    if (lent[i]) {
      lend(sends[i], step.sendPeers[i], step.bytes, *lent[i]);
    } else {
      sends[i]->post(step.bytes, call_);
    }
  }
  for (int i = 0; shape.recvs && i < step.nrecv; ++i) recvs[i]->release();
  return StepResult::kDone;
}

Result<PlanRun::StepResult> PlanRun::tryIndependent(const Step& step, int channel,
                                                    LaneState& state) {
  const StepShape shape = stepShape(step.op);
  // A call check posts and takes empty slots: their descriptors are the point.
  const bool check = (step.flags & kStepCallCheck) != 0;
  bool moved = false;
  if (!state.sendDone) {
    if (step.nsend == 0 || (step.sendBytes == 0 && !check)) {
      state.sendDone = true;
    } else {
      ASSIGN_OR_RETURN(SendConnector * send, connectors_->send(step.sendPeers[0], channel));
      const std::optional<LentSpan> lent =
          check ? std::nullopt : lendable(*send, step, step.sendBytes);
      if (check && checks_ != nullptr && step.sendPeers[0] == checks_->successor()) {
        moved |= sendCheckViaLedger(send, state);
      } else if (lent) {
        if (send->lineFree()) {
          lend(send, step.sendPeers[0], step.sendBytes, *lent);
          state.sendDone = moved = true;
        } else {
          state.blockedOn = send->peerWaker();
        }
      } else if (char* slot = send->trySlot(step.sendBytes, plan_.sendWindow)) {
        if (step.sendBytes > 0) kernels::copy(slot, in(step.src), step.sendBytes);
        send->post(step.sendBytes, call_);
        state.sendDone = moved = true;
      } else {
        state.blockedOn = send->peerWaker();
      }
    }
  }
  if (!state.recvDone) {
    if (step.nrecv == 0 || (step.bytes == 0 && !check)) {
      state.recvDone = true;
    } else if (check && checks_ != nullptr) {
      ASSIGN_OR_RETURN(bool took, takeCheckViaLedger(step, channel, state));
      moved |= took;
    } else {
      ASSIGN_OR_RETURN(RecvConnector * recv, connectors_->recv(step.recvPeers[0], channel));
      if (const SlotHeader* header = recv->tryPeek()) {
        RETURN_IF_ERROR(checkSlot(*header, step.recvPeers[0], step.bytes));
        const size_t count = step.bytes / plan_.elemSize;
        const char* data = nullptr;
        if (!check) {
          ASSIGN_OR_RETURN(data, received(*recv, step.recvPeers[0]));
        }
        if (check) {
          // nothing to copy
        } else if (shape.reduces) {
          if (step.flags & kStepFinalize) {
            reducer_.reduceFinal(out(step.dst), data, in(step.src2), count);
          } else {
            reducer_.reduce(out(step.dst), data, in(step.src2), count);
          }
        } else if (step.flags & kStepFinalize) {
          reducer_.finalize(out(step.dst), data, count);
        } else if (streamOutput_ && step.dst.buffer == BufferId::kOutput) {
          kernels::copyStreaming(out(step.dst), data, step.bytes);
        } else {
          kernels::copy(out(step.dst), data, step.bytes);
        }
        recv->release();
        state.recvDone = moved = true;
      } else {
        state.blockedOn = recv->peerWaker();
      }
    }
  }
  if (state.sendDone && state.recvDone) return StepResult::kDone;
  return moved ? StepResult::kPartial : StepResult::kBlocked;
}

Result<bool> PlanRun::takeCheckViaLedger(const Step& step, int channel, LaneState& state) {
  const int peer = step.recvPeers[0];
  ASSIGN_OR_RETURN(RecvConnector * recv, connectors_->recv(peer, channel));
  std::unique_lock<TryLock> lock(checks_->mutex(), std::try_to_lock);
  if (!lock.owns_lock()) return false;  // braidCommGetAsyncError is draining: next sweep
  const bool collective = call_.coll != static_cast<uint8_t>(Collective::kSend);
  const bool fromPredecessor = peer == checks_->predecessor();
  if (fromPredecessor) {
    checks_->attach(recv);
    if (collective && !state.expected) {
      checks_->expect(call_);
      state.expected = true;
    }
    RETURN_IF_ERROR(checks_->drain(/*useHistory=*/true));
  }
  if (collective && fromPredecessor) {
    state.recvDone = checks_->withinLag();
  } else {
    const SlotHeader* header = recv->tryPeek();
    if (fromPredecessor) {
      ASSIGN_OR_RETURN(header, checks_->peekPointToPoint());
    }
    if (header != nullptr) {
      RETURN_IF_ERROR(checkSlot(*header, peer, 0));
      recv->release();
      state.recvDone = true;
    }
  }
  if (!state.recvDone) state.blockedOn = recv->peerWaker();
  return state.recvDone;
}

bool PlanRun::sendCheckViaLedger(SendConnector* send, LaneState& state) {
  std::unique_lock<TryLock> lock(checks_->mutex(), std::try_to_lock);
  if (!lock.owns_lock()) return false;  // braidCommGetAsyncError is sending: next sweep
  checks_->attachSuccessor(send);
  const bool collective = call_.coll != static_cast<uint8_t>(Collective::kSend);
  if (collective && !state.queued) {
    state.queued = true;
    if (!checks_->queue(call_)) return state.sendDone = true;
  }
  // A point-to-point check goes after whatever is queued: the FIFO keeps calls in order.
  bool sent = checks_->sendQueued();
  if (sent && !collective) {
    sent = send->trySlot(0) != nullptr;
    if (sent) send->post(0, call_);
  }
  if (!sent) state.blockedOn = send->peerWaker();
  return state.sendDone = sent;
}

Result<bool> PlanRun::progress() {
  bool moved = false;
  if (!startDrained_ && checks_ != nullptr) {
    // Checks earlier calls left outstanding are taken as soon as their slots are there (a call
    // with a check of its own takes them in its check step).
    startDrained_ = true;
    const Lane* last = plan_.lanes.empty() ? nullptr : &plan_.lanes.back();
    const bool ownCheck = last != nullptr && !last->steps.empty() &&
                          (last->steps.front().flags & kStepCallCheck) != 0;
    if (!ownCheck && checks_->hasPending()) RETURN_IF_ERROR(checks_->tryDrain(/*useHistory=*/true));
  }
  for (size_t l = 0; l < plan_.lanes.size(); ++l) {
    const Lane& lane = plan_.lanes[l];
    LaneState& state = lanes_[l];
    while (state.next < lane.steps.size()) {
      const Step& step = lane.steps[state.next];
      StepResult result;
      if (state.sentAhead && step.op == StepOp::kSend) {
        result = StepResult::kDone;
      } else if (stepShape(step.op).independent || (step.flags & kStepCallCheck)) {
        ASSIGN_OR_RETURN(result, tryIndependent(step, lane.channel, state));
      } else {
        ASSIGN_OR_RETURN(result, tryDependent(step, lane.channel, state));
      }
      if (result != StepResult::kBlocked) moved = true;
      if (result != StepResult::kDone) break;
      const uint32_t passed = state.passedAhead;
      state = LaneState{state.next + 1};
      if (state.next == lane.steps.size()) {
        --lanesLeft_;
      } else if (passed > 0) {
        state.passedAhead = passed - 1;
        state.sentAhead = true;
        state.sendDone = stepShape(lane.steps[state.next].op).independent;
      }
    }
    if (state.next < lane.steps.size()) {
      ASSIGN_OR_RETURN(bool sent, sendAhead(lane, state));
      moved |= sent;
    }
  }
  // About to wait: descriptors held back go out now, while they cost nothing (call_check.h).
  if (!moved && checks_ != nullptr && checks_->hasQueued()) moved = checks_->trySendQueued();
  return moved;
}

Result<bool> PlanRun::sendAhead(const Lane& lane, LaneState& state) {
  const Step& current = lane.steps[state.next];
  const StepShape currentShape = stepShape(current.op);
  // A FIFO keeps its order: the current step's own sends go first.
  if ((current.flags & kStepCallCheck) ||
      (currentShape.sends && !state.sentAhead && !(currentShape.independent && state.sendDone))) {
    return false;
  }
  // What the steps from the current one on will still write; a send may read none of it.
  struct Extent {
    const char* begin;
    size_t bytes;
  };
  Extent pending[kMaxSendAheadSteps + 1];
  size_t npending = 0;
  auto willWrite = [&](const Step& s, const StepShape& shape) {
    if (shape.writesDst && s.bytes > 0) pending[npending++] = Extent{out(s.dst), s.bytes};
  };
  auto readsPending = [&](const char* p, size_t bytes) {
    for (size_t i = 0; i < npending; ++i) {
      if (p < pending[i].begin + pending[i].bytes && pending[i].begin < p + bytes) return true;
    }
    return false;
  };
  if (!(currentShape.independent && state.recvDone)) willWrite(current, currentShape);
  size_t j = state.next + 1;
  for (uint32_t k = 0; k < state.passedAhead; ++k, ++j) {
    willWrite(lane.steps[j], stepShape(lane.steps[j].op));
  }

  bool moved = false;
  for (; j < lane.steps.size() && state.passedAhead < kMaxSendAheadSteps; ++j) {
    const Step& s = lane.steps[j];
    const StepShape shape = stepShape(s.op);
    if (s.flags & kStepCallCheck) break;
    if (shape.sends) {
      // Only a plain Send or an independent step's send half reads nothing it receives.
      if (!shape.independent && s.op != StepOp::kSend) break;
      const uint32_t bytes = shape.independent ? s.sendBytes : s.bytes;
      const int nsend = shape.independent ? 1 : s.nsend;
      if (bytes == 0 || readsPending(in(s.src), bytes)) break;
      SendConnector* sends[kMaxStepPeers] = {};
      char* slots[kMaxStepPeers] = {};
      std::optional<LentSpan> lent[kMaxStepPeers];
      for (int i = 0; i < nsend; ++i) {
        ASSIGN_OR_RETURN(sends[i], connectors_->send(s.sendPeers[i], lane.channel));
        lent[i] = lendable(*sends[i], s, bytes);
        if (lent[i] ? !sends[i]->lineFree()
                    : (slots[i] = sends[i]->trySlot(bytes, plan_.sendWindow)) == nullptr) {
          return moved;
        }
      }
      for (int i = 0; i < nsend; ++i) {
        if (lent[i]) {
          lend(sends[i], s.sendPeers[i], bytes, *lent[i]);
        } else {
          kernels::copy(slots[i], in(s.src), bytes);
          sends[i]->post(bytes, call_);
        }
      }
      moved = true;
    } else if (s.bytes == 0) {
      break;  // an empty step completes at once; nothing to gain past it
    }
    willWrite(s, shape);
    ++state.passedAhead;
  }
  return moved;
}

bool PlanRun::blockedOnCpu(int cpu) const {
  // A reader of what this run lent, on this core, cannot return it while we spin.
  for (const LentTo& l : lentTo_) {
    const Waker* reader = l.send->peerWaker();
    if (reader != nullptr && !l.send->lentReturned() &&
        reader->cpu.load(std::memory_order_relaxed) == cpu) {
      return true;
    }
  }
  for (size_t l = 0; l < plan_.lanes.size(); ++l) {
    const LaneState& state = lanes_[l];
    const Lane& lane = plan_.lanes[l];
    if (state.next >= lane.steps.size()) continue;
    if (state.blockedOn != nullptr && state.blockedOn->cpu.load(std::memory_order_relaxed) == cpu) {
      return true;
    }
    // The steps after this one may wait on a peer of this core that has not posted yet (a
    // direct fold takes its peers one by one): spinning for the current one would only delay it.
    const size_t end = std::min(lane.steps.size(), state.next + kLookAheadSteps);
    for (size_t s = state.next; s < end; ++s) {
      const Step& step = lane.steps[s];
      // A call check's slot is the ledger's to look at (under its lock), and rarely waited for.
      const StepShape shape = stepShape(step.op);
      if ((step.flags & kStepCallCheck) || (!shape.recvs && !shape.independent)) continue;
      for (int i = 0; i < step.nrecv; ++i) {
        RecvConnector* recv = connectors_->existingRecv(step.recvPeers[i], lane.channel);
        if (recv == nullptr || recv->tryPeek() != nullptr) continue;
        const Waker* peer = recv->peerWaker();
        if (peer != nullptr && peer->cpu.load(std::memory_order_relaxed) == cpu) return true;
      }
    }
  }
  return false;
}

Status PlanRun::findMismatch(const std::vector<int>& peers) {
  if (call_.coll == static_cast<uint8_t>(Collective::kSend)) return okStatus();
  const int checkChannel = connectors_->maxChannels() - 1;
  int ledgerPeer = -1;  // whose check slots the ledger judges
  if (checks_ != nullptr && checks_->predecessor() >= 0) {
    // The predecessor's check slots tell of its call whether or not this call waits on it.
    ledgerPeer = checks_->predecessor();
    Result<RecvConnector*> recv = connectors_->recv(ledgerPeer, checkChannel);
    RETURN_IF_ERROR(checks_->tryDrain(/*useHistory=*/true, recv.ok() ? *recv : nullptr));
  }
  for (int peer : peers) {
    const int lastChannel = peer == ledgerPeer ? checkChannel - 1 : checkChannel;
    if (lastChannel == checkChannel) {
      (void)connectors_->recv(peer, checkChannel);  // may fail for an unreachable peer: skip it
    }
    for (int c = 0; c <= lastChannel; ++c) {
      RecvConnector* recv = connectors_->existingRecv(peer, c);
      const SlotHeader* header = recv != nullptr ? recv->tryPeek() : nullptr;
      if (header == nullptr) continue;
      // Point-to-point slots and slots of other collectives of a group are no evidence.
      if (header->call.coll == static_cast<uint8_t>(Collective::kSend) ||
          header->call.seq != call_.seq) {
        continue;
      }
      RETURN_IF_ERROR(checkSlot(*header, peer, header->bytes));
    }
  }
  return okStatus();
}

void PlanRun::waitingOn(std::vector<int>& peers) const {
  for (const LentTo& l : lentTo_) {
    if (!l.send->lentReturned()) peers.push_back(l.peer);
  }
  for (size_t l = 0; l < plan_.lanes.size(); ++l) {
    const Lane& lane = plan_.lanes[l];
    const LaneState& state = lanes_[l];
    if (state.next >= lane.steps.size()) continue;
    const Step& s = lane.steps[state.next];
    if (!state.recvDone) peers.insert(peers.end(), s.recvPeers, s.recvPeers + s.nrecv);
    if (!state.sendDone) peers.insert(peers.end(), s.sendPeers, s.sendPeers + s.nsend);
  }
}

std::string PlanRun::position() const {
  std::ostringstream os;
  for (size_t l = 0; l < plan_.lanes.size(); ++l) {
    const Lane& lane = plan_.lanes[l];
    const LaneState& state = lanes_[l];
    if (state.next >= lane.steps.size()) continue;
    const Step& s = lane.steps[state.next];
    os << (os.tellp() > 0 ? "; " : "") << "lane " << l << " at step " << state.next << "/"
       << lane.steps.size() << " ("
       << ((s.flags & kStepCallCheck) ? std::string_view("call check") : stepOpName(s.op));
    if (s.nrecv) os << " waiting on rank " << s.recvPeers[0];
    if (s.nsend) os << (s.nrecv ? "," : "") << " sending to rank " << s.sendPeers[0];
    os << ")";
  }
  for (const LentTo& l : lentTo_) {
    if (!l.send->lentReturned()) {
      os << (os.tellp() > 0 ? "; " : "") << "rank " << l.peer << " still reading what was lent it";
    }
  }
  return os.str();
}

}  // namespace braid
