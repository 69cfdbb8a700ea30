// The catalogue of algorithm builders and the checks every request passes before a builder sees it.
#include "algorithms/algorithms.h"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <string>

#include "algorithms/builder.h"

namespace braid {

namespace {

using Builder = Plan (*)(const PlanRequest&);

struct Entry {
  Algorithm algo;
  Builder build;
  std::vector<Collective> serves;
};

const std::vector<Entry>& catalogue() {
  using C = Collective;
  static const std::vector<Entry> kEntries = {
      {Algorithm::kRing,
       buildRingPlan,
       {C::kAllReduce, C::kBroadcast, C::kReduce, C::kAllGather, C::kReduceScatter}},
      {Algorithm::kPairwise, buildPairwisePlan, {C::kAllToAll, C::kSend, C::kRecv}},
      {Algorithm::kTree, buildTreePlan, {C::kAllReduce, C::kBroadcast, C::kReduce}},
      {Algorithm::kRhd, buildRhdPlan, {C::kAllReduce, C::kReduceScatter}},
      {Algorithm::kRd,
       buildRdPlan,
       {C::kAllReduce, C::kAllGather, C::kReduceScatter, C::kAllToAll}},
      {Algorithm::kDirect,
       buildDirectPlan,
       {C::kAllReduce, C::kBroadcast, C::kReduce, C::kAllGather, C::kReduceScatter}},
      {Algorithm::kHier, buildHierPlan, {C::kAllReduce}},
      {Algorithm::kHierRhd, buildHierRhdPlan, {C::kAllReduce}},
  };
  return kEntries;
}

const Entry* findEntry(Algorithm algo) {
  for (const Entry& e : catalogue()) {
    if (e.algo == algo) return &e;
  }
  return nullptr;
}

bool isRooted(Collective coll) {
  return coll == Collective::kBroadcast || coll == Collective::kReduce;
}
bool isPointToPoint(Collective coll) {
  return coll == Collective::kSend || coll == Collective::kRecv;
}

Status checkRequest(const PlanRequest& req) {
  const int n = req.nranks;
  if (static_cast<int>(req.coll) >= kNumCollectives) {
    return invalidArgument("unknown collective " + std::to_string(static_cast<int>(req.coll)));
  }
  if (static_cast<int>(req.algo) >= kNumAlgorithms) {
    return invalidArgument("unknown algorithm " + std::to_string(static_cast<int>(req.algo)));
  }
  if (!algorithmServes(req.algo, req.coll)) {
    return invalidArgument("algorithm " + std::string(algorithmName(req.algo)) +
                           " does not serve " + std::string(collectiveName(req.coll)));
  }
  if (n < 1) return invalidArgument("nranks " + std::to_string(n) + " is below 1");
  if (req.rank < 0 || req.rank >= n) {
    return invalidArgument("rank " + std::to_string(req.rank) + " out of range for " +
                           std::to_string(n) + " ranks");
  }
  if (isRooted(req.coll) && (req.root < 0 || req.root >= n)) {
    return invalidArgument("root " + std::to_string(req.root) + " out of range for " +
                           std::to_string(n) + " ranks");
  }
  if (isPointToPoint(req.coll) && (req.peer < 0 || req.peer >= n || req.peer == req.rank)) {
    return invalidArgument("peer " + std::to_string(req.peer) + " is not another rank of " +
                           std::to_string(n));
  }
  if (req.elemSize == 0) return invalidArgument("element size of zero");
  if (req.chunkBytes < req.elemSize) {
    return invalidArgument("chunkBytes " + std::to_string(req.chunkBytes) +
                           " is smaller than one element of " + std::to_string(req.elemSize) +
                           " bytes");
  }
  if (req.nchannels < 1 || req.nchannels > 64) {
    return invalidArgument("nchannels " + std::to_string(req.nchannels) + " outside 1..64");
  }
  // The largest extent is nranks blocks of count elements; it must fit in 64 bits.
  const uint64_t maxBytes = std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(n);
  if (req.count > maxBytes / req.elemSize) {
    return invalidArgument("count " + std::to_string(req.count) + " overflows the byte size");
  }
  if (!req.ring.empty()) {
    if (static_cast<int>(req.ring.size()) != n) {
      return invalidArgument("ring order has " + std::to_string(req.ring.size()) + " ranks, not " +
                             std::to_string(n));
    }
    std::vector<bool> seen(n, false);
    for (int r : req.ring) {
      if (r < 0 || r >= n || seen[r]) {
        return invalidArgument("ring order is not a permutation of the ranks (at " +
                               std::to_string(r) + ")");
      }
      seen[r] = true;
    }
  }
  if (!req.hosts.empty()) {
    if (static_cast<int>(req.hosts.size()) != n) {
      return invalidArgument("host list has " + std::to_string(req.hosts.size()) +
                             " entries, not " + std::to_string(n));
    }
    for (int h : req.hosts) {
      if (h < 0 || h >= n) {
        return invalidArgument("host number " + std::to_string(h) + " out of range");
      }
    }
  }
  return okStatus();
}

}  // namespace

bool algorithmServes(Algorithm algo, Collective coll) {
  const Entry* e = findEntry(algo);
  if (e == nullptr) return false;
  for (Collective c : e->serves) {
    if (c == coll) return true;
  }
  return false;
}

std::vector<Algorithm> algorithmsFor(Collective coll) {
  std::vector<Algorithm> algos;
  for (const Entry& e : catalogue()) {
    if (algorithmServes(e.algo, coll)) algos.push_back(e.algo);
  }
  return algos;
}

int minSlotsFor(Algorithm algo, Collective coll) {
  const bool cyclic = coll == Collective::kAllReduce || coll == Collective::kAllGather ||
                      coll == Collective::kReduceScatter;
  const bool ringInside = algo == Algorithm::kRing || algorithmUsesHosts(algo);
  return ringInside && cyclic ? 2 : 1;
}

bool algorithmUsesHosts(Algorithm algo) {
  return algo == Algorithm::kHier || algo == Algorithm::kHierRhd;
}

std::optional<Algorithm> findAlgorithm(std::string_view name) {
  for (int i = 0; i < kNumAlgorithms; ++i) {
    if (algorithmName(static_cast<Algorithm>(i)) == name) return static_cast<Algorithm>(i);
  }
  return std::nullopt;
}

namespace {

// Below these, working out whether the data can stand in for the check (a plan per rank) is
// cheap, and the check's extra hand-off is a visible share of the call's time.
constexpr int kDataCheckMaxRanks = 4;
constexpr uint64_t kDataCheckMaxBytes = 64 * 1024;

/// Whether some lane of `plan` posts a data slot to `peer` without waiting: its first step that
/// is not local (an out-of-place all-gather's own block is copied first) sends at once.
bool postsAtOnceTo(const Plan& plan, int peer) {
  for (const Lane& lane : plan.lanes) {
    auto first = std::find_if(lane.steps.begin(), lane.steps.end(), [](const Step& s) {
      return s.op != StepOp::kLocalCopy && s.op != StepOp::kLocalReduce;
    });
    if (first == lane.steps.end()) continue;
    const Step& s = *first;
    const bool sendsFirst = s.op == StepOp::kSend || s.op == StepOp::kCopySend ||
                            s.op == StepOp::kSendRecv || s.op == StepOp::kSendRecvReduce;
    if (!sendsFirst || s.sendBytes == 0) continue;
    for (int i = 0; i < s.nsend; ++i) {
      if (s.sendPeers[i] == peer) return true;
    }
  }
  return false;
}

}  // namespace

int ringNeighbour(const PlanRequest& request, int rank, int shift) {
  const int n = request.nranks;
  auto at = [&](int i) { return request.ring.empty() ? i : request.ring[i]; };
  int pos = 0;
  while (pos + 1 < n && at(pos) != rank) ++pos;
  return at(((pos + shift) % n + n) % n);
}

bool dataChecksTheCall(const PlanRequest& request) {
  if (isPointToPoint(request.coll) || request.nranks < 2 || request.nranks > kDataCheckMaxRanks ||
      request.count * request.elemSize > kDataCheckMaxBytes) {
    return false;
  }
  for (int r = 0; r < request.nranks; ++r) {
    PlanRequest q = request;
    q.rank = r;
    Result<Plan> plan = buildPlan(q);
    if (!plan.ok() || !postsAtOnceTo(*plan, ringNeighbour(q, r, 1))) return false;
  }
  return true;
}

void addCallCheckLane(Plan& plan, const PlanRequest& request, int channel) {
  if (plan.lanes.empty() || request.nranks < 2) return;
  Step check;
  switch (request.coll) {
    case Collective::kSend: check = makeCallCheck(request.peer, -1); break;
    case Collective::kRecv: check = makeCallCheck(-1, request.peer); break;
    default:
      if (dataChecksTheCall(request)) return;
      check = makeCallCheck(ringNeighbour(request, request.rank, 1),
                            ringNeighbour(request, request.rank, -1));
      break;
  }
  plan.lanes.push_back(Lane{channel, {check}});
}

Result<Plan> buildPlan(const PlanRequest& request) {
  Status status = checkRequest(request);
  if (!status.ok()) return status.withContext("cannot build a plan");
  if (request.count == 0) return emptyPlan(request);
  Plan plan = findEntry(request.algo)->build(request);
  // Channel parts or blocks that came out empty leave lanes without steps; the executor need not
  // see them.
  std::erase_if(plan.lanes, [](const Lane& lane) { return lane.steps.empty(); });
  return plan;
}

}  // namespace braid
