#include "algorithms/plan_simulator.h"

#include <array>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <tuple>

#include "algorithms/algorithms.h"

namespace braid {

namespace {

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// One symbolic element.
struct Value {
  enum class Kind : uint8_t { kGarbage, kToken, kPartial };
  Kind kind = Kind::kGarbage;
  bool finalized = false;
  int32_t origin = -1;  // token: the call (for collectives the rank) whose Input it came from
  uint64_t index = 0;   // token: element of the origin's Input; partial: element it belongs to
  uint64_t mask = 0;    // partial: ranks whose contributions it holds
  uint64_t expr = 0;    // partial: fingerprint of the combination order
};

Value partialOf(int rank, uint64_t index) {
  Value v;
  v.kind = Value::Kind::kPartial;
  v.index = index;
  v.mask = uint64_t{1} << rank;
  v.expr = mix(mix(static_cast<uint64_t>(rank) + 1) ^ index);
  return v;
}

Value tokenOf(int origin, uint64_t index) {
  Value v;
  v.kind = Value::Kind::kToken;
  v.origin = origin;
  v.index = index;
  return v;
}

std::string valueText(const Value& v) {
  std::ostringstream os;
  switch (v.kind) {
    case Value::Kind::kGarbage: return "garbage";
    case Value::Kind::kToken: os << "token(" << v.origin << "," << v.index << ")"; break;
    case Value::Kind::kPartial:
      os << "partial(index " << v.index << ", ranks 0x" << std::hex << v.mask << std::dec
         << (v.finalized ? ", finalized" : "") << ")";
      break;
  }
  return os.str();
}

bool isReduction(Collective coll) {
  return coll == Collective::kAllReduce || coll == Collective::kReduce ||
         coll == Collective::kReduceScatter;
}

bool isPointToPoint(Collective coll) {
  return coll == Collective::kSend || coll == Collective::kRecv;
}

// Extents in elements, as the API defines them (the simulator's own oracle, not the builders').
std::pair<uint64_t, uint64_t> expectedExtents(const PlanRequest& q) {
  const uint64_t c = q.count;
  const uint64_t n = q.nranks;
  const bool root = q.rank == q.root;
  switch (q.coll) {
    case Collective::kAllReduce: return {c, c};
    case Collective::kBroadcast: return {root ? c : 0, c};
    case Collective::kReduce: return {c, root ? c : 0};
    case Collective::kAllGather: return {c, n * c};
    case Collective::kReduceScatter: return {n * c, c};
    case Collective::kAllToAll: return {n * c, n * c};
    case Collective::kSend: return {c, 0};
    case Collective::kRecv: return {0, c};
  }
  return {0, 0};
}

using Slot = std::vector<Value>;

struct Fifo {
  int from = 0;
  int to = 0;
  int channel = 0;
  std::deque<Slot> slots;
};

struct StepLinks {
  std::array<Fifo*, kMaxStepPeers> recv{};
  std::array<Fifo*, kMaxStepPeers> send{};
};

struct CallState {
  const SimCall* call = nullptr;
  int rank = 0;
  uint64_t es = 1;
  std::vector<Value> user;  // Input and Output, aliased as the request says
  std::vector<Value> scratch;
  uint64_t inBase = 0, inElems = 0, outBase = 0, outElems = 0;
  std::vector<Value> initialInput;
};

struct LaneState {
  int call = 0;
  int lane = 0;
  size_t step = 0;
  bool sendDone = false;  // the halves of an independent step
  bool recvDone = false;
  std::vector<StepLinks> links;
};

enum class Action { kNone, kWhole, kSendHalf, kRecvHalf };

std::string refText(BufferRef ref) {
  static constexpr std::array<const char*, 4> kNames = {"none", "in", "out", "scratch"};
  return std::string(kNames[static_cast<int>(ref.buffer)]) + "+" + std::to_string(ref.offset);
}

std::string stepLabel(const Step& s) {
  std::ostringstream os;
  os << stepOpName(s.op) << " bytes=" << s.bytes;
  if (s.sendBytes != s.bytes) os << "/" << s.sendBytes;
  for (int i = 0; i < s.nrecv; ++i) os << (i ? "," : " from=") << s.recvPeers[i];
  for (int i = 0; i < s.nsend; ++i) os << (i ? "," : " to=") << s.sendPeers[i];
  const StepShape shape = stepShape(s.op);
  if (shape.readsSrc) os << " src=" << refText(s.src);
  if (shape.readsSrc2) os << " src2=" << refText(s.src2);
  if (shape.writesDst) os << " dst=" << refText(s.dst);
  if (s.flags & kStepFinalize) os << " finalize";
  if (s.flags & kStepCallCheck) os << " callCheck";
  return os.str();
}

class Simulator {
 public:
  Simulator(const std::vector<SimCall>& calls, const SimulationOptions& options)
      : calls_(calls), options_(options), rng_(options.seed) {}

