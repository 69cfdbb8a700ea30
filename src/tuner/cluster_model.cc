#include "tuner/cluster_model.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <optional>
#include <vector>

#include "algorithms/algorithms.h"
#include "tuner/cost_model.h"

namespace braid {

namespace {

// What a server's topology does not say; where each figure comes from: docs/scale.md#constants.
constexpr double kHopUs = 1.0;        // an NVLink hand-off, between NCCL's LL and LL128 figures
constexpr double kStepUs = 0.5;       // the executor kernel's flag checks and pointer work per step
constexpr double kProxyUs = 2.0;      // the proxy thread and the NIC's doorbell, each way
constexpr double kSwitchUs = 0.13;    // one InfiniBand NDR switch, port to port
constexpr int kFatTreeSwitches = 5;   // leaf, spine, core, spine, leaf: the farthest two hosts
constexpr double kReduceGBps = 1000;  // H100 HBM3 3.35 TB/s over two reads and a write
constexpr int kNetSlots = 8;  // chunks in flight per connector (NCCL's NCCL_STEPS)

double usPerByte(double gbps) { return gbps > 0 ? 1.0 / (gbps * 1e3) : 0; }

// Rank 0's plan with `count`, to count its steps.
uint64_t stepsOfRankZero(PlanRequest request) {
  request.rank = 0;
  Result<Plan> plan = buildPlan(request);
  return plan.ok() ? plan->stepCount() : 0;
}

PlanRequest requestFor(const ClusterShape& c, Algorithm algo, uint64_t bytes, uint32_t chunkBytes,
                       int nchannels) {
  PlanRequest q;
  q.coll = Collective::kAllReduce;
  q.algo = algo;
  q.nranks = c.nranks();
  q.elemSize = bytes % 4 == 0 ? 4 : 1;
  q.count = bytes / q.elemSize;
  q.chunkBytes = std::max<uint32_t>(chunkBytes / q.elemSize * q.elemSize, q.elemSize);
  q.nchannels = nchannels;
  if (algorithmUsesHosts(algo)) {
    q.hosts.resize(size_t(q.nranks));
    for (int r = 0; r < q.nranks; ++r) q.hosts[size_t(r)] = r / c.ranksPerHost;
  }
  return q;
}

// Every rank's plans, or with a symmetry one host's.
Result<double> simulateRequest(const ClusterShape& c, PlanRequest q,
                               std::optional<RankSymmetry> symmetry) {
  const int count = symmetry ? c.ranksPerHost : q.nranks;
  std::vector<Plan> plans;
  plans.reserve(size_t(count));
  for (int r = 0; r < count; ++r) {
    q.rank = r;
    ASSIGN_OR_RETURN(Plan plan, buildPlan(q));
    plans.push_back(std::move(plan));
  }
  const SimMachine machine = clusterMachine(c);
  return symmetry ? simulatePeriodicPlans(plans, machine, *symmetry)
                  : simulatePlans(plans, machine);
}

// Whether plan b is plan a with every peer mapped by `map`: same lanes, steps and bytes.
template <typename Map>
bool sameStepsMapped(const Plan& a, const Plan& b, Map map) {
  if (a.lanes.size() != b.lanes.size()) return false;
  auto mapped = [&](int peer) { return peer < 0 ? peer : map(peer); };
  for (size_t l = 0; l < a.lanes.size(); ++l) {
    const Lane& x = a.lanes[l];
    const Lane& y = b.lanes[l];
    if (x.channel != y.channel || x.steps.size() != y.steps.size()) return false;
    for (size_t s = 0; s < x.steps.size(); ++s) {
      const Step& p = x.steps[s];
      const Step& q = y.steps[s];
      if (p.op != q.op || p.nrecv != q.nrecv || p.nsend != q.nsend || p.bytes != q.bytes ||
          p.sendBytes != q.sendBytes) {
        return false;
      }
      for (int i = 0; i < kMaxStepPeers; ++i) {
        if (mapped(p.recvPeers[i]) != q.recvPeers[i] || mapped(p.sendPeers[i]) != q.sendPeers[i]) {
          return false;
        }
      }
    }
  }
  return true;
}

// Whether rank r + offset's plan is rank r's mapped by `symmetry`, for every rank r of the first
// period (whose plans are given), or with `sampled` for its first, middle and last rank: a plan
// that holds the pattern at one offset for every rank breaks it at another only at the ends of
// some range of ranks (uneven blocks, a last host), and a plan costs as much to build as to check.
bool periodMapsTo(const PlanRequest& request, const std::vector<Plan>& firstPeriod,
                  RankSymmetry symmetry, int offset, bool sampled) {
  const int n = request.nranks;
  const int period = static_cast<int>(firstPeriod.size());
  for (int r = 0; r < period; ++r) {
    if (sampled && r != 0 && r != period / 2 && r != period - 1) continue;
    PlanRequest b = request;
    b.rank = symmetry == RankSymmetry::kXor ? r ^ offset : r + offset;
    Result<Plan> pb = buildPlan(b);
    if (!pb.ok()) return false;
    const Plan& pa = firstPeriod[size_t(r)];
    const bool same = symmetry == RankSymmetry::kXor
                          ? sameStepsMapped(pa, *pb, [&](int peer) { return peer ^ offset; })
                          : sameStepsMapped(pa, *pb, [&](int peer) { return (peer + offset) % n; });
    if (!same) return false;
  }
  return true;
}

// The alpha-beta formulas (docs/scale.md#the-formulas): each follows the schedule its plan runs -
// the hand-offs on the critical path, the pipeline's fill and drain, and the busiest link or
// executor once chunks stream - on the cluster's constants.
struct AlphaBeta {
  AlphaBeta(const ClusterShape& c, uint64_t bytes, uint32_t chunkBytes, int nchannels)
      : n(c.nranks()),
        m(c.ranksPerHost),
        h(c.hosts),
        s(double(bytes)),
        ch(std::max(1, nchannels)),
        chunk(std::max<double>(1, chunkBytes)),
        elem(bytes % 4 == 0 ? 4 : 1),
        step(c.stepUs),
        net(c.netLatencyUs),
        aIn(c.stepUs + c.hopUs),
        aOut(aIn + c.netLatencyUs),
        bIn(usPerByte(c.nvlinkGBps)),
        bOut(usPerByte(c.netGBps)),
        g(usPerByte(c.reduceGBps)),
        lgN(std::log2(n)),
        lgM(std::log2(m)),
        lgH(std::log2(h)) {}
  double n, m, h, s, ch, chunk, elem;
  double step, net, aIn, aOut;  ///< alpha_intra = step + hop, alpha_inter = alpha_intra + net
  double bIn, bOut, g;          ///< beta_intra, beta_inter, gamma (us per byte)
  double lgN, lgM, lgH;
};

// Ring: per channel S/c in rounds of n blocks of at most a chunk. A round's blocks travel a
// diagonal of 2(n-1) hand-offs (one in m crosses hosts), and the next round starts with a Send
// that waits for nothing but this rank's last step, so rounds add up. Alongside, the NIC of a
// host's boundary rank carries every block of the channels that run its way (odd channels run
// backwards, so half of them), and the executor runs every channel's steps: whichever is longest.
double ringUs(const AlphaBeta& a) {
  const double perChannel = a.s / a.ch;
  const double rounds = std::max(1.0, std::ceil(perChannel / (a.n * a.chunk)));
  const double block = perChannel / (rounds * a.n);
  const double handoffs = 2 * (a.n - 1) * rounds;
  const double crossing = a.h > 1 ? 1 / a.m : 0;
  // Half the hand-offs reduce (gamma), half copy to the output and the next slot (2 beta_intra).
  const double stepBytes = a.g / 2 + a.bIn;
  const double chain =
      handoffs * (a.aIn + crossing * a.net + block * (stepBytes + crossing * a.bOut));
  const double nic = a.h > 1 ? handoffs * block * std::ceil(a.ch / 2) * a.bOut : 0;
  const double executor = handoffs * a.ch * (a.step + block * stepBytes);
  return std::max({chain, nic, executor});
}

// Double binary tree: tree t on channel t carries S/c in chunks, up and down log2 n levels. The
// second tree's deepest path crosses hosts log2 h + 2 times each way (its leaves hang off the next
// host's first rank), and going down a parent sends to two children on other hosts over one NIC,
// the second after the first. After that first chunk's fill, each further chunk costs what the
// busiest rank's NIC carries per chunk: interior in one tree (one chunk up, two down) and a leaf
// of the other (one up), all on other hosts.
double treeUs(const AlphaBeta& a) {
  const double perChannel = a.s / a.ch;
  const double piece = std::min(a.chunk, perChannel);
  const double chunks = std::ceil(perChannel / piece);
  const double crossings = a.h > 1 ? a.lgH + 2 : 0;
  const double wires = a.h > 1 ? 3 * a.lgH + 4 : 0;  // up: crossings; down: 2 per level + 2
  // Up: an interior rank adds two children's chunks; down: it keeps one copy and sends two.
  const double fill = 2 * a.lgN * a.aIn + 2 * crossings * a.net +
                      piece * (wires * a.bOut + a.lgN * (2 * a.g + 3 * a.bIn));
  const double nicChunks = a.h >= 4 ? 4 : a.h == 2 ? 3 : 0;  // per chunk and pair of channels
  const double nic = nicChunks * a.ch / 2 * piece * a.bOut;
  const double executor = a.ch / 2 * (4 * a.step + piece * (2 * a.g + 5 * a.bIn));
  return fill + (chunks - 1) * std::max(nic, executor);
}

// Recursive halving then doubling: partners 1, 2, 4 apart share a host. A rank sends 2(1-1/n) S
// and copies in the (1-1/n) S the doubling brings, reduces (1-1/n) S, and sends 2(1/m - 1/n) S
// between hosts. Each exchange is two halves, a step each.
double rhdUs(const AlphaBeta& a) {
  return 2 * (a.lgM * (a.aIn + a.step) + a.lgH * (a.aOut + a.step)) +
         3 * (1 - 1 / a.n) * a.s * a.bIn + (1 - 1 / a.n) * a.s * a.g +
         2 * (1 / a.m - 1 / a.n) * a.s * a.bOut;
}

// Recursive doubling: log2 n rounds of whole-vector exchanges, chunk by chunk, log2 m of them
// inside the host first. A lane's rounds inside the host run its chunks one after another on the
// executor (the other channel's lane catches up while the NIC is busy later). Across hosts a
// round is either a chunk's crossing (latency), or - once chunks stream - every byte of both
// channels through the rank's NIC, rounds back to back (a round's first chunk is reduced long
// before its last has crossed), then the last chunk's crossing and reduction.
double rdUs(const AlphaBeta& a) {
  const double perChannel = a.s / a.ch;
  const double piece = std::min(a.chunk, perChannel);
  const double chunks = std::ceil(perChannel / piece);
  // Send, then per chunk a receive-reduce (with the next chunk's send): 2 chunks tasks a round.
  const double inside =
      a.lgM * (a.aIn + (2 * chunks - 1) * a.step + perChannel * (a.bIn + a.g));
  if (a.h <= 1) return inside;
  const double latency = a.lgH * (a.aOut + a.step + piece * (a.bIn + a.bOut + a.g));
  const double wire = a.lgH * a.s * a.bOut + a.aOut + a.step + piece * a.g;
  const double executor = a.lgH * (2 * chunks * a.ch * a.step + a.s * (a.bIn + a.g));
  return inside + std::max({latency, wire, executor});
}

// Hierarchical: per channel, rounds of m shards (hier: each cut into h pieces of at most a chunk,
// as many rounds as that takes; hier_rhd: one round, pieces of a chunk). Inside the host every
// piece is a ring reduce-scatter (then all-gather) of m-1 hand-offs, and a piece's ring starts
// when this rank's last one ends: p (m-1) hand-offs a phase, unless the executor, running every
// piece of every channel, takes longer. Across hosts each GPU carries its shard on its own NIC,
// by a ring over the h pieces (2(h-1) hand-offs, or the NIC if longer) or by halving-doubling.
double hierUs(const AlphaBeta& a, bool halving) {
  const double perChannel = a.s / a.ch;
  const double rounds = halving ? 1 : std::max(1.0, std::ceil(perChannel / (a.chunk * a.m * a.h)));
  const double shard = perChannel / rounds / a.m;
  // Pieces that hold data: hier's h pieces of a shard hold at least an element each.
  const double pieces = halving ? std::max(1.0, std::ceil(shard / a.chunk))
                                : std::min(a.h, std::max(1.0, std::ceil(shard / a.elem)));
  const double steps = pieces * a.m * a.step;  // one channel's steps of a phase
  const double handoffs = pieces * (a.m - 1) * a.aIn;
  // The channels' lanes drift apart: the first to finish its reduce-scatter takes the NIC, and
  // the others' reduce-scatter runs meanwhile, so only one channel's work is in the way.
  const double scatter = std::max(handoffs + (a.m - 1) * shard * a.g,
                                  steps + shard * (a.bIn + (a.m - 1) * a.g));
  const double gather = std::max(handoffs + (a.m - 1) * shard * 2 * a.bIn,
                                 a.ch * (steps + shard * 2 * (a.m - 1) * a.bIn));
  double across = 0;
  const double nicBytes = 2 * (a.h - 1) / a.h * a.ch * shard;  // every channel's shard
  if (a.h > 1 && halving) {
    // Chunks stream through the NIC while the executor reduces the ones that have arrived.
    across = 2 * a.lgH * (a.aOut + a.step) + nicBytes * a.bOut;
  } else if (a.h > 1) {
    const double piece = shard / a.h;
    across = std::max(2 * (a.h - 1) * (a.aOut + piece * (a.bOut + a.g / 2 + a.bIn)),
                      nicBytes * a.bOut);
  }
  return rounds * (scatter + across + gather);
}

}  // namespace

std::string ClusterShape::describe() const {
  char line[320];
  std::snprintf(line, sizeof line,
                "%d hosts x %d GPUs (%d ranks), NVLink %.0f GB/s, %d NICs x %.0f GB/s, hand-off "
                "%.2f us (+%.2f us between hosts), step %.2f us, reduce %.0f GB/s, %d slots",
                hosts, ranksPerHost, nranks(), nvlinkGBps, nicsPerHost, netGBps, hopUs,
                netLatencyUs, stepUs, reduceGBps, nslots);
  return line;
}

Result<ClusterShape> clusterOf(const Topology& server, int hosts) {
  const std::vector<int> gpus = server.gpus();
  if (gpus.empty()) return invalidArgument("the server's topology has no GPU");
  if (hosts < 1) return invalidArgument("a cluster of " + std::to_string(hosts) + " hosts");
  ClusterShape c;
  c.hosts = hosts;
  c.ranksPerHost = static_cast<int>(gpus.size());
  c.nicsPerHost = std::max<int>(1, static_cast<int>(server.nics().size()));
  c.nvlinkGBps = defaultLinkModel(LinkKind::kNvlink).bandwidthGBps;
  if (gpus.size() >= 2) {
    if (std::optional<TopoPath> p = server.path(gpus[0], gpus[1])) c.nvlinkGBps = p->bandwidthGBps;
  }
  const HostShape shape = hostShapeOf(server);
  c.netGBps = shape.networkGBps;
  c.netLatencyUs = shape.networkLatencyUs + 2 * kProxyUs + kFatTreeSwitches * kSwitchUs;
  c.hopUs = kHopUs;
  c.stepUs = kStepUs;
  c.reduceGBps = kReduceGBps;
  c.nslots = kNetSlots;
  return c;
}

SimMachine clusterMachine(const ClusterShape& c) {
  SimMachine m;
  m.nranks = c.nranks();
  m.hostOf.resize(size_t(m.nranks));
  for (int r = 0; r < m.nranks; ++r) m.hostOf[size_t(r)] = r / c.ranksPerHost;
  m.cores.assign(size_t(c.hosts), 0);
  m.hopUs.assign(size_t(c.hosts), c.hopUs);
  m.nslots = c.nslots;
  m.stepUs = c.stepUs;
  m.bytes.copy = usPerByte(c.nvlinkGBps);
  m.bytes.reduce = usPerByte(c.reduceGBps);
  m.wires = c.hosts * c.nicsPerHost;
  const ClusterShape shape = c;
  m.linkOf = [shape](int from, int to) {
    PairLink link;
    const int host = from / shape.ranksPerHost;
    if (host == to / shape.ranksPerHost) return link;
    link.latencyUs = shape.netLatencyUs;
    link.wire = host * shape.nicsPerHost + (from % shape.ranksPerHost) % shape.nicsPerHost;
    link.wireUsPerByte = usPerByte(shape.netGBps);
    return link;
  };
  return m;
}

std::string_view priceRouteName(PriceRoute route) {
  switch (route) {
    case PriceRoute::kPeriodic: return "periodic";
    case PriceRoute::kFull: return "full";
    case PriceRoute::kRounded: return "rounded";
    case PriceRoute::kLinear: return "linear";
  }
  return "?";
}

std::optional<RankSymmetry> planSymmetry(const PlanRequest& request,
                                         const std::vector<Plan>& firstPeriod) {
  const int n = request.nranks;
  const int period = static_cast<int>(firstPeriod.size());
  if (period <= 0 || n % period != 0) return std::nullopt;
  const int periods = n / period;
  if (periods == 1) return RankSymmetry::kShift;
  bool shifts = true;
  for (int k : {1, periods / 2, periods - 1}) {
    if (k > 0 && !periodMapsTo(request, firstPeriod, RankSymmetry::kShift, k * period, k != 1)) {
      shifts = false;
      break;
    }
  }
  if (shifts) return RankSymmetry::kShift;
  if (!std::has_single_bit(unsigned(period)) || !std::has_single_bit(unsigned(periods))) {
    return std::nullopt;
  }
  // Each bit above the period's, and all of them together.
  for (int k = 1; k <= periods; k *= 2) {
    const int offset = (k == periods ? periods - 1 : k) * period;
    if (!periodMapsTo(request, firstPeriod, RankSymmetry::kXor, offset, k != 1)) {
      return std::nullopt;
    }
  }
  return RankSymmetry::kXor;
}

std::optional<RankSymmetry> planSymmetry(const PlanRequest& request, int period) {
  if (period <= 0 || request.nranks % period != 0) return std::nullopt;
  std::vector<Plan> firstPeriod;
  for (int r = 0; r < period; ++r) {
    PlanRequest a = request;
    a.rank = r;
    Result<Plan> plan = buildPlan(a);
    if (!plan.ok()) return std::nullopt;
    firstPeriod.push_back(std::move(plan).value());
  }
  return planSymmetry(request, firstPeriod);
}

Result<Price> priceAllReduce(const ClusterShape& c, Algorithm algo, uint64_t bytes,
                             uint32_t chunkBytes, int nchannels, uint64_t stepBudget) {
  const int n = c.nranks();
  const PlanRequest q = requestFor(c, algo, bytes, chunkBytes, nchannels);
  if (const std::optional<RankSymmetry> symmetry = planSymmetry(q, c.ranksPerHost)) {
    ASSIGN_OR_RETURN(double us, simulateRequest(c, q, symmetry));
    return Price{us, PriceRoute::kPeriodic, bytes};
  }
  if (stepsOfRankZero(q) * uint64_t(n) <= stepBudget) {
    ASSIGN_OR_RETURN(double us, simulateRequest(c, q, std::nullopt));
    return Price{us, PriceRoute::kFull, bytes};
  }
  // Fewer elements than a whole number per rank: round up to the next whole number.
  const uint64_t whole = uint64_t(n) * uint64_t(nchannels);  // an element per rank and channel
  if (q.count % whole != 0 && q.count < whole * 64) {
    PlanRequest rounded = q;
    rounded.count = (q.count / whole + 1) * whole;
    if (const std::optional<RankSymmetry> symmetry = planSymmetry(rounded, c.ranksPerHost)) {
      ASSIGN_OR_RETURN(double us, simulateRequest(c, rounded, symmetry));
      return Price{us, PriceRoute::kRounded, rounded.count * rounded.elemSize};
    }
  }
  // Linear in bytes past the budget: the two largest halvings of the size that fit.
  uint64_t high = bytes;
  while (high > 64 &&
         stepsOfRankZero(requestFor(c, algo, high, chunkBytes, nchannels)) * uint64_t(n) >
             stepBudget) {
    high /= 2;
  }
  const uint64_t low = high / 2;
  if (low == 0 || high == bytes) {
    return invalidUsage("allreduce/" + std::string(algorithmName(algo)) + " at " +
                        std::to_string(n) + " ranks does not fit a budget of " +
                        std::to_string(stepBudget) + " steps");
  }
  ASSIGN_OR_RETURN(Price atHigh, priceAllReduce(c, algo, high, chunkBytes, nchannels, stepBudget));
  ASSIGN_OR_RETURN(Price atLow, priceAllReduce(c, algo, low, chunkBytes, nchannels, stepBudget));
  const double slope = (atHigh.us - atLow.us) / double(high - low);
  return Price{atHigh.us + slope * double(bytes - high), PriceRoute::kLinear, bytes};
}

double alphaBetaAllReduceUs(const ClusterShape& c, Algorithm algo, uint64_t bytes,
                            uint32_t chunkBytes, int nchannels) {
  const AlphaBeta ab(c, bytes, chunkBytes, nchannels);
  switch (algo) {
    case Algorithm::kRing: return ringUs(ab);
    case Algorithm::kTree: return treeUs(ab);
    case Algorithm::kRhd: return rhdUs(ab);
    case Algorithm::kRd: return rdUs(ab);
    case Algorithm::kHier: return hierUs(ab, false);
    case Algorithm::kHierRhd: return hierUs(ab, true);
    default: return -1;
  }
}

}  // namespace braid
