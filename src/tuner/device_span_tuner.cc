#include "tuner/device_span_tuner.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

#include "algorithms/algorithms.h"
#include "tuner/model_plans.h"

namespace braid {
namespace {

// Messages longer than two spans are simulated at one and two spans and extrapolated linearly, as
// the host cost model does: past the pipeline's fill every further chunk costs the same. A span
// covers a round of the ring and hierarchical all-reduce (n chunks) and at least four chunks.
// Both simulations serve every longer size of a candidate (they are remembered).
constexpr uint64_t kSpanChunks = 4;

// Calls above this size get no chunk below it, as on the host (tuner.cc): the device path's slots
// are large, and each smaller candidate costs a simulation of many more steps.
constexpr uint64_t kMinLargeCallChunkBytes = 128 * 1024;

// The model runs a call on at most this many of its channels: enough lanes to overlap one slot's
// wait with another's work, while the simulation of a long call stays within milliseconds. Its
// steps share the GPU's rates, so more lanes would add no speed to the model.
constexpr int kModelChannels = 4;

// Between islands the model cannot tell the hierarchical all-reduce from recursive halving where
// islands hold a power of two of contiguous ranks: both move the least possible over the network
// (docs/performance-notes.md#device-calls-across-hosts). Within this factor of the fastest, the one
// built for the shape is chosen; it keeps that minimum at any rank count.
constexpr double kHierPreference = 1.03;

double usPerByte(double gbps) { return 1.0 / (gbps * 1e3); }

}  // namespace

DeviceLinkCosts DeviceLinkCosts::withNetworkOf(const HostShape& host) {
  DeviceLinkCosts costs;
  if (host.networkLatencyUs > 0) costs.networkLatencyUs = host.networkLatencyUs;
  if (host.networkGBps > 0) costs.networkGBps = host.networkGBps;
  return costs;
}

bool DeviceSpanTuner::spansIslands(const std::vector<int>& islandOf) {
  return std::any_of(islandOf.begin(), islandOf.end(),
                     [&](int island) { return island != islandOf.front(); });
}

Result<std::unique_ptr<DeviceSpanTuner>> DeviceSpanTuner::create(const TunerOptions& options,
                                                                 uint64_t bytesPerChannel,
                                                                 std::vector<int> islandOf,
                                                                 std::vector<int> ring,
                                                                 const DeviceLinkCosts& costs) {
  const int n = options.nranks;
  if (n < 1 || static_cast<int>(islandOf.size()) != n) {
    return invalidArgument("device tuner: islands of " + std::to_string(islandOf.size()) +
                           " ranks for a communicator of " + std::to_string(n));
  }
  if (!ring.empty() && static_cast<int>(ring.size()) != n) {
    return invalidArgument("device tuner: ring order of " + std::to_string(ring.size()) +
                           " ranks for " + std::to_string(n));
  }
  for (double v : {costs.stepUs, costs.gpuHopUs, costs.copyGBps, costs.reduceGBps,
                   costs.hostCopyGBps, costs.proxyUs, costs.networkLatencyUs, costs.networkGBps}) {
    if (!(v > 0)) return invalidArgument("device tuner: every cost must be positive");
  }
  std::unique_ptr<DeviceSpanTuner> t(new DeviceSpanTuner());
  t->options_ = options;
  t->options_.maxChannels = std::max(1, options.maxChannels);
  t->bytesPerChannel_ = bytesPerChannel;
  ASSIGN_OR_RETURN(t->override_, AlgoOverride::parse(options.algo));
  // Dense island numbers in order of first rank: plans and the simulation index hosts by them.
  std::map<int, int> dense;
  for (int& island : islandOf) {
    island = dense.try_emplace(island, static_cast<int>(dense.size())).first->second;
  }
  t->islandOf_ = std::move(islandOf);
  t->nislands_ = static_cast<int>(dense.size());
  t->ring_ = std::move(ring);
  t->costs_ = costs;

  SimMachine& m = t->machine_;
  m.nranks = n;
  m.hostOf = t->islandOf_;
  m.cores.assign(size_t(t->nislands_), 0);  // every GPU runs its own lanes
  m.hopUs.assign(size_t(t->nislands_), costs.gpuHopUs);
  m.nslots = std::max(1, options.nslots);
  m.stepUs = costs.stepUs;
  m.bytes.copy = usPerByte(costs.copyGBps);
  m.bytes.reduce = usPerByte(costs.reduceGBps);
  // Serial resources: each GPU's host link (its staged copies), then each island's network link.
  m.wires = n + t->nislands_;
  m.links.resize(size_t(n) * size_t(n));
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b || m.hostOf[a] == m.hostOf[b]) continue;
      PairLink& l = m.links[size_t(a) * size_t(n) + size_t(b)];
      l.stage = a;
      l.stageUsPerByte = usPerByte(costs.hostCopyGBps);
      l.wire = n + m.hostOf[a];
      l.wireUsPerByte = usPerByte(costs.networkGBps);
      l.latencyUs = costs.networkLatencyUs + 2 * costs.proxyUs;
    }
  }
  return t;
}