  Status run() {
    RETURN_IF_ERROR(setup());
    RETURN_IF_ERROR(execute());
    return checkResults();
  }

 private:
  Status setup();
  Status setupCall(size_t i);
  Status execute();
  Action enabled(const LaneState& ls);
  Status fire(LaneState& ls, Action action);
  Status checkResults();
  Status checkCallOutput(const CallState& cs);

  Fifo* connector(int from, int to, int channel) {
    auto& slot = fifos_[{from, to, channel}];
    if (!slot) slot = std::make_unique<Fifo>(Fifo{from, to, channel, {}});
    return slot.get();
  }

  Result<Value*> locate(CallState& cs, BufferRef ref, uint64_t bytes);
  Status read(CallState& cs, BufferRef ref, uint64_t bytes, std::vector<Value>& out);
  Status write(CallState& cs, BufferRef ref, const std::vector<Value>& values);
  Status combine(Value& acc, const Value& v) const;
  Status finalize(Value& v) const;
  Status popSlot(Fifo* fifo, uint32_t bytes, uint64_t es, Slot& out);

  std::string where(const LaneState& ls) const {
    const CallState& cs = states_[ls.call];
    const Step& s = cs.call->plan.lanes[ls.lane].steps[ls.step];
    return "rank " + std::to_string(cs.rank) + " lane " + std::to_string(ls.lane) + " step " +
           std::to_string(ls.step) + " (" + stepLabel(s) + ")";
  }

