#include "tuner/cost_model.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>

#include "algorithms/algorithms.h"
#include "base/little_endian.h"
#include "topology/locality.h"
#include "tuner/cluster_model.h"
#include "tuner/model_plans.h"

namespace braid {
namespace {

// Without a cache size in the topology: a common server L3 (and the LLC of the machines the
// library is developed on).
constexpr uint64_t kAssumedLlcBytes = 32ull << 20;
// Without a core's cache in the topology: a common server core's L2 (1-2 MiB).
constexpr uint64_t kAssumedCoreCacheBytes = 1ull << 20;
// Messages longer than two spans are simulated at one and two spans and extrapolated linearly:
// past the pipeline's fill, every further chunk costs the same. A span is kSpanChunks chunks per
// channel, or for the ring all-reduce (whose round is n chunks) at least kSpanRounds rounds.
constexpr uint64_t kSpanChunks = 4;
constexpr uint64_t kSpanRounds = 2;
// From this many ranks on, one round of the ring all-reduce is span enough: its 2(n-1) steps a
// channel fill and drain the pipeline many times over, and a second round doubled the cost of
// the simulations that price every long size
// (docs/scale.md#one-round-of-the-ring-no-tier-for-under-1).
constexpr uint64_t kOneRoundSpanRanks = 16;
// A share of a long call's traffic below this is priced at the rates of the tiers that serve the
// rest: simulating a tier costs as much whatever its share, and this one moves the price by less
// than 1% of the tiers' difference (same section).
constexpr double kNegligibleTierShare = 0.01;
// All-gather, reduce-scatter and all-to-all move a block per rank, so a span of a block per rank
// is n spans of data: beyond kSpanBlockRanks ranks the block shrinks to keep that at
// kSpanBlockRanks spans, or every rank's plan would have O(n) chunks and the tuner's share at init
// O(n^2) steps (docs/scale.md#the-tuners-share-of-init).
constexpr uint64_t kSpanBlockRanks = 16;
// From this many ranks on, plans whose partners differ by XOR (recursive doubling and halving)
// are priced from one host's plans when hosts repeat, as shifted ones always are: below it every
// rank's plans cost little to simulate.
constexpr int kXorPricedFromRanks = 32;
// From this many ranks on, a call whose elements do not split evenly among the ranks and channels
// is priced at the next count that does (docs/scale.md#uneven-blocks-priced-as-the-largest):
// uneven blocks make every rank's plan its own, and simulating all of them cost O(n^2) steps.
constexpr int kRoundedFromRanks = 64;
// From kRoundedFromRanks on, a candidate whose plans still do not repeat host by host is not
// priced where simulating every rank's would take more steps than this: reduce-scatter rhd at 1000
// ranks, whose folds break the symmetry, took 81 s of the grid. A long message's spans are
// simulated some twenty times by one rank (candidates, cache tiers, one and two spans), so they
// get an eighth of it (docs/scale.md#plans-too-costly-to-simulate).
constexpr uint64_t kMaxSimulatedSteps = uint64_t{1} << 21;
constexpr uint64_t kMaxSpanSimulatedSteps = kMaxSimulatedSteps / 8;
// From this many ranks on, an all-reduce by rd or rhd over a rank count, or by hier_rhd over a
// host count, that is not a power of two is priced from machines of that power of two
// (predictFolded): the ranks or hosts that fold in break the symmetry that prices the rest from
// one host's plans, and simulating every rank's took up to 5 s a candidate at 3000 ranks. Where
// both are priced, the two agree within 10% for rd, 14% for hier_rhd (at the shapes the tuner
// costs) and 25% for rhd (docs/scale.md#folds-priced-from-a-power-of-two).
constexpr int kFoldPricedFromRanks = 256;

double usPerByte(double gbps) { return 1.0 / (gbps * 1e3); }

bool movesBlockPerRank(Collective coll) {
  return coll == Collective::kAllGather || coll == Collective::kReduceScatter ||
         coll == Collective::kAllToAll;
}

/// The topology's last-level cache, or the smaller one the calibration measured (calibration.h).
uint64_t llcOf(const ModelConstants& m) {
  const uint64_t topology = m.host.llcBytes > 0 ? m.host.llcBytes : kAssumedLlcBytes;
  const auto measured = static_cast<uint64_t>(m.calibration.cacheMiB * double(1 << 20));
  return measured > 0 ? std::min(topology, measured) : topology;
}
uint64_t coreCacheOf(const HostShape& h) {
  return h.coreCacheBytes > 0 ? h.coreCacheBytes : kAssumedCoreCacheBytes;
}

// Bytes one rank's buffers span in a call moving `bytes` per rank.
uint64_t footprint(Collective coll, uint64_t bytes, int n) {
  switch (coll) {
    case Collective::kAllGather:
    case Collective::kReduceScatter: return bytes * (uint64_t(n) + 1);
    case Collective::kAllToAll: return 2 * bytes * uint64_t(n);
    default: return 2 * bytes;
  }
}

}  // namespace

HostShape hostShapeOf(const Topology& t) {
  HostShape h;
  h.cores = std::max(1, t.numCores());
  int llcLevel = 0;
  for (int id : t.nodesOf(NodeKind::kCache)) {
    h.llcBytes = std::max(h.llcBytes, t.node(id).cacheBytes);
    llcLevel = std::max(llcLevel, t.node(id).cacheLevel);
  }
  for (int id : t.nodesOf(NodeKind::kCache)) {
    if (t.node(id).cacheLevel < llcLevel)
      h.coreCacheBytes = std::max(h.coreCacheBytes, t.node(id).cacheBytes);
  }
  const std::vector<int> packages = t.nodesOf(NodeKind::kPackage);
  h.socketCrossingUs = 2 * defaultLinkModel(LinkKind::kInterSocket).latencyUs;
  if (packages.size() >= 2) {
    if (std::optional<TopoPath> p = t.path(packages[0], packages[1]))
      h.socketCrossingUs = p->latencyUs;
  }
  const LinkModel net = defaultLinkModel(LinkKind::kNetwork);
  h.networkLatencyUs = 2 * net.latencyUs;
  h.networkGBps = net.bandwidthGBps;
  const std::vector<int> nics = t.nics();
  if (!nics.empty() && t.fabric() >= 0) {
    if (std::optional<TopoPath> p = t.path(nics[0], t.fabric())) {
      h.networkLatencyUs = 2 * p->latencyUs;
      h.networkGBps = p->bandwidthGBps;
    }
  }
  return h;
}

void encodeModelConstants(const ModelConstants& m, uint8_t* out) {
  const Calibration& c = m.calibration;
  const double values[] = {c.stepUs,
                           c.hopUs,
                           c.crowdedHopUs,
                           c.copyCacheGBps,
                           c.copyDramGBps,
                           c.reduceCacheGBps,
                           c.reduceDramGBps,
                           static_cast<double>(c.cpus),
                           static_cast<double>(m.host.cores),
                           static_cast<double>(m.host.llcBytes),
                           m.host.socketCrossingUs,
                           m.host.networkLatencyUs,
                           m.host.networkGBps,
                           c.transferGBps,
                           c.crowdedPostUs,
                           static_cast<double>(m.host.coreCacheBytes),
                           c.cacheMiB,
                           c.crowdedSwitchFactor,
                           c.copyLlcGBps};
  static_assert(sizeof(values) <= kModelConstantsWireBytes);
  std::fill(out, out + kModelConstantsWireBytes, uint8_t{0});
  for (size_t i = 0; i < std::size(values); ++i) {
    putLe64(out + 8 * i, std::bit_cast<uint64_t>(values[i]));
  }
}

ModelConstants decodeModelConstants(const uint8_t* in) {
  auto at = [&](int i) { return std::bit_cast<double>(getLe64(in + 8 * i)); };
  ModelConstants m;
  Calibration& c = m.calibration;
  c.stepUs = at(0);
  c.hopUs = at(1);
  c.crowdedHopUs = at(2);
  c.copyCacheGBps = at(3);
  c.copyDramGBps = at(4);
  c.reduceCacheGBps = at(5);
  c.reduceDramGBps = at(6);
  c.cpus = static_cast<int>(at(7));
  m.host.cores = static_cast<int>(at(8));
  m.host.llcBytes = static_cast<uint64_t>(at(9));
  m.host.socketCrossingUs = at(10);
  m.host.networkLatencyUs = at(11);
  m.host.networkGBps = at(12);
  c.transferGBps = at(13);
  c.crowdedPostUs = at(14);
  m.host.coreCacheBytes = static_cast<uint64_t>(at(15));
  c.cacheMiB = at(16);
  c.crowdedSwitchFactor = at(17);
  c.copyLlcGBps = at(18);
  return m;
}

namespace {

/// Ranks per host when the machine repeats host by host - P ranks on every host, host h holding
/// ranks hP..hP+P-1, each host's cores, hops, cores of ranks, packages and NICs like the first's,
/// rings in rank order - else 0.
int periodOf(const SimMachine& m, const std::vector<RankPlacement>& placements,
             const std::vector<int>& ranksOn, const std::vector<int>& ring) {
  const int n = m.nranks;
  const int hosts = static_cast<int>(ranksOn.size());
  if (hosts < 2 || !ring.empty()) return 0;
  const int period = ranksOn[0];
  for (int h = 0; h < hosts; ++h) {
    if (ranksOn[h] != period || m.cores[h] != m.cores[0] || m.hopUs[h] != m.hopUs[0] ||
        m.postUs[h] != m.postUs[0]) {
      return 0;
    }
  }
  for (int r = 0; r < n; ++r) {
    const int first = r % period;
    const Locality& a = placements[r].locality;
    const Locality& b = placements[first].locality;
    if (m.hostOf[r] != r / period || m.coreOf[r] != m.coreOf[first] || a.package != b.package ||
        a.nearestNic != b.nearestNic) {
      return 0;
    }
  }
  return period;
}

}  // namespace

Result<CostModel> CostModel::create(const ModelConstants& constants,
                                    const std::vector<RankPlacement>& placements,
                                    std::vector<int> ring, int nslots, uint64_t shmBudgetBytes) {
  RETURN_IF_ERROR(validateCalibration(constants.calibration).withContext("cost model"));
  const int n = static_cast<int>(placements.size());
  if (n < 1) return invalidArgument("cost model: no ranks");
  if (!ring.empty() && static_cast<int>(ring.size()) != n) {
    return invalidArgument("cost model: ring order of " + std::to_string(ring.size()) +
                           " ranks for " + std::to_string(n));
  }
  CostModel model;
  model.constants_ = constants;
  model.ring_ = std::move(ring);
  {
    uint8_t wire[kModelConstantsWireBytes];
    encodeModelConstants(constants, wire);
    std::string& key = model.key_;
    key.assign(reinterpret_cast<const char*>(wire), sizeof(wire));
    auto add = [&key](const void* p, size_t bytes) {
      key.append(static_cast<const char*>(p), bytes);
    };
    for (const RankPlacement& p : placements) {
      add(&p.hostHash, sizeof(p.hostHash));
      uint8_t locality[kLocalityWireBytes];
      encodeLocality(p.locality, locality);
      add(locality, sizeof(locality));
    }
    for (int r : model.ring_) add(&r, sizeof(r));
    add(&nslots, sizeof(nslots));
    add(&shmBudgetBytes, sizeof(shmBudgetBytes));
  }
  SimMachine& m = model.machine_;
  m.nranks = n;
  m.nslots = std::max(1, nslots);
  m.shmBudgetBytes = shmBudgetBytes;
  const Calibration& c = constants.calibration;
  const HostShape& host = constants.host;
  m.stepUs = c.stepUs;

  std::map<uint64_t, int> hostIndex;
  m.hostOf.resize(n);
  for (int r = 0; r < n; ++r) {
    auto [it, fresh] = hostIndex.try_emplace(placements[r].hostHash, int(hostIndex.size()));
    m.hostOf[r] = it->second;
  }
  const int hosts = static_cast<int>(hostIndex.size());
  // Without a network rate every call that crosses hosts would wait forever in the simulation,
  // and the tuner would find no algorithm that works.
  if (hosts > 1 && !(host.networkGBps > 0 && host.networkLatencyUs >= 0)) {
    return invalidArgument("cost model: ranks on " + std::to_string(hosts) +
                           " hosts need a network rate > 0 GB/s and a latency >= 0 us (given " +
                           std::to_string(host.networkGBps) + " GB/s, " +
                           std::to_string(host.networkLatencyUs) + " us)");
  }
  // Cores a host's ranks share: the host's, unless their bindings cover fewer - exactly the
  // distinct cores they name where each is bound to one.
  std::vector<int> bound(hosts, 0);
  std::vector<int> ranksOn(hosts, 0);
  std::vector<std::map<int, int>> namedCores(hosts);  // core -> its index on the host
  std::vector<bool> allNamed(hosts, true);
  for (int r = 0; r < n; ++r) {
    const Locality& l = placements[r].locality;
    const int h = m.hostOf[r];
    bound[h] += l.cores > 0 ? l.cores : host.cores;
    ++ranksOn[h];
    if (l.core >= 0) {
      namedCores[h].emplace(l.core, 0);
    } else {
      allNamed[h] = false;
    }
  }
  for (int h = 0; h < hosts; ++h) {
    if (!allNamed[h]) continue;
    int index = 0;
    for (auto& [core, at] : namedCores[h]) at = index++;
    bound[h] = index;
  }
  model.coresOfHost_.resize(hosts);
  m.cores.resize(hosts);
  m.hopUs.resize(hosts);
  m.postUs.resize(hosts);
  for (int h = 0; h < hosts; ++h) {
    const int cores = std::max(1, std::min(host.cores, bound[h]));
    model.coresOfHost_[h] = cores;
    // Crowded: the ranks share the cores and every hand-off waits for one.
    const bool crowded = ranksOn[h] > cores;
    m.cores[h] = cores;
    m.hopUs[h] = crowded ? c.crowdedHopUs : c.hopUs;
    m.postUs[h] = crowded ? c.crowdedPostUs : 0.0;
  }
  m.switchFactor = std::max(1.0, c.crowdedSwitchFactor);
  // Ranks bound to one core each run where they are bound.
  m.coreOf.assign(n, -1);
  for (int r = 0; r < n; ++r) {
    const int h = m.hostOf[r];
    if (allNamed[h]) m.coreOf[r] = namedCores[h].at(placements[r].locality.core);
  }
  model.maxRanksPerHost_ = *std::max_element(ranksOn.begin(), ranksOn.end());
  model.ranksOnHost_ = ranksOn;

  bool packages = false;
  for (int r = 1; r < n; ++r) {
    packages |= placements[r].locality.package != placements[0].locality.package;
  }
  if (hosts > 1 || packages) {
    // One serial network resource per (host, NIC): ranks sharing a NIC share its bandwidth.
    // The links are computed from O(n) facts per rank: n x n of them would not fit at thousands
    // of ranks (16k ranks: 268M entries).
    std::map<std::pair<int, int64_t>, int> wireIndex;
    struct RankFacts {
      std::vector<int> host, wire, package;
      double usPerByte = 0, networkUs = 0, socketUs = 0;
    };
    auto facts = std::make_shared<RankFacts>();
    facts->host = m.hostOf;
    facts->wire.resize(n);
    facts->package.resize(n);
    for (int a = 0; a < n; ++a) {
      const Locality& la = placements[a].locality;
      auto [it, fresh] = wireIndex.try_emplace({m.hostOf[a], la.nearestNic}, int(wireIndex.size()));
      facts->wire[a] = it->second;
      facts->package[a] = la.package;
    }
    facts->usPerByte = usPerByte(host.networkGBps);
    facts->networkUs = host.networkLatencyUs;
    facts->socketUs = host.socketCrossingUs;
    m.linkOf = [facts](int a, int b) {
      PairLink l;
      if (a == b) return l;
      if (facts->host[a] != facts->host[b]) {
        l.wire = facts->wire[a];
        l.wireUsPerByte = facts->usPerByte;
        l.latencyUs = facts->networkUs;
      } else if (facts->package[a] >= 0 && facts->package[b] >= 0 &&
                 facts->package[a] != facts->package[b]) {
        l.latencyUs = facts->socketUs;
      }
      return l;
    };
    m.wires = static_cast<int>(wireIndex.size());
  }
  model.period_ = periodOf(m, placements, ranksOn, model.ring_);
  if (model.period_ > 0) {
    model.firstHost_.assign(placements.begin(), placements.begin() + model.period_);
  }
  return model;
}

CostModel::BufferTiers CostModel::bufferTiers(Collective coll, Algorithm algo, uint64_t bytes,
                                              uint64_t slotBytes) const {
  const uint64_t llc = llcOf(constants_);
  // The caller's buffers of every rank of the host, and the slots their FIFOs cycle through
  // (all hosts alike: slotBytes counts every rank's connectors, so a host holds its share).
  // Recursive doubling over a rank count that is no power of two folds the extra ranks in
  // first and hands them the result last; in between only a power of two of ranks work on
  // their buffers (docs/performance-notes.md#recursive-doubling-over-other-rank-counts).
  const int n = machine_.nranks;
  double ranks = double(maxRanksPerHost_);
  if (algo == Algorithm::kRd && !std::has_single_bit(unsigned(n))) {
    ranks *= double(std::bit_floor(unsigned(n))) / double(n);
  }
  const double hosts = double(coresOfHost_.size());
  const double working = ranks * double(footprint(coll, bytes, n)) + double(slotBytes) / hosts;
  // The share of the traffic each cache serves, as if it held a fixed part of the working set.
  const int cores = *std::min_element(coresOfHost_.begin(), coresOfHost_.end());
  const double coreCaches = double(cores) * double(coreCacheOf(constants_.host));
  const double held = working <= double(llc) ? 1.0 : double(llc) / working;
  const double coreHeld = std::min(held, working <= coreCaches ? 1.0 : coreCaches / working);
  // Without a measured rate the last-level cache costs what the cores' own do: one tier, so
  // long messages need no separate simulations of it.
  if (constants_.calibration.copyLlcGBps <= 0) return {0.0, 1 - held};
  return {held - coreHeld, 1 - held};
}

double CostModel::crowding() const {
  double most = 0;
  for (size_t h = 0; h < coresOfHost_.size(); ++h) {
    most = std::max(most, double(ranksOnHost_[h]) / double(coresOfHost_[h]));
  }
  return most;
}

double CostModel::switchShare(Collective coll, uint64_t bytes, uint64_t slotBytes) const {
  // Only all-reduce: applied to every collective, the replayed sweeps of reduce-scatter and
  // all-gather got worse (docs/performance-notes.md#the-crowded-switch-share).
  if (coll != Collective::kAllReduce) return 1.0;
  // What one rank keeps warm: its buffers and its share of the slots. The ranks of a core keep
  // their data across switches while together they fill under a quarter of its cache, and lose
  // all of it from a half (fitted to sweeps: docs/performance-notes.md#the-crowded-switch-share).
  const double rank =
      double(footprint(coll, bytes, machine_.nranks)) + double(slotBytes) / double(machine_.nranks);
  const double filled = crowding() * rank / double(coreCacheOf(constants_.host));
  return std::clamp((filled - 0.25) / 0.25, 0.0, 1.0);
}

double CostModel::inCoreShare(uint64_t bytes, uint32_t chunkBytes, int nchannels) const {
  const uint64_t core = coreCacheOf(constants_.host);
  // A step reads one chunk and writes one (a slot, the output) per channel.
  const uint64_t touched = 2 * std::min(bytes, uint64_t(chunkBytes) * uint64_t(nchannels));
  return touched <= core ? 1.0 : double(core) / double(touched);
}

SimMachine CostModel::machineWith(BufferTiers tiers, double inCore) const {
  SimMachine m = machine_;
  const Calibration& c = constants_.calibration;
  // Kernels run at cache speed on slots and chunks while what a rank's steps touch at once fits
  // its core's cache; beyond that the overflow goes at memory speed. The caller's buffers add
  // what memory costs over the cache for the share of them the last-level cache does not hold (a
  // memory copy touches two buffers, so each buffer carries half of the difference), and likewise
  // what the last-level cache costs over the core's own for the share it holds
  // (docs/performance-notes.md#cache-and-memory-rates).
  m.bytes.copy = inCore * usPerByte(c.copyCacheGBps) + (1 - inCore) * usPerByte(c.copyDramGBps);
  m.bytes.reduce =
      inCore * usPerByte(c.reduceCacheGBps) + (1 - inCore) * usPerByte(c.reduceDramGBps);
  m.bytes.transfer = usPerByte(c.transferGBps);
  const double cache = usPerByte(c.copyCacheGBps);
  const double memory = std::max(0.0, usPerByte(c.copyDramGBps) - cache);
  const double llc = c.copyLlcGBps > 0 ? std::max(0.0, usPerByte(c.copyLlcGBps) - cache) : 0.0;
  m.bytes.user = tiers.llc * llc / 2 + tiers.memory * memory / 2;
  return m;
}

size_t CostModel::largestPlanSteps(PlanRequest request, const std::vector<Plan>& firstHost) const {
  size_t most = 0;
  for (const Plan& plan : firstHost) most = std::max(most, plan.stepCount());
  const int n = machine_.nranks;
  for (int r = std::max(int(firstHost.size()), n - period_); r < n; ++r) {
    request.rank = r;
    if (Result<Plan> plan = buildPlan(request); plan.ok()) most = std::max(most, plan->stepCount());
  }
  return most;
}

Result<CostModel::CallPlans> CostModel::plansFor(Collective coll, Algorithm algo, uint64_t bytes,
                                                 uint32_t chunkBytes, int nchannels,
                                                 uint64_t maxSteps) const {
  const int n = machine_.nranks;
  PlanRequest request = modelRequest(coll, algo, n, bytes, chunkBytes, nchannels, ring_);
  // The hierarchical algorithm groups ranks by host, numbered as the communicator numbers them.
  if (algorithmUsesHosts(algo) && machine_.cores.size() > 1) request.hosts = machine_.hostOf;
  CallPlans out;
  out.plans.reserve(size_t(period_ > 0 ? period_ : n));
  auto buildUpTo = [&](int count) -> Status {
    for (int r = static_cast<int>(out.plans.size()); r < count; ++r) {
      request.rank = r;
      ASSIGN_OR_RETURN(Plan plan, buildPlan(request));
      out.plans.push_back(std::move(plan));
    }
    return okStatus();
  };
  // At hundreds of ranks n plans of O(n) steps each would make the table cost O(n^2) per cell.
  if (period_ > 0) {
    RETURN_IF_ERROR(buildUpTo(period_));
    out.periodic = planSymmetry(request, out.plans);
    // A ring's or hier's steps wait on the largest block, so the plans of blocks all as large
    // take about as long, and those repeat host by host.
    const uint64_t whole = uint64_t(n) * uint64_t(std::max(1, nchannels));
    if (!out.periodic && n >= kRoundedFromRanks && request.count % whole != 0) {
      PlanRequest rounded = request;
      rounded.count = (request.count / whole + 1) * whole;
      std::vector<Plan> plans;
      for (int r = 0; r < period_; ++r) {
        rounded.rank = r;
        ASSIGN_OR_RETURN(Plan plan, buildPlan(rounded));
        plans.push_back(std::move(plan));
      }
      if (const std::optional<RankSymmetry> symmetry = planSymmetry(rounded, plans)) {
        out.plans = std::move(plans);
        out.periodic = symmetry;
      }
    }
  }
  // Partners by XOR are priced from one host's plans only where every rank's would cost much.
  // The two differ by how the simulation orders ranks whose tasks fall at the same moment: on
  // 64 ranks in hosts of 8 by at most 3.7% (docs/scale.md#xor-partners-priced-from-one-host).
  if (out.periodic == RankSymmetry::kXor && n < kXorPricedFromRanks) out.periodic.reset();
  if (!out.periodic && n >= kRoundedFromRanks && !out.plans.empty() &&
      uint64_t(n) * largestPlanSteps(request, out.plans) > maxSteps) {
    return invalidArgument(std::string(algorithmName(algo)) + " " +
                           std::string(collectiveName(coll)) + " of " + std::to_string(bytes) +
                           " bytes at " + std::to_string(n) +
                           " ranks is not priced: its plans do not repeat host by host, and " +
                           "simulating every rank's would take too long");
  }
  if (!out.periodic) RETURN_IF_ERROR(buildUpTo(n));
  return out;
}

Result<double> CostModel::run(const CallPlans& plans, const SimMachine& machine) {
  return plans.periodic ? simulatePeriodicPlans(plans.plans, machine, *plans.periodic)
                        : simulatePlans(plans.plans, machine);
}

uint64_t CostModel::machineFootprint(const CallPlans& plans) const {
  const uint64_t one = slotFootprint(plans.plans, machine_);
  return plans.periodic ? one * uint64_t(machine_.nranks / period_) : one;
}

Result<std::shared_ptr<const CostModel::CallPlans>> CostModel::recentPlansFor(
    Collective coll, Algorithm algo, uint64_t bytes, uint32_t chunkBytes, int nchannels) const {
  constexpr size_t kRecentPlans = 2;
  const auto key = std::make_tuple(coll, algo, bytes, chunkBytes, nchannels);
  {
    std::lock_guard<std::mutex> lock(memo_->mutex);
    for (const auto& [recent, plans] : memo_->recentPlans) {
      if (recent == key) return plans;
    }
  }
  ASSIGN_OR_RETURN(CallPlans built,
                   plansFor(coll, algo, bytes, chunkBytes, nchannels, kMaxSpanSimulatedSteps));
  auto plans = std::make_shared<const CallPlans>(std::move(built));
  std::lock_guard<std::mutex> lock(memo_->mutex);
  auto& recent = memo_->recentPlans;
  recent.insert(recent.begin(), {key, plans});
  if (recent.size() > kRecentPlans) recent.pop_back();
  return plans;
}

Result<double> CostModel::simulate(Collective coll, Algorithm algo, uint64_t bytes,
                                   uint32_t chunkBytes, int nchannels,
                                   const SimMachine& machine) const {
  ASSIGN_OR_RETURN(std::shared_ptr<const CallPlans> plans,
                   recentPlansFor(coll, algo, bytes, chunkBytes, nchannels));
  return run(*plans, machine);
}

uint64_t CostModel::spanOf(Collective coll, Algorithm algo, uint32_t chunkBytes,
                           int nchannels) const {
  const uint64_t unit = uint64_t(chunkBytes) * uint64_t(std::max(1, nchannels));
  uint64_t span = kSpanChunks * unit;
  const uint64_t n = uint64_t(nranks());
  if (coll == Collective::kAllReduce && algo == Algorithm::kRing) {
    const uint64_t rounds = n >= kOneRoundSpanRanks ? 1 : kSpanRounds;
    span = std::max<uint64_t>(rounds, (kSpanChunks + n - 1) / n) * n * unit;
  } else if (movesBlockPerRank(coll) && n > kSpanBlockRanks) {
    constexpr uint64_t kAlign = 64;  // whole elements of any type, on every channel
    span = std::max(kAlign, (span * kSpanBlockRanks / n + kAlign - 1) / kAlign * kAlign);
  }
  return span;
}

uint64_t CostModel::wholeUpTo(Collective coll, Algorithm algo, uint32_t chunkBytes,
                              int nchannels) const {
  return 2 * spanOf(coll, algo, chunkBytes, nchannels);
}

Result<double> CostModel::predict(Collective coll, Algorithm algo, uint64_t bytes,
                                  uint32_t chunkBytes, int nchannels) const {
  if (coll == Collective::kSend || coll == Collective::kRecv) {
    return invalidArgument("the cost model does not model send and receive");
  }
  if (!algorithmServes(algo, coll)) {
    return invalidArgument(std::string(algorithmName(algo)) + " does not serve " +
                           std::string(collectiveName(coll)));
  }
  if (chunkBytes == 0 || nchannels < 1) return invalidArgument("chunk and channels must be > 0");
  if (bytes == 0 || machine_.nranks == 1) return 0.0;
  if (machine_.nranks >= kFoldPricedFromRanks && foldsBeyondPowerOfTwo(coll, algo)) {
    return predictFolded(coll, algo, bytes, chunkBytes, nchannels);
  }
  const uint64_t span = spanOf(coll, algo, chunkBytes, nchannels);
  if (bytes <= 2 * span) {
    ASSIGN_OR_RETURN(CallPlans plans,
                     plansFor(coll, algo, bytes, chunkBytes, nchannels, kMaxSimulatedSteps));
    const uint64_t slots = machineFootprint(plans);
    SimMachine m = machineWith(bufferTiers(coll, algo, bytes, slots),
                               inCoreShare(bytes, chunkBytes, nchannels));
    m.switchFactor = 1 + (m.switchFactor - 1) * switchShare(coll, bytes, slots);
    return run(plans, m);
  }
  ASSIGN_OR_RETURN(uint64_t slots, longSlotFootprint(coll, algo, span, chunkBytes, nchannels));
  const BufferTiers tiers = bufferTiers(coll, algo, bytes, slots);
  // Long messages: each tier's rates extrapolated, then mixed as machineWith mixes them. These
  // simulations serve every long size of this candidate.
  const std::array<double, 3> shares = {1.0 - tiers.llc - tiers.memory, tiers.llc, tiers.memory};
  double counted = 0;
  for (double share : shares) counted += share >= kNegligibleTierShare ? share : 0.0;
  double mixed = 0;
  for (int tier = 0; tier < 3; ++tier) {
    const double share = shares[size_t(tier)];
    if (share < kNegligibleTierShare) continue;
    ASSIGN_OR_RETURN(double one, remembered(coll, algo, span, chunkBytes, nchannels, tier));
    ASSIGN_OR_RETURN(double two, remembered(coll, algo, 2 * span, chunkBytes, nchannels, tier));
    mixed += share / counted * extrapolateSpans(one, two, span, bytes);
  }
  return mixed;
}

bool CostModel::foldsBeyondPowerOfTwo(Collective coll, Algorithm algo) const {
  if (coll != Collective::kAllReduce || period_ == 0) return false;
  if (algo == Algorithm::kHierRhd) return !std::has_single_bit(unsigned(ranksOnHost_.size()));
  if (algo != Algorithm::kRd && algo != Algorithm::kRhd) return false;
  const auto n = unsigned(machine_.nranks);
  return !std::has_single_bit(n) && period_ % 2 == 0 && std::bit_floor(n) % unsigned(period_) == 0;
}

Result<std::shared_ptr<const CostModel>> CostModel::foldModel(FoldPart part) const {
  std::lock_guard<std::mutex> lock(memo_->foldMutex);
  std::shared_ptr<const CostModel>& kept = memo_->foldModels[size_t(part)];
  if (kept) return kept;
  std::vector<RankPlacement> placements;
  auto addHost = [&](int ranks) {
    const uint64_t hash = placements.size() + 1;  // one per host
    for (int r = 0; r < ranks; ++r) {
      placements.push_back(firstHost_[size_t(r)]);
      placements.back().hostHash = hash;
    }
  };
  switch (part) {
    case FoldPart::kRanksToPowerOfTwo:
    case FoldPart::kHalfHostsToPowerOfTwo: {
      const int perHost = part == FoldPart::kRanksToPowerOfTwo ? period_ : period_ / 2;
      for (unsigned r = 0; r < std::bit_floor(unsigned(machine_.nranks)); r += unsigned(perHost)) {
        addHost(perHost);
      }
      break;
    }
    case FoldPart::kHostsToPowerOfTwo:
      for (unsigned h = 0; h < std::bit_floor(unsigned(ranksOnHost_.size())); ++h) addHost(period_);
      break;
    case FoldPart::kPairInHost: addHost(2); break;
  }
  ModelConstants constants = constants_;
  if (part == FoldPart::kHostsToPowerOfTwo) constants.host.networkGBps *= 2.0 / 3.0;
  ASSIGN_OR_RETURN(CostModel model,
                   create(constants, placements, {}, machine_.nslots, machine_.shmBudgetBytes));
  kept = std::make_shared<const CostModel>(std::move(model));
  return kept;
}

Result<double> CostModel::predictFolded(Collective coll, Algorithm algo, uint64_t bytes,
                                        uint32_t chunkBytes, int nchannels) const {
  if (!foldsBeyondPowerOfTwo(coll, algo)) {
    return invalidArgument(
        std::string(algorithmName(algo)) + " " + std::string(collectiveName(coll)) + " at " +
        std::to_string(machine_.nranks) + " ranks in " + std::to_string(ranksOnHost_.size()) +
        " hosts is not priced by its fold: that needs hosts alike in rank order, and ranks "
        "(rd, rhd: an even count a host) or hosts (hier_rhd) beyond a power of two");
  }
  // A host that takes over another's shards sends over its NIC its share of the halving and
  // doubling (about twice the vector) and the result back (the vector once): 1.5x what the
  // others send. It sets the pace, as a power of two of hosts whose NICs run at 2/3 the rate,
  // and the fold's two hand-offs add their latency.
  if (algo == Algorithm::kHierRhd) {
    ASSIGN_OR_RETURN(std::shared_ptr<const CostModel> model,
                     foldModel(FoldPart::kHostsToPowerOfTwo));
    ASSIGN_OR_RETURN(double us, model->predict(coll, algo, bytes, chunkBytes, nchannels));
    return us + 2 * constants_.host.networkLatencyUs;
  }
  // The call keeps pace with the slower of two kinds of host: one whose ranks all work, and one
  // where half of them handed their vectors to the other half.
  double among = 0;
  for (FoldPart part : {FoldPart::kRanksToPowerOfTwo, FoldPart::kHalfHostsToPowerOfTwo}) {
    ASSIGN_OR_RETURN(std::shared_ptr<const CostModel> model, foldModel(part));
    ASSIGN_OR_RETURN(double us, model->predict(coll, algo, bytes, chunkBytes, nchannels));
    among = std::max(among, us);
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const CostModel> pair, foldModel(FoldPart::kPairInHost));
  // A folded rank hands its whole vector to its neighbour, which adds it in, and gets the result
  // back at the end: a reduce and a broadcast between the two.
  ASSIGN_OR_RETURN(double in, pair->predict(Collective::kReduce, Algorithm::kTree, bytes,
                                            chunkBytes, nchannels));
  ASSIGN_OR_RETURN(double out, pair->predict(Collective::kBroadcast, Algorithm::kTree, bytes,
                                             chunkBytes, nchannels));
  return among + in + out;
}

Result<uint64_t> CostModel::longSlotFootprint(Collective coll, Algorithm algo, uint64_t span,
                                              uint32_t chunkBytes, int nchannels) const {
  const auto key = std::make_tuple(coll, algo, span, chunkBytes, nchannels);
  {
    std::lock_guard<std::mutex> lock(memo_->mutex);
    if (auto it = memo_->slots.find(key); it != memo_->slots.end()) return it->second;
  }
  // Past two spans every connector has cycled through all of its slots.
  ASSIGN_OR_RETURN(std::shared_ptr<const CallPlans> plans,
                   recentPlansFor(coll, algo, 2 * span, chunkBytes, nchannels));
  const uint64_t bytes = machineFootprint(*plans);
  std::lock_guard<std::mutex> lock(memo_->mutex);
  memo_->slots.emplace(key, bytes);
  return bytes;
}

Result<double> CostModel::remembered(Collective coll, Algorithm algo, uint64_t bytes,
                                     uint32_t chunkBytes, int nchannels, int tier) const {
  const auto key = std::make_tuple(coll, algo, bytes, chunkBytes, nchannels, tier);
  {
    std::lock_guard<std::mutex> lock(memo_->mutex);
    if (auto it = memo_->times.find(key); it != memo_->times.end()) return it->second;
  }
  ASSIGN_OR_RETURN(double t, simulate(coll, algo, bytes, chunkBytes, nchannels,
                                      machineWith({tier == 1 ? 1.0 : 0.0, tier == 2 ? 1.0 : 0.0},
                                                  inCoreShare(bytes, chunkBytes, nchannels))));
  std::lock_guard<std::mutex> lock(memo_->mutex);
  memo_->times.emplace(key, t);
  return t;
}

std::string CostModel::describe() const {
  const Calibration& c = constants_.calibration;
  int cores = 0;
  for (int k : coresOfHost_) cores += k;
  char text[512];
  std::snprintf(text, sizeof(text),
                "%d ranks on %zu host(s), %d core(s) for them (ranks/core up to %.2f); step "
                "%.3f us, hop %.3f us (crowded %.3f us), copy %.1f/%.1f GB/s and reduce "
                "%.1f/%.1f GB/s (cache/memory), LLC %llu KiB, core cache %llu KiB",
                machine_.nranks, coresOfHost_.size(), cores, crowding(), c.stepUs, c.hopUs,
                c.crowdedHopUs, c.copyCacheGBps, c.copyDramGBps, c.reduceCacheGBps,
                c.reduceDramGBps, static_cast<unsigned long long>(llcOf(constants_) >> 10),
                static_cast<unsigned long long>(coreCacheOf(constants_.host) >> 10));
  return text;
}

}  // namespace braid
