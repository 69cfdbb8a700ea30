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
constexpr int kNetSlots = 8;
// The chunk braid-scale-table prices with by default; the ring's formula changes form above it.
constexpr double kChunkForFormulas = 512
                                     << 10;  // chunks in flight per connector (NCCL's NCCL_STEPS)

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
    return Price{us, PriceRoute::kPeriodic};
  }
  if (stepsOfRankZero(q) * uint64_t(n) <= stepBudget) {
    ASSIGN_OR_RETURN(double us, simulateRequest(c, q, std::nullopt));
    return Price{us, PriceRoute::kFull};
  }
  // Fewer elements than a whole number per rank: round up to the next whole number.
  const uint64_t whole = uint64_t(n) * uint64_t(nchannels);  // an element per rank and channel
  if (q.count % whole != 0 && q.count < whole * 64) {
    PlanRequest rounded = q;
    rounded.count = (q.count / whole + 1) * whole;
    if (const std::optional<RankSymmetry> symmetry = planSymmetry(rounded, c.ranksPerHost)) {
      ASSIGN_OR_RETURN(double us, simulateRequest(c, rounded, symmetry));
      return Price{us, PriceRoute::kRounded};
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
  return Price{atHigh.us + slope * double(bytes - high), PriceRoute::kLinear};
}

double alphaBetaAllReduceUs(const ClusterShape& c, Algorithm algo, uint64_t bytes,
                            uint32_t chunkBytes, int nchannels) {
  const double n = c.nranks();
  const double m = c.ranksPerHost;
  const double h = c.hosts;
  const double s = double(bytes);
  const double alphaIn = c.stepUs + c.hopUs;
  const double alphaOut = alphaIn + c.netLatencyUs;
  const double betaIn = usPerByte(c.nvlinkGBps);
  const double betaOut = usPerByte(c.netGBps);
  const double gamma = usPerByte(c.reduceGBps);
  const double lgM = std::log2(m);
  const double lgH = std::log2(h);
  const double ch = std::max(1, nchannels);
  switch (algo) {
    case Algorithm::kRing: {
      // 2(n-1) hand-offs, one in m of them between hosts. While a block fits one chunk each
      // hop forwards it whole, so the hops' costs add up (the mean hop); with more chunks per
      // block they pipeline and the slowest hop sets the pace.
      const double alpha = alphaIn + (h > 1 ? c.netLatencyUs / m : 0);
      const double block = s / ch / n;
      const double out = h > 1 ? betaOut : betaIn;
      const double beta = block <= double(chunkBytes) ? ((m - 1) * (betaIn + gamma) + out) / m
                                                      : std::max(betaIn + gamma, out);
      return 2 * (n - 1) * alpha + 2 * (n - 1) / n * (s / ch) * beta;
    }
    case Algorithm::kTree:
      // Up and down log2 n levels (log2 m of them inside a host). A rank is interior in one
      // tree, where it sends each of its s/2 up once and down twice, and a leaf of the other
      // (s/2 up): 2s through its NIC.
      return 2 * (lgM * alphaIn + lgH * alphaOut) + 2 * s * (h > 1 ? betaOut : betaIn);
    case Algorithm::kRhd:
      // Partners 1, 2, 4 apart share a host. A rank sends 2(1-1/n) s and copies in the (1-1/n)
      // s the doubling brings, reduces (1-1/n) s, and sends 2(1/m - 1/n) s between hosts.
      // Each exchange is two halves, a step each.
      return 2 * (lgM * (alphaIn + c.stepUs) + lgH * (alphaOut + c.stepUs)) +
             3 * (1 - 1 / n) * s * betaIn + (1 - 1 / n) * s * gamma +
             2 * (1 / m - 1 / n) * s * betaOut;
    case Algorithm::kRd:
      // log2 n whole-vector exchanges, log2 m of them inside a host.
      return lgM * (alphaIn + c.stepUs + s * (betaIn + gamma)) +
             lgH * (alphaOut + c.stepUs + s * (betaOut + gamma));
    case Algorithm::kHier:
    case Algorithm::kHierRhd: {
      // Reduce-scatter and all-gather inside the host, then each GPU's 1/m of the message
      // across hosts on its own NIC: by a ring (2(h-1) hand-offs) or halving-doubling
      // (2 log2 h).
      const double across = algo == Algorithm::kHier ? 2 * (h - 1) : 2 * lgH;
      const double exchange = algo == Algorithm::kHier ? 0 : c.stepUs;  // two halves each
      return 2 * (m - 1) * alphaIn + across * (alphaOut + exchange) + 2 * (m - 1) / m * s * betaIn +
             (m - 1) / m * s * gamma + 2 * (h - 1) / h * (s / m) * (betaOut + gamma);
    }
    default: return -1;
  }
}

}  // namespace braid