  const std::vector<SimCall>& calls_;
  SimulationOptions options_;
  std::mt19937_64 rng_;
  bool collective_ = true;
  int nranks_ = 1;
  uint64_t fullMask_ = 1;
  std::vector<CallState> states_;
  std::vector<LaneState> lanes_;
  std::map<std::tuple<int, int, int>, std::unique_ptr<Fifo>> fifos_;
  std::vector<int> sendOrigin_;  // for each Recv call: the Send call it matches
  std::set<std::tuple<int, int, int, int>> usedConnectors_;  // (rank, from, to, channel)
};

Status Simulator::setup() {
  if (calls_.empty()) return invalidArgument("nothing to simulate");
  if (options_.nslots < 1) return invalidArgument("nslots below 1");
  const PlanRequest& first = calls_[0].request;
  nranks_ = first.nranks;
  if (nranks_ < 1 || nranks_ > 64) return invalidArgument("the simulator handles 1..64 ranks");
  fullMask_ = nranks_ == 64 ? ~uint64_t{0} : (uint64_t{1} << nranks_) - 1;
  collective_ = !isPointToPoint(first.coll);
  for (size_t i = 0; i < calls_.size(); ++i) {
    const PlanRequest& q = calls_[i].request;
    if (q.nranks != nranks_) return invalidArgument("calls disagree on nranks");
    if (collective_) {
      if (q.coll != first.coll || q.count != first.count || q.elemSize != first.elemSize ||
          q.root != first.root || q.inPlace != first.inPlace) {
        return invalidArgument("calls are not one collective");
      }
      if (q.rank != static_cast<int>(i)) return invalidArgument("calls[r] must be rank r's");
    } else if (!isPointToPoint(q.coll)) {
      return invalidArgument("point-to-point calls mixed with a collective");
    }
  }
  if (collective_ && static_cast<int>(calls_.size()) != nranks_) {
    return invalidArgument("a collective needs one call per rank");
  }
  if (!collective_) {
    // The k-th Send from a to b matches the k-th Recv at b from a.
    std::map<std::pair<int, int>, std::deque<int>> pending;
    for (size_t i = 0; i < calls_.size(); ++i) {
      const PlanRequest& q = calls_[i].request;
      if (q.coll == Collective::kSend) pending[{q.rank, q.peer}].push_back(static_cast<int>(i));
    }
    sendOrigin_.assign(calls_.size(), -1);
    for (size_t i = 0; i < calls_.size(); ++i) {
      const PlanRequest& q = calls_[i].request;
      if (q.coll != Collective::kRecv) continue;
      auto& queue = pending[{q.peer, q.rank}];
      if (queue.empty()) return invalidArgument("a Recv without a matching Send");
      const int s = queue.front();
      queue.pop_front();
      if (calls_[s].request.count != q.count || calls_[s].request.elemSize != q.elemSize) {
        return invalidArgument("a Send and its Recv disagree on the size");
      }
      sendOrigin_[i] = s;
    }
    for (const auto& [key, queue] : pending) {
      if (!queue.empty()) return invalidArgument("a Send without a matching Recv");
    }
  }
  states_.resize(calls_.size());
  for (size_t i = 0; i < calls_.size(); ++i) {
    Status status = setupCall(i);
    if (!status.ok()) return status.withContext("rank " + std::to_string(calls_[i].request.rank));
  }
  return okStatus();
}

Status Simulator::setupCall(size_t i) {
  const SimCall& call = calls_[i];
  const PlanRequest& q = call.request;
  const Plan& plan = call.plan;
  CallState& cs = states_[i];
  cs.call = &call;
  cs.rank = q.rank;
  cs.es = q.elemSize;
  if (plan.rank != q.rank || plan.nranks != q.nranks || plan.coll != q.coll ||
      plan.elemSize != q.elemSize) {
    return internalError("plan identity differs from its request: " + describePlan(plan));
  }
  const auto [inElems, outElems] = expectedExtents(q);
  if (plan.inputBytes != inElems * cs.es || plan.outputBytes != outElems * cs.es) {
    return internalError("plan extents in=" + std::to_string(plan.inputBytes) +
                         " out=" + std::to_string(plan.outputBytes) + " differ from the API's " +
                         std::to_string(inElems * cs.es) + " and " +
                         std::to_string(outElems * cs.es));
  }
  if (q.count == 0 && !plan.lanes.empty()) return internalError("count 0 with a non-empty plan");
  if (plan.scratchBytes % cs.es != 0) return internalError("scratch is not whole elements");
  const uint32_t slotBytes = options_.slotBytes ? options_.slotBytes : q.chunkBytes;
  RETURN_IF_ERROR(validatePlan(plan, slotBytes).withContext("validatePlan"));

  cs.inElems = inElems;
  cs.outElems = outElems;
  const bool aliased = q.inPlace && collective_;
  if (!aliased) {
    cs.user.resize(inElems + outElems);
    cs.inBase = 0;
    cs.outBase = inElems;
  } else if (q.coll == Collective::kAllGather) {
    cs.user.resize(outElems);
    cs.outBase = 0;
    cs.inBase = static_cast<uint64_t>(q.rank) * q.count;
  } else if (q.coll == Collective::kReduceScatter) {
    cs.user.resize(inElems);
    cs.inBase = 0;
    cs.outBase = static_cast<uint64_t>(q.rank) * q.count;
  } else {
    cs.user.resize(std::max(inElems, outElems));
    cs.inBase = 0;
    cs.outBase = 0;
  }
  const int origin = collective_ ? q.rank : static_cast<int>(i);
  for (uint64_t e = 0; e < inElems; ++e) {
    cs.user[cs.inBase + e] = isReduction(q.coll) ? partialOf(q.rank, e) : tokenOf(origin, e);
  }
  cs.initialInput.assign(cs.user.begin() + cs.inBase, cs.user.begin() + cs.inBase + inElems);
  cs.scratch.resize(plan.scratchBytes / cs.es);

  // Connectors of this call; two calls of one rank must not share one (their slots would mix).
  std::set<std::tuple<int, int, int, int>> mine;  // (rank, from, to, channel)
  for (size_t l = 0; l < plan.lanes.size(); ++l) {
    const Lane& lane = plan.lanes[l];
    if (lane.steps.empty()) continue;
    LaneState ls;
    ls.call = static_cast<int>(i);
    ls.lane = static_cast<int>(l);
    for (const Step& s : lane.steps) {
      StepLinks links;
      for (int p = 0; p < s.nrecv; ++p) {
        links.recv[p] = connector(s.recvPeers[p], q.rank, lane.channel);
        mine.insert({q.rank, s.recvPeers[p], q.rank, lane.channel});
      }
      for (int p = 0; p < s.nsend; ++p) {
        links.send[p] = connector(q.rank, s.sendPeers[p], lane.channel);
        mine.insert({q.rank, q.rank, s.sendPeers[p], lane.channel});
      }
      ls.links.push_back(links);
    }
    lanes_.push_back(std::move(ls));
  }
  for (const auto& key : mine) {
    if (!usedConnectors_.insert(key).second) {
      return invalidArgument("two calls of one rank use the same connector");
    }
  }
  return okStatus();
}

Action Simulator::enabled(const LaneState& ls) {
  const CallState& cs = states_[ls.call];
  const Step& s = cs.call->plan.lanes[ls.lane].steps[ls.step];
  const StepLinks& links = ls.links[ls.step];
  const StepShape shape = stepShape(s.op);
  // A transfer of 0 bytes posts no slot and takes none, except in a call check.
  const bool check = (s.flags & kStepCallCheck) != 0;
  bool canRecv = true;
  for (int p = 0; (s.bytes > 0 || check) && p < s.nrecv; ++p) {
    canRecv = canRecv && !links.recv[p]->slots.empty();
  }
  const uint32_t sent = shape.independent ? s.sendBytes : s.bytes;
  bool canSend = true;
  for (int p = 0; (sent > 0 || check) && p < s.nsend; ++p) {
    canSend = canSend && links.send[p]->slots.size() < static_cast<size_t>(options_.nslots);
  }
  if (shape.independent) {
    const bool sendOk = !ls.sendDone && canSend;
    const bool recvOk = !ls.recvDone && canRecv;
    if (sendOk && recvOk) return (rng_() & 1) ? Action::kSendHalf : Action::kRecvHalf;
    if (sendOk) return Action::kSendHalf;
    if (recvOk) return Action::kRecvHalf;
    return Action::kNone;
  }
  if ((shape.recvs && !canRecv) || (shape.sends && !canSend)) return Action::kNone;
  return Action::kWhole;
}

Status Simulator::execute() {
  std::vector<int> active;
  for (size_t i = 0; i < lanes_.size(); ++i) active.push_back(static_cast<int>(i));
  while (!active.empty()) {
    const size_t start = rng_() % active.size();
    size_t chosen = active.size();
    Action action = Action::kNone;
    for (size_t k = 0; k < active.size(); ++k) {
      const size_t at = (start + k) % active.size();
      action = enabled(lanes_[active[at]]);
      if (action != Action::kNone) {
        chosen = at;
        break;
      }
    }
    if (chosen == active.size()) {
      std::ostringstream os;
      os << "deadlock: no lane can progress;";
      int shown = 0;
      for (int idx : active) {
        if (shown++ == 8) {
          os << " ...";
          break;
        }
        os << " [" << where(lanes_[idx]) << "]";
      }
      return internalError(os.str());
    }
    // Let the chosen lane run ahead a little, sometimes a lot, to reach more interleavings.
    LaneState& ls = lanes_[active[chosen]];
    const int burst = (rng_() % 8 == 0) ? 64 : 1 + static_cast<int>(rng_() % 3);
    const size_t total = states_[ls.call].call->plan.lanes[ls.lane].steps.size();
    for (int b = 0; b < burst && action != Action::kNone; ++b) {
      RETURN_IF_ERROR(fire(ls, action));
      if (ls.step == total) break;
      action = enabled(ls);
    }
    if (ls.step == total) {
      active[chosen] = active.back();
      active.pop_back();
    }
  }
  for (const auto& [key, fifo] : fifos_) {
    if (!fifo->slots.empty()) {
      return internalError(std::to_string(fifo->slots.size()) + " slot(s) left unreceived on " +
                           std::to_string(fifo->from) + "->" + std::to_string(fifo->to) +
                           " channel " + std::to_string(fifo->channel));
    }
  }
  return okStatus();
}

Result<Value*> Simulator::locate(CallState& cs, BufferRef ref, uint64_t bytes) {
  if (ref.offset % cs.es != 0 || bytes % cs.es != 0) {
    return internalError("access " + refText(ref) + " is not whole elements");
  }
  const uint64_t first = ref.offset / cs.es;
  const uint64_t n = bytes / cs.es;
  uint64_t extent = 0;
  Value* base = nullptr;
  switch (ref.buffer) {
    case BufferId::kNone: return internalError("access to no buffer");
    case BufferId::kInput:
      extent = cs.inElems;
      base = cs.user.data() + cs.inBase;
      break;
    case BufferId::kOutput:
      extent = cs.outElems;
      base = cs.user.data() + cs.outBase;
      break;
    case BufferId::kScratch:
      extent = cs.scratch.size();
      base = cs.scratch.data();
      break;
  }
  if (first > extent || n > extent - first) {
    return internalError("access " + refText(ref) + " + " + std::to_string(bytes) +
                         " bytes runs outside its buffer of " + std::to_string(extent * cs.es));
  }
  return base + first;
}

Status Simulator::read(CallState& cs, BufferRef ref, uint64_t bytes, std::vector<Value>& out) {
  ASSIGN_OR_RETURN(Value * p, locate(cs, ref, bytes));
  out.assign(p, p + bytes / cs.es);
  for (size_t e = 0; e < out.size(); ++e) {
    if (out[e].kind == Value::Kind::kGarbage) {
      return internalError("reads element " + std::to_string(e) + " of " + refText(ref) +
                           ", which nothing wrote");
    }
  }
  return okStatus();
}

Status Simulator::write(CallState& cs, BufferRef ref, const std::vector<Value>& values) {
  if (ref.buffer == BufferId::kInput) return internalError("writes the Input buffer");
  ASSIGN_OR_RETURN(Value * p, locate(cs, ref, values.size() * cs.es));
  std::copy(values.begin(), values.end(), p);
  return okStatus();
}

Status Simulator::combine(Value& acc, const Value& v) const {
  if (acc.kind != Value::Kind::kPartial || v.kind != Value::Kind::kPartial) {
    return internalError("reduces " + valueText(acc) + " with " + valueText(v));
  }
  if (acc.index != v.index) {
    return internalError("reduces element " + std::to_string(acc.index) + " with element " +
                         std::to_string(v.index));
  }
  if (acc.mask & v.mask) {
    return internalError("counts a rank twice: " + valueText(acc) + " + " + valueText(v));
  }
  if (acc.finalized || v.finalized) {
    return internalError("reduces after finalize: " + valueText(acc) + " + " + valueText(v));
  }
  acc.mask |= v.mask;
  // ⊕ commutes but does not associate: the fingerprint is order-free per pair only.
  const uint64_t lo = std::min(acc.expr, v.expr);
  const uint64_t hi = std::max(acc.expr, v.expr);
  acc.expr = mix(mix(lo) ^ (hi * 0x2545f4914f6cdd1dULL));
  return okStatus();
}

Status Simulator::finalize(Value& v) const {
  if (v.kind != Value::Kind::kPartial) return internalError("finalizes " + valueText(v));
  if (v.finalized) return internalError("finalizes twice: " + valueText(v));
  if (v.mask != fullMask_) return internalError("finalizes an incomplete " + valueText(v));
  v.finalized = true;
  return okStatus();
}

Status Simulator::popSlot(Fifo* fifo, uint32_t bytes, uint64_t es, Slot& out) {
  out = std::move(fifo->slots.front());
  fifo->slots.pop_front();
  if (out.size() * es != bytes) {
    return internalError("receives a slot of " + std::to_string(out.size() * es) + " bytes from " +
                         std::to_string(fifo->from) + " but expects " + std::to_string(bytes));
  }
  return okStatus();
}

Status Simulator::fire(LaneState& ls, Action action) {
  CallState& cs = states_[ls.call];
  const Step& s = cs.call->plan.lanes[ls.lane].steps[ls.step];
  const StepLinks& links = ls.links[ls.step];
  const StepShape shape = stepShape(s.op);
  const bool finalizing = (s.flags & kStepFinalize) != 0;
  Status status;
  auto fail = [&](const Status& st) { return st.withContext(where(ls)); };

  if (s.flags & kStepCallCheck) {
    // Empty slots: they carry only the descriptor, which the executors compare.
    if (action != Action::kRecvHalf) {
      for (int p = 0; p < s.nsend; ++p) links.send[p]->slots.emplace_back();
    }
    for (int p = 0; action != Action::kSendHalf && p < s.nrecv; ++p) {
      Slot empty;
      status = popSlot(links.recv[p], 0, cs.es, empty);
      if (!status.ok()) return fail(status);
    }
    ls.sendDone = ls.sendDone || action == Action::kSendHalf;
    ls.recvDone = ls.recvDone || action == Action::kRecvHalf;
  } else if (action == Action::kSendHalf && s.sendBytes == 0) {
    ls.sendDone = true;
  } else if (action == Action::kRecvHalf && s.bytes == 0) {
    ls.recvDone = true;
  } else if (action == Action::kWhole && s.bytes == 0) {
    // an empty dependent or local step does nothing
  } else if (action == Action::kSendHalf) {
    Slot values;
    status = read(cs, s.src, s.sendBytes, values);
    if (!status.ok()) return fail(status);
    for (int p = 0; p < s.nsend; ++p) links.send[p]->slots.push_back(values);
    ls.sendDone = true;
  } else if (action == Action::kRecvHalf) {
    Slot values;
    status = popSlot(links.recv[0], s.bytes, cs.es, values);
    if (!status.ok()) return fail(status);
    if (shape.reduces) {
      Slot local;
      status = read(cs, s.src2, s.bytes, local);
      for (size_t e = 0; status.ok() && e < values.size(); ++e)
        status = combine(values[e], local[e]);
      if (!status.ok()) return fail(status);
    }
    for (size_t e = 0; finalizing && status.ok() && e < values.size(); ++e) {
      status = finalize(values[e]);
    }
    if (status.ok()) status = write(cs, s.dst, values);
    if (!status.ok()) return fail(status);
    ls.recvDone = true;
  } else {
    // Operands in the executors' order: src, src2, then each received slot.
    std::vector<Slot> inputs;
    if (shape.readsSrc) {
      inputs.emplace_back();
      status = read(cs, s.src, s.bytes, inputs.back());
      if (!status.ok()) return fail(status);
    }
    if (shape.readsSrc2) {
      inputs.emplace_back();
      status = read(cs, s.src2, s.bytes, inputs.back());
      if (!status.ok()) return fail(status);
    }
    for (int p = 0; shape.recvs && p < s.nrecv; ++p) {
      inputs.emplace_back();
      status = popSlot(links.recv[p], s.bytes, cs.es, inputs.back());
      if (!status.ok()) return fail(status);
    }
    Slot result = inputs.at(0);
    for (size_t k = 1; shape.reduces && k < inputs.size(); ++k) {
      for (size_t e = 0; status.ok() && e < result.size(); ++e)
        status = combine(result[e], inputs[k][e]);
    }
    for (size_t e = 0; finalizing && status.ok() && e < result.size(); ++e) {
      status = finalize(result[e]);
    }
    if (status.ok() && shape.writesDst) status = write(cs, s.dst, result);
    if (!status.ok()) return fail(status);
    for (int p = 0; shape.sends && p < s.nsend; ++p) links.send[p]->slots.push_back(result);
  }
  if (!shape.independent || (ls.sendDone && ls.recvDone)) {
    ++ls.step;
    ls.sendDone = false;
    ls.recvDone = false;
  }
  return okStatus();
}

Status Simulator::checkCallOutput(const CallState& cs) {
  const PlanRequest& q = cs.call->request;
  const Value* out = cs.user.data() + cs.outBase;
  const uint64_t count = q.count;
  const bool aliased = q.inPlace && collective_;
  if (!aliased) {
    for (uint64_t e = 0; e < cs.inElems; ++e) {
      const Value& now = cs.user[cs.inBase + e];
      const Value& was = cs.initialInput[e];
      if (now.kind != was.kind || now.index != was.index || now.mask != was.mask ||
          now.origin != was.origin) {
        return internalError("Input element " + std::to_string(e) + " changed");
      }
    }
  }
  int bad = 0;
  std::ostringstream os;
  for (uint64_t e = 0; e < cs.outElems && bad < 4; ++e) {
    const Value& v = out[e];
    std::string problem;
    if (isReduction(q.coll)) {
      const uint64_t index = q.coll == Collective::kReduceScatter ? q.rank * count + e : e;
      if (v.kind != Value::Kind::kPartial || v.index != index || v.mask != fullMask_) {
        problem = "expected the full reduction of element " + std::to_string(index);
      } else if (nranks_ > 1 && !v.finalized) {
        problem = "never finalized";
      } else if (q.coll == Collective::kAllReduce) {
        const CallState& rank0 = states_[0];
        if (v.expr != rank0.user[rank0.outBase + e].expr) {
          problem = "reduced in a different order than on rank 0";
        }
      }
    } else {
      Value want;
      switch (q.coll) {
        case Collective::kBroadcast: want = tokenOf(q.root, e); break;
        case Collective::kAllGather: want = tokenOf(static_cast<int>(e / count), e % count); break;
        case Collective::kAllToAll:
          want = tokenOf(static_cast<int>(e / count), q.rank * count + e % count);
          break;
        case Collective::kRecv: want = tokenOf(sendOrigin_[cs.call - calls_.data()], e); break;
        default: break;
      }
      if (v.kind != want.kind || v.origin != want.origin || v.index != want.index || v.finalized) {
        problem = "expected " + valueText(want);
      }
    }
    if (!problem.empty()) {
      os << (bad++ ? "; " : "") << "Output element " << e << " holds " << valueText(v) << ", "
         << problem;
    }
  }
  if (bad) return internalError(os.str());
  return okStatus();
}

Status Simulator::checkResults() {
  for (const CallState& cs : states_) {
    Status status = checkCallOutput(cs);
    if (!status.ok()) return status.withContext("rank " + std::to_string(cs.rank) + " result");
  }
  return okStatus();
}

}  // namespace

Status simulate(const std::vector<SimCall>& calls, const SimulationOptions& options) {
  Simulator sim(calls, options);
  return sim.run();
}

Status buildAndSimulate(const PlanRequest& request, const SimulationOptions& options) {
  std::vector<SimCall> calls;
  if (isPointToPoint(request.coll)) {
    PlanRequest send = request;
    send.coll = Collective::kSend;
    PlanRequest recv = request;
    recv.coll = Collective::kRecv;
    if (request.coll == Collective::kRecv) std::swap(send.rank, send.peer);
    recv.rank = send.peer;
    recv.peer = send.rank;
    for (const PlanRequest& q : {send, recv}) {
      ASSIGN_OR_RETURN(Plan plan, buildPlan(q));
      if (options.callCheckChannel >= 0) addCallCheckLane(plan, q, options.callCheckChannel);
      calls.push_back({q, std::move(plan)});
    }
  } else {
    for (int r = 0; r < request.nranks; ++r) {
      PlanRequest q = request;
      q.rank = r;
      ASSIGN_OR_RETURN(Plan plan, buildPlan(q));
      if (options.callCheckChannel >= 0) addCallCheckLane(plan, q, options.callCheckChannel);
      calls.push_back({q, std::move(plan)});
    }
  }
  return simulate(calls, options);
}

std::string describeRequest(const PlanRequest& q) {
  std::ostringstream os;
  os << collectiveName(q.coll) << "/" << algorithmName(q.algo) << " n=" << q.nranks
     << " rank=" << q.rank << " count=" << q.count << " es=" << q.elemSize
     << " chunk=" << q.chunkBytes << " ch=" << q.nchannels << (q.inPlace ? " inplace" : "")
     << " root=" << q.root << " peer=" << q.peer;
  if (!q.ring.empty()) {
    os << " ring=[";
    for (size_t i = 0; i < q.ring.size(); ++i) os << (i ? "," : "") << q.ring[i];
    os << "]";
  }
  return os.str();
}

}  // namespace braid