bool DeviceSpanTuner::usable(Algorithm algo, Collective coll) const {
  return algorithmServes(algo, coll) && minSlotsFor(algo, coll) <= options_.nslots;
}

std::vector<uint32_t> DeviceSpanTuner::chunkCandidates() const {
  if (options_.chunkBytes != 0) return {std::min(options_.chunkBytes, options_.slotBytes)};
  std::vector<uint32_t> chunks;
  for (uint32_t c : Tuner::kChunkCandidates) {
    if (c <= options_.slotBytes) chunks.push_back(c);
  }
  if (chunks.empty()) chunks.push_back(options_.slotBytes);
  return chunks;
}

int DeviceSpanTuner::channelsFor(uint64_t bytes) const {
  uint64_t wanted = 1;
  if (options_.nchannels != 0) {
    wanted = uint64_t(options_.nchannels);
  } else if (bytesPerChannel_ != 0) {
    wanted = bytes / bytesPerChannel_;
  }
  return static_cast<int>(std::clamp<uint64_t>(wanted, 1, uint64_t(options_.maxChannels)));
}

Result<std::vector<Plan>> DeviceSpanTuner::plansFor(Collective coll, Algorithm algo, uint64_t bytes,
                                                    uint32_t chunkBytes, int nchannels) const {
  const int n = machine_.nranks;
  PlanRequest request = modelRequest(coll, algo, n, bytes, chunkBytes, nchannels, ring_);
  if (algo == Algorithm::kHier) request.hosts = islandOf_;
  std::vector<Plan> plans;
  plans.reserve(size_t(n));
  for (int r = 0; r < n; ++r) {
    request.rank = r;
    ASSIGN_OR_RETURN(Plan plan, buildPlan(request));
    plans.push_back(std::move(plan));
  }
  return plans;
}

Result<double> DeviceSpanTuner::simulate(Collective coll, Algorithm algo, uint64_t bytes,
                                         uint32_t chunkBytes, int nchannels) const {
  const auto key = std::make_tuple(coll, algo, bytes, chunkBytes, nchannels);
  {
    std::lock_guard<std::mutex> lock(simMutex_);
    if (auto it = simulated_.find(key); it != simulated_.end()) return it->second;
  }
  ASSIGN_OR_RETURN(std::vector<Plan> plans, plansFor(coll, algo, bytes, chunkBytes, nchannels));
  ASSIGN_OR_RETURN(const double us, simulatePlans(plans, machine_));
  std::lock_guard<std::mutex> lock(simMutex_);
  simulated_.emplace(key, us);
  return us;
}

Result<double> DeviceSpanTuner::predict(Collective coll, Algorithm algo, uint64_t bytes,
                                        uint32_t chunkBytes) const {
  if (!models(coll)) {
    return invalidArgument("the device tuner does not model " + std::string(collectiveName(coll)));
  }
  if (!algorithmServes(algo, coll)) {
    return invalidArgument(std::string(algorithmName(algo)) + " does not serve " +
                           std::string(collectiveName(coll)));
  }
  if (chunkBytes == 0) return invalidArgument("chunk must be > 0");
  if (bytes == 0 || machine_.nranks == 1) return 0.0;
  const int nchannels = std::min(channelsFor(bytes), kModelChannels);
  const uint64_t unit = uint64_t(chunkBytes) * uint64_t(nchannels);
  const uint64_t span = std::max<uint64_t>(kSpanChunks, uint64_t(machine_.nranks)) * unit;
  if (bytes <= 2 * span) return simulate(coll, algo, bytes, chunkBytes, nchannels);
  ASSIGN_OR_RETURN(const double one, simulate(coll, algo, span, chunkBytes, nchannels));
  ASSIGN_OR_RETURN(const double two, simulate(coll, algo, 2 * span, chunkBytes, nchannels));
  return extrapolateSpans(one, two, span, bytes);
}

