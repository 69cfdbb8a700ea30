#include "algorithms/plan.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <set>
#include <sstream>
#include <tuple>

namespace braid {

std::string_view collectiveName(Collective coll) {
  static constexpr std::array<std::string_view, kNumCollectives> kNames = {
      "allreduce", "broadcast", "reduce", "allgather", "reducescatter", "alltoall", "send", "recv"};
  return kNames[static_cast<int>(coll)];
}

std::string_view algorithmName(Algorithm algo) {
  static constexpr std::array<std::string_view, kNumAlgorithms> kNames = {
      "ring", "pairwise", "tree", "rhd", "rd", "direct", "hier", "hier_rhd"};
  return kNames[static_cast<int>(algo)];
}

std::string_view stepOpName(StepOp op) {
  switch (op) {
    case StepOp::kSend: return "send";
    case StepOp::kRecv: return "recv";
    case StepOp::kRecvReduceSend: return "recvReduceSend";
    case StepOp::kRecvReduceCopy: return "recvReduceCopy";
    case StepOp::kRecvCopySend: return "recvCopySend";
    case StepOp::kRecvReduceCopySend: return "recvReduceCopySend";
    case StepOp::kCopySend: return "copySend";
    case StepOp::kLocalCopy: return "localCopy";
    case StepOp::kLocalReduce: return "localReduce";
    case StepOp::kSendRecv: return "sendRecv";
    case StepOp::kSendRecvReduce: return "sendRecvReduce";
  }
  return "invalid";
}

StepShape stepShape(StepOp op) {
  //                                recvs  sends  src    src2   dst    reduce indep
  switch (op) {
    case StepOp::kSend: return {false, true, true, false, false, false, false};
    case StepOp::kRecv: return {true, false, false, false, true, false, false};
    case StepOp::kRecvReduceSend: return {true, true, true, false, false, true, false};
    case StepOp::kRecvReduceCopy: return {true, false, true, false, true, true, false};
    case StepOp::kRecvCopySend: return {true, true, false, false, true, false, false};
    case StepOp::kRecvReduceCopySend: return {true, true, true, false, true, true, false};
    case StepOp::kCopySend: return {false, true, true, false, true, false, false};
    case StepOp::kLocalCopy: return {false, false, true, false, true, false, false};
    case StepOp::kLocalReduce: return {false, false, true, true, true, true, false};
    case StepOp::kSendRecv: return {true, true, true, false, true, false, true};
    case StepOp::kSendRecvReduce: return {true, true, true, true, true, true, true};
  }
  return {};
}

size_t Plan::stepCount() const {
  size_t n = 0;
  for (const Lane& lane : lanes) n += lane.steps.size();
  return n;
}

namespace {

std::string refText(BufferRef ref) {
  static constexpr std::array<std::string_view, 4> kNames = {"-", "in", "out", "scratch"};
  std::ostringstream os;
  os << kNames[static_cast<int>(ref.buffer)];
  if (ref.buffer != BufferId::kNone) os << "+" << ref.offset;
  return os.str();
}

std::string stepText(const Step& s) {
  std::ostringstream os;
  os << stepOpName(s.op) << " bytes=" << s.bytes;
  if (s.sendBytes != s.bytes) os << " sendBytes=" << s.sendBytes;
  if (s.nrecv) {
    os << " from=";
    for (int i = 0; i < s.nrecv; ++i) os << (i ? "," : "") << s.recvPeers[i];
  }
  if (s.nsend) {
    os << " to=";
    for (int i = 0; i < s.nsend; ++i) os << (i ? "," : "") << s.sendPeers[i];
  }
  if (s.src.buffer != BufferId::kNone) os << " src=" << refText(s.src);
  if (s.src2.buffer != BufferId::kNone) os << " src2=" << refText(s.src2);
  if (s.dst.buffer != BufferId::kNone) os << " dst=" << refText(s.dst);
  if (s.flags & kStepFinalize) os << " finalize";
  if (s.flags & kStepCallCheck) os << " callCheck";
  if (s.flags & kStepLendable) os << " lendable";
  return os.str();
}

Status checkRange(const Plan& plan, BufferRef ref, uint64_t bytes, const char* what) {
  uint64_t extent = 0;
  switch (ref.buffer) {
    case BufferId::kNone: return invalidUsage(std::string(what) + " names no buffer");
    case BufferId::kInput: extent = plan.inputBytes; break;
    case BufferId::kOutput: extent = plan.outputBytes; break;
    case BufferId::kScratch: extent = plan.scratchBytes; break;
  }
  if (ref.offset > extent || bytes > extent - ref.offset) {
    return internalError(std::string(what) + " " + refText(ref) + " + " + std::to_string(bytes) +
                         " runs past its buffer of " + std::to_string(extent) + " bytes");
  }
  if (ref.offset % plan.elemSize != 0) {
    return internalError(std::string(what) + " offset is not a whole element");
  }
  return okStatus();
}

Status checkPeers(const Plan& plan, const int32_t* peers, int n, const char* what) {
  if (n < 1 || n > kMaxStepPeers) return internalError(std::string(what) + " peer count invalid");
  for (int i = 0; i < n; ++i) {
    if (peers[i] < 0 || peers[i] >= plan.nranks || peers[i] == plan.rank) {
      return internalError(std::string(what) + " peer " + std::to_string(peers[i]) + " invalid");
    }
  }
  return okStatus();
}

// A call check moves no data: peers only, as its op says, and nothing else.
Status validateCallCheck(const Plan& plan, const Step& s) {
  if (s.op != StepOp::kSend && s.op != StepOp::kRecv && s.op != StepOp::kSendRecv) {
    return internalError("call check that is not a send, recv or sendRecv");
  }
  if (s.bytes != 0 || s.sendBytes != 0 || (s.flags & kStepFinalize) != 0) {
    return internalError("call check that moves data");
  }
  if (s.src.buffer != BufferId::kNone || s.src2.buffer != BufferId::kNone ||
      s.dst.buffer != BufferId::kNone) {
    return internalError("call check that names a buffer");
  }
  const StepShape shape = stepShape(s.op);
  if (shape.recvs) RETURN_IF_ERROR(checkPeers(plan, s.recvPeers, s.nrecv, "recv"));
  if (shape.sends) RETURN_IF_ERROR(checkPeers(plan, s.sendPeers, s.nsend, "send"));
  if ((!shape.recvs && s.nrecv != 0) || (!shape.sends && s.nsend != 0) || s.nrecv > 1 ||
      s.nsend > 1) {
    return internalError("call check with stray or several peers");
  }
  return okStatus();
}

Status validateStep(const Plan& plan, const Step& s, uint32_t slotBytes) {
  if (s.flags & kStepCallCheck) return validateCallCheck(plan, s);
  const StepShape shape = stepShape(s.op);
  if (s.bytes % plan.elemSize != 0 || s.sendBytes % plan.elemSize != 0) {
    return internalError("size is not a whole number of elements");
  }
  if (!shape.independent && shape.recvs && shape.sends && s.bytes != s.sendBytes) {
    return internalError("dependent step with different send and recv sizes");
  }
  if (shape.recvs) {
    RETURN_IF_ERROR(checkPeers(plan, s.recvPeers, s.nrecv, "recv"));
    if (s.bytes > slotBytes) return internalError("recv larger than a slot");
    if (!shape.reduces && s.nrecv != 1) return internalError("copy from several peers");
  } else if (s.nrecv != 0) {
    return internalError("recv peers on a step that does not receive");
  }
  if (shape.sends) {
    RETURN_IF_ERROR(checkPeers(plan, s.sendPeers, s.nsend, "send"));
    if (s.sendBytes > slotBytes) return internalError("send larger than a slot");
  } else if (s.nsend != 0) {
    return internalError("send peers on a step that does not send");
  }
  const uint64_t srcBytes = shape.independent ? s.sendBytes : s.bytes;
  if (shape.readsSrc) RETURN_IF_ERROR(checkRange(plan, s.src, srcBytes, "src"));
  if (shape.readsSrc2) RETURN_IF_ERROR(checkRange(plan, s.src2, s.bytes, "src2"));
  if (shape.writesDst) {
    RETURN_IF_ERROR(checkRange(plan, s.dst, s.bytes, "dst"));
    if (s.dst.buffer == BufferId::kInput) return internalError("step writes the input buffer");
  }
  if (shape.reduces) {
    const int inputs =
        (shape.recvs ? s.nrecv : 0) + (shape.readsSrc && !shape.independent) + shape.readsSrc2;
    if (inputs < 2) return internalError("reduction with fewer than two inputs");
  }
  return okStatus();
}

}  // namespace

BufferRef lentSource(const Step& step) {
  const StepShape shape = stepShape(step.op);
  if (!shape.sends || (step.flags & kStepCallCheck)) return {};
  const bool asIs = step.op == StepOp::kSend || step.op == StepOp::kCopySend;
  if (shape.independent || (asIs && (step.flags & kStepFinalize) == 0)) return step.src;
  return shape.writesDst ? step.dst : BufferRef{};
}

void markLendableSends(Plan& plan, const PlanRequest& request) {
  // Input and Output as one space of bytes: apart out of place (no step writes Input then),
  // overlapping as the API lays them out in place.
  const uint64_t block = request.count * request.elemSize;
  uint64_t inputAt = 0;
  uint64_t outputAt = 0;
  if (!request.inPlace) {
    outputAt = plan.inputBytes;
  } else if (request.coll == Collective::kAllGather) {
    inputAt = static_cast<uint64_t>(request.rank) * block;
  } else if (request.coll == Collective::kReduceScatter) {
    outputAt = static_cast<uint64_t>(request.rank) * block;
  }
  auto place = [&](BufferRef ref) {
    return (ref.buffer == BufferId::kInput ? inputAt : outputAt) + ref.offset;
  };

  struct Write {
    uint64_t begin, end;
    size_t lane, step;
  };
  std::vector<Write> writes;
  for (size_t l = 0; l < plan.lanes.size(); ++l) {
    const std::vector<Step>& steps = plan.lanes[l].steps;
    for (size_t i = 0; i < steps.size(); ++i) {
      const Step& s = steps[i];
      if (stepShape(s.op).writesDst && s.dst.buffer == BufferId::kOutput && s.bytes > 0) {
        writes.push_back(Write{place(s.dst), place(s.dst) + s.bytes, l, i});
      }
    }
  }
  std::sort(writes.begin(), writes.end(),
            [](const Write& a, const Write& b) { return a.begin < b.begin; });
  std::vector<uint64_t> reach(writes.size());  // the furthest end of writes[0..i]
  for (size_t i = 0; i < writes.size(); ++i) {
    reach[i] = std::max(writes[i].end, i > 0 ? reach[i - 1] : 0);
  }

  for (size_t l = 0; l < plan.lanes.size(); ++l) {
    std::vector<Step>& steps = plan.lanes[l].steps;
    for (size_t i = 0; i < steps.size(); ++i) {
      Step& s = steps[i];
      s.flags = static_cast<uint8_t>(s.flags & ~kStepLendable);
      const BufferRef from = lentSource(s);
      const uint32_t bytes = stepShape(s.op).independent ? s.sendBytes : s.bytes;
      if ((from.buffer != BufferId::kInput && from.buffer != BufferId::kOutput) || bytes == 0) {
        continue;
      }
      const uint64_t begin = place(from);
      const uint64_t end = begin + bytes;
      // Writes that start before `end`, walked back while any of them may still reach `begin`.
      bool kept = true;
      size_t w = static_cast<size_t>(
          std::lower_bound(writes.begin(), writes.end(), end,
                           [](const Write& a, uint64_t at) { return a.begin < at; }) -
          writes.begin());
      while (kept && w > 0 && reach[w - 1] > begin) {
        const Write& write = writes[--w];
        if (write.end > begin) kept = write.lane == l && write.step <= i;
      }
      if (kept) s.flags |= kStepLendable;
    }
  }
}

uint64_t sendWindowFor(const Plan& plan, uint64_t budget) {
  std::set<std::pair<int, int>> connectors;  // (peer, channel)
  uint64_t largest = 0;
  for (const Lane& lane : plan.lanes) {
    for (const Step& s : lane.steps) {
      const StepShape shape = stepShape(s.op);
      const uint64_t footprint = ringPayloadBytes(shape.independent ? s.sendBytes : s.bytes);
      if (!shape.sends || footprint == 0) continue;
      largest = std::max(largest, footprint);
      for (int i = 0; i < s.nsend && i < kMaxStepPeers; ++i) {
        connectors.emplace(s.sendPeers[i], lane.channel);
      }
    }
  }
  if (connectors.empty()) return 0;
  return std::max(budget / connectors.size(), 3 * largest);
}

Status validatePlan(const Plan& plan, uint32_t slotBytes) {
  if (plan.elemSize == 0) return internalError("plan without an element size");
  // A connector is (peer, direction, channel); two lanes sharing one would interleave slots.
  std::set<std::tuple<int, int, int>> owner;  // (peer, direction, channel) -> used
  for (size_t l = 0; l < plan.lanes.size(); ++l) {
    const Lane& lane = plan.lanes[l];
    std::set<std::tuple<int, int, int>> mine;
    for (size_t i = 0; i < lane.steps.size(); ++i) {
      const Step& s = lane.steps[i];
      Status status = validateStep(plan, s, slotBytes);
      if (!status.ok()) {
        return status.withContext("lane " + std::to_string(l) + " step " + std::to_string(i) +
                                  " (" + stepText(s) + ")");
      }
      for (int p = 0; p < s.nrecv; ++p) mine.insert({s.recvPeers[p], 0, lane.channel});
      for (int p = 0; p < s.nsend; ++p) mine.insert({s.sendPeers[p], 1, lane.channel});
    }
    for (const auto& key : mine) {
      if (!owner.insert(key).second) {
        return internalError("lane " + std::to_string(l) + " shares a connector with another lane");
      }
    }
  }
  return okStatus();
}

std::string describePlan(const Plan& plan, bool all) {
  std::ostringstream os;
  os << collectiveName(plan.coll) << "/" << algorithmName(plan.algo) << " rank " << plan.rank << "/"
     << plan.nranks << ": " << plan.lanes.size() << " lanes, " << plan.stepCount()
     << " steps, in=" << plan.inputBytes << " out=" << plan.outputBytes
     << " scratch=" << plan.scratchBytes;
  if (all) {
    for (size_t l = 0; l < plan.lanes.size(); ++l) {
      os << "\n lane " << l << " (channel " << plan.lanes[l].channel << ")";
      for (const Step& s : plan.lanes[l].steps) os << "\n  " << stepText(s);
    }
  }
  return os.str();
}

namespace {

Step makeStep(StepOp op, uint32_t bytes) {
  Step s;
  s.op = op;
  s.bytes = bytes;
  s.sendBytes = bytes;
  return s;
}

void addRecv(Step& s, int peer) { s.recvPeers[s.nrecv++] = peer; }
void addSend(Step& s, int peer) { s.sendPeers[s.nsend++] = peer; }

}  // namespace

void addRecvPeer(Step& step, int peer) {
  assert(step.nrecv < kMaxStepPeers);
  addRecv(step, peer);
}

void addSendPeer(Step& step, int peer) {
  assert(step.nsend < kMaxStepPeers);
  addSend(step, peer);
}

Step makeSend(int peer, BufferRef src, uint32_t bytes) {
  Step s = makeStep(StepOp::kSend, bytes);
  addSend(s, peer);
  s.src = src;
  return s;
}

Step makeRecv(int peer, BufferRef dst, uint32_t bytes) {
  Step s = makeStep(StepOp::kRecv, bytes);
  addRecv(s, peer);
  s.dst = dst;
  return s;
}

Step makeRecvReduceSend(int recvPeer, int sendPeer, BufferRef src, uint32_t bytes) {
  Step s = makeStep(StepOp::kRecvReduceSend, bytes);
  addRecv(s, recvPeer);
  addSend(s, sendPeer);
  s.src = src;
  return s;
}

Step makeRecvReduceCopy(int recvPeer, BufferRef src, BufferRef dst, uint32_t bytes) {
  Step s = makeStep(StepOp::kRecvReduceCopy, bytes);
  addRecv(s, recvPeer);
  s.src = src;
  s.dst = dst;
  return s;
}

Step makeRecvCopySend(int recvPeer, int sendPeer, BufferRef dst, uint32_t bytes) {
  Step s = makeStep(StepOp::kRecvCopySend, bytes);
  addRecv(s, recvPeer);
  addSend(s, sendPeer);
  s.dst = dst;
  return s;
}

Step makeRecvReduceCopySend(int recvPeer, int sendPeer, BufferRef src, BufferRef dst,
                            uint32_t bytes) {
  Step s = makeStep(StepOp::kRecvReduceCopySend, bytes);
  addRecv(s, recvPeer);
  addSend(s, sendPeer);
  s.src = src;
  s.dst = dst;
  return s;
}

Step makeCopySend(int sendPeer, BufferRef src, BufferRef dst, uint32_t bytes) {
  Step s = makeStep(StepOp::kCopySend, bytes);
  addSend(s, sendPeer);
  s.src = src;
  s.dst = dst;
  return s;
}

Step makeLocalCopy(BufferRef src, BufferRef dst, uint32_t bytes) {
  Step s = makeStep(StepOp::kLocalCopy, bytes);
  s.src = src;
  s.dst = dst;
  return s;
}

Step makeLocalReduce(BufferRef src, BufferRef src2, BufferRef dst, uint32_t bytes) {
  Step s = makeStep(StepOp::kLocalReduce, bytes);
  s.src = src;
  s.src2 = src2;
  s.dst = dst;
  return s;
}

Step makeSendRecv(int sendPeer, BufferRef src, uint32_t sendBytes, int recvPeer, BufferRef dst,
                  uint32_t recvBytes) {
  Step s = makeStep(StepOp::kSendRecv, recvBytes);
  s.sendBytes = sendBytes;
  addSend(s, sendPeer);
  addRecv(s, recvPeer);
  s.src = src;
  s.dst = dst;
  return s;
}

Step makeCallCheck(int sendPeer, int recvPeer) {
  const StepOp op = sendPeer < 0 ? StepOp::kRecv : recvPeer < 0 ? StepOp::kSend : StepOp::kSendRecv;
  Step s = makeStep(op, 0);
  s.flags = kStepCallCheck;
  if (sendPeer >= 0) addSend(s, sendPeer);
  if (recvPeer >= 0) addRecv(s, recvPeer);
  return s;
}

Step makeSendRecvReduce(int sendPeer, BufferRef src, uint32_t sendBytes, int recvPeer,
                        BufferRef src2, BufferRef dst, uint32_t recvBytes) {
  Step s = makeStep(StepOp::kSendRecvReduce, recvBytes);
  s.sendBytes = sendBytes;
  addSend(s, sendPeer);
  addRecv(s, recvPeer);
  s.src = src;
  s.src2 = src2;
  s.dst = dst;
  return s;
}

}  // namespace braid
