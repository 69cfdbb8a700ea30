#include "core/executor.h"

#include <sstream>

#include "core/dtype.h"

namespace braid {
namespace {

constexpr int kMaxOperands = kMaxStepPeers + 2;

// Writes `count` elements of the combined value into the first output and copies it to the rest.
void spread(char* const* outputs, int noutputs, size_t bytes) {
  if (noutputs >= 3) kernels::copy2(outputs[1], outputs[2], outputs[0], bytes);
  else if (noutputs == 2) kernels::copy(outputs[1], outputs[0], bytes);
  for (int i = 3; i < noutputs; ++i) kernels::copy(outputs[i], outputs[0], bytes);
}

}  // namespace

std::string describeCall(const CallDescriptor& call) {
  std::ostringstream os;
  const auto coll = static_cast<Collective>(call.coll);
  const auto type = static_cast<braidDataType_t>(call.dtype);
  const auto op = static_cast<braidRedOp_t>(call.op);
  os << collectiveName(coll) << "(count=" << call.count << ", " << dataTypeName(type);
  switch (coll) {
    case Collective::kAllReduce:
    case Collective::kReduceScatter: os << ", " << redOpName(op); break;
    case Collective::kReduce: os << ", " << redOpName(op) << ", root=" << call.root; break;
    case Collective::kBroadcast: os << ", root=" << call.root; break;
    case Collective::kSend:
    case Collective::kRecv: os << ", peer=" << call.root; break;
    default: break;
  }
  os << ") #" << call.seq << " [" << algorithmName(static_cast<Algorithm>(call.algo)) << "]";
  return os.str();
}

PlanRun::PlanRun(const Plan& plan, PlanBuffers buffers, const kernels::Reducer& reducer,
                 const CallDescriptor& call, ConnectorTable* connectors)
    : plan_(plan),
      buffers_(buffers),
      reducer_(reducer),
      call_(call),
      connectors_(connectors),
      lanes_(plan.lanes.size()) {
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

Status PlanRun::checkSlot(const SlotHeader& header, int peer, uint32_t expectedBytes) const {
  if (header.call != call_) {
    // Sequence numbers differ when one rank skipped or added a call; say so plainly.
    return invalidUsage("rank " + std::to_string(peer) + " called " + describeCall(header.call) +
                        " where rank " + std::to_string(plan_.rank) + " called " +
                        describeCall(call_));
  }
  if (header.bytes != expectedBytes) {
    return invalidUsage("rank " + std::to_string(peer) + " sent " + std::to_string(header.bytes) +
                        " bytes where rank " + std::to_string(plan_.rank) + " expected " +
                        std::to_string(expectedBytes) + " in " + describeCall(call_) +
                        " (BRAID_CHUNK_BYTES or BRAID_ALGO differ between ranks?)");
  }
  return okStatus();
}

Result<PlanRun::StepResult> PlanRun::tryDependent(const Step& step, int channel) {
  const StepShape shape = stepShape(step.op);
  if (step.bytes == 0) return StepResult::kDone;

  RecvConnector* recvs[kMaxStepPeers] = {};
  if (shape.recvs) {
    for (int i = 0; i < step.nrecv; ++i) {
      ASSIGN_OR_RETURN(recvs[i], connectors_->recv(step.recvPeers[i], channel));
      const SlotHeader* header = recvs[i]->tryPeek();
      if (header == nullptr) return StepResult::kBlocked;
      RETURN_IF_ERROR(checkSlot(*header, step.recvPeers[i], step.bytes));
    }
  }
  SendConnector* sends[kMaxStepPeers] = {};
  char* outputs[kMaxStepPeers + 1];
  int noutputs = 0;
  if (shape.writesDst) outputs[noutputs++] = out(step.dst);
  if (shape.sends) {
    for (int i = 0; i < step.nsend; ++i) {
      ASSIGN_OR_RETURN(sends[i], connectors_->send(step.sendPeers[i], channel));
      char* slot = sends[i]->trySlot();
      if (slot == nullptr) return StepResult::kBlocked;
      outputs[noutputs++] = slot;
    }
  }
  // Local operands first: in place, dst is src, and it must be read before it is overwritten.
  const char* operands[kMaxOperands];
  int noperands = 0;
  if (shape.readsSrc) operands[noperands++] = in(step.src);
  if (shape.readsSrc2) operands[noperands++] = in(step.src2);
  for (int i = 0; shape.recvs && i < step.nrecv; ++i) operands[noperands++] = recvs[i]->slotData();

  const size_t count = step.bytes / plan_.elemSize;
  const bool finalize = (step.flags & kStepFinalize) != 0;
  if (shape.reduces) {
    for (int k = 1; k < noperands; ++k) {
      const char* acc = k == 1 ? operands[0] : outputs[0];
      if (finalize && k == noperands - 1) {
        reducer_.reduceFinal(outputs[0], acc, operands[k], count);
      } else {
        reducer_.reduce(outputs[0], acc, operands[k], count);
      }
    }
    spread(outputs, noutputs, step.bytes);
  } else if (finalize) {
    reducer_.finalize(outputs[0], operands[0], count);
    spread(outputs, noutputs, step.bytes);
  } else if (noutputs == 2) {
    kernels::copy2(outputs[0], outputs[1], operands[0], step.bytes);
  } else {
    for (int i = 0; i < noutputs; ++i) kernels::copy(outputs[i], operands[0], step.bytes);
  }

  for (int i = 0; shape.sends && i < step.nsend; ++i) sends[i]->post(step.bytes, call_);
  for (int i = 0; shape.recvs && i < step.nrecv; ++i) recvs[i]->release();
  return StepResult::kDone;
}

Result<PlanRun::StepResult> PlanRun::tryIndependent(const Step& step, int channel,
                                                    LaneState& state) {
  const StepShape shape = stepShape(step.op);
  bool moved = false;
  if (!state.sendDone) {
    if (step.sendBytes == 0) {
      state.sendDone = true;
    } else {
      ASSIGN_OR_RETURN(SendConnector * send, connectors_->send(step.sendPeers[0], channel));
      if (char* slot = send->trySlot()) {
        kernels::copy(slot, in(step.src), step.sendBytes);
        send->post(step.sendBytes, call_);
        state.sendDone = moved = true;
      }
    }
  }
  if (!state.recvDone) {
    if (step.bytes == 0) {
      state.recvDone = true;
    } else {
      ASSIGN_OR_RETURN(RecvConnector * recv, connectors_->recv(step.recvPeers[0], channel));
      if (const SlotHeader* header = recv->tryPeek()) {
        RETURN_IF_ERROR(checkSlot(*header, step.recvPeers[0], step.bytes));
        const size_t count = step.bytes / plan_.elemSize;
        if (shape.reduces) {
          if (step.flags & kStepFinalize) {
            reducer_.reduceFinal(out(step.dst), recv->slotData(), in(step.src2), count);
          } else {
            reducer_.reduce(out(step.dst), recv->slotData(), in(step.src2), count);
          }
        } else if (step.flags & kStepFinalize) {
          reducer_.finalize(out(step.dst), recv->slotData(), count);
        } else {
          kernels::copy(out(step.dst), recv->slotData(), step.bytes);
        }
        recv->release();
        state.recvDone = moved = true;
      }
    }
  }
  if (state.sendDone && state.recvDone) return StepResult::kDone;
  return moved ? StepResult::kPartial : StepResult::kBlocked;
}

Result<bool> PlanRun::progress() {
  bool moved = false;
  for (size_t l = 0; l < plan_.lanes.size(); ++l) {
    const Lane& lane = plan_.lanes[l];
    LaneState& state = lanes_[l];
    while (state.next < lane.steps.size()) {
      const Step& step = lane.steps[state.next];
      StepResult result;
      if (stepShape(step.op).independent) {
        ASSIGN_OR_RETURN(result, tryIndependent(step, lane.channel, state));
      } else {
        ASSIGN_OR_RETURN(result, tryDependent(step, lane.channel));
      }
      if (result != StepResult::kBlocked) moved = true;
      if (result != StepResult::kDone) break;
      state = LaneState{state.next + 1};
      if (state.next == lane.steps.size()) --lanesLeft_;
    }
  }
  return moved;
}

void PlanRun::waitingOn(std::vector<int>& peers) const {
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
       << lane.steps.size() << " (" << stepOpName(s.op);
    if (s.nrecv) os << " waiting on rank " << s.recvPeers[0];
    if (s.nsend) os << (s.nrecv ? "," : "") << " sending to rank " << s.sendPeers[0];
    os << ")";
  }
  return os.str();
}

}  // namespace braid