const DeviceSpanTuner::AlgoCells& DeviceSpanTuner::cellsAt(Collective coll, int k) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, fresh] = cells_.try_emplace({coll, k});
  if (!fresh) return it->second;
  const uint64_t bytes = uint64_t{1} << k;
  const std::vector<uint32_t> chunks = chunkCandidates();
  for (Algorithm algo : algorithmsFor(coll)) {
    if (!usable(algo, coll)) continue;
    // What choose() could not pick is not costed (direct's n-1 copies cost n^2 transfers to
    // simulate); with BRAID_ALGO set, anything may be asked for.
    if (!override_.active() && !modelMayPick(algo, coll, bytes, options_.nranks)) continue;
    Cell& cell = it->second[static_cast<int>(algo)];
    for (size_t i = 0; i < chunks.size(); ++i) {
      // A message no larger than a smaller candidate's chunk plans the same with this one.
      if (i > 0 && bytes <= chunks[i - 1]) break;
      if (bytes > kMinLargeCallChunkBytes && chunks[i] < kMinLargeCallChunkBytes &&
          chunks.back() >= kMinLargeCallChunkBytes) {
        continue;
      }
      Result<double> us = predict(coll, algo, bytes, chunks[i]);
      if (!us.ok()) continue;  // a shape this algorithm cannot plan: not a candidate
      if (cell.us < 0 || us.value() < cell.us) cell = Cell{us.value(), chunks[i]};
    }
  }
  return it->second;
}

bool DeviceSpanTuner::models(Collective coll) {
  return coll != Collective::kSend && coll != Collective::kRecv &&
         static_cast<int>(coll) < AlgoOverride::kNumOverridable;
}

Choice DeviceSpanTuner::choose(Collective coll, uint64_t bytes) const {
  const std::optional<std::vector<Algorithm>> allowed = override_.allowed(coll, bytes);
  auto isAllowed = [&](Algorithm a) {
    return usable(a, coll) &&
           (!allowed || std::find(allowed->begin(), allowed->end(), a) != allowed->end());
  };
  const AlgoCells& cells = cellsAt(coll, Tuner::gridIndex(bytes));
  int best = -1;
  for (int a = 0; a < kNumAlgorithms; ++a) {
    const auto algo = static_cast<Algorithm>(a);
    if (cells[a].us < 0 || !isAllowed(algo)) continue;
    if (!allowed && !modelMayPick(algo, coll, bytes, options_.nranks)) continue;
    if (best < 0 || cells[a].us < cells[best].us) best = a;
  }
  const Cell& hier = cells[static_cast<int>(Algorithm::kHier)];
  if (best >= 0 && hier.us >= 0 && isAllowed(Algorithm::kHier) &&
      hier.us <= kHierPreference * cells[best].us) {
    best = static_cast<int>(Algorithm::kHier);
  }
  Choice c;
  c.source = allowed ? ChoiceSource::kOverride : ChoiceSource::kModel;
  c.nchannels = channelsFor(bytes);
  if (best >= 0) {
    c.algo = static_cast<Algorithm>(best);
    c.chunkBytes = cells[best].chunkBytes;
    c.predictedUs = cells[best].us;
    return c;
  }
  // Nothing costed among the allowed: the first that may run.
  for (Algorithm a : algorithmsFor(coll)) {
    if (isAllowed(a)) {
      c.algo = a;
      c.chunkBytes = chunkCandidates()[chunkCandidates().size() / 2];
      return c;
    }
  }
  c.algo = Algorithm::kRing;
  c.chunkBytes = chunkCandidates().front();
  return c;
}

std::string DeviceSpanTuner::describe() const {
  std::vector<int> sizes(size_t(nislands_), 0);
  for (int island : islandOf_) ++sizes[size_t(island)];
  std::string shape;
  for (int s : sizes) shape += (shape.empty() ? "" : "+") + std::to_string(s);
  char text[400];
  std::snprintf(text, sizeof(text),
                "%d ranks in %d GPU islands (%s ranks); step %.2f us, GPU hop %.2f us, copy %.0f "
                "GB/s, reduce %.0f GB/s; staged hop: host copy %.1f GB/s, proxies 2 x %.1f us, "
                "network %.1f us and %.2f GB/s",
                options_.nranks, nislands_, shape.c_str(), costs_.stepUs, costs_.gpuHopUs,
                costs_.copyGBps, costs_.reduceGBps, costs_.hostCopyGBps, costs_.proxyUs,
                costs_.networkLatencyUs, costs_.networkGBps);
  return text;
}

}  // namespace braid
