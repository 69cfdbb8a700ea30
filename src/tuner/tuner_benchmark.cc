// What a communicator's init spends on its tuner: building the model grid (every collective,
// algorithm, size, chunk and channel count the model costs), and one prediction by size.
//
// BM_TunerCreate/<nranks>: Tuner::create from a fresh model (no grid cached), one host.
// BM_TunerShare/<nranks>: the same grid split between nranks ranks as a communicator splits it,
//   the ranks threads that gather their shares as ranks do: slowest_ms adds up, over the rounds
//   between the gathers, the CPU of the slowest rank in each (what init waits for when every rank
//   has a core), total_ms is every rank's CPU (what a host's cores spend).
// BM_TunerShareHostsOf8/<nranks>: BM_TunerShare over hosts of 8 ranks (hierarchical algorithms,
//   network links).
// BM_TunerShareHostsOf16/<nranks>: the same over hosts of 16 (braid-scale-init's 256 ranks).
// BM_TunerShareOwnCores/<nranks>: hosts of 8 ranks with a core each (1000 ranks against 1024:
//   what a rank count that is not a power of two costs; 3000 takes minutes and GBs).
// BM_Predict/<log2 bytes>: one all-reduce ring prediction of 4 ranks, 128 KiB chunks, 2 channels.
//   braid_benchmarks --benchmark_filter='BM_TunerCreate|BM_Predict'
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "tuner/cost_model.h"
#include "tuner/thread_gather.h"
#include "tuner/tuner.h"

namespace braid {
namespace {

/// Constants a 2-vCPU VM calibrated (one with a 260 MiB L3); `salt` makes each model's grid key
/// new.
ModelConstants vmConstants(double salt) {
  ModelConstants m;
  Calibration& c = m.calibration;
  c.stepUs = 0.03 + salt * 1e-9;
  c.hopUs = 0.17;
  c.crowdedHopUs = 2.7;
  c.crowdedPostUs = 0.48;
  c.copyCacheGBps = 38;
  c.copyLlcGBps = 12.5;
  c.copyDramGBps = 4.9;
  c.reduceCacheGBps = 39;
  c.reduceDramGBps = 5.7;
  c.transferGBps = 10.8;
  c.cacheMiB = 260;
  c.crowdedSwitchFactor = 2.3;
  c.cpus = 2;
  m.host.cores = 2;
  m.host.llcBytes = 260ull << 20;
  // A 10 Gb/s network between the hosts (BM_TunerShareHostsOf8).
  m.host.networkLatencyUs = 20;
  m.host.networkGBps = 1.25;
  return m;
}

/// perHost > 0: hosts of perHost ranks each, in rank order (else one host); ownCores: each host
/// has a core per rank (else the VM's two).
CostModel oneHostModel(int nranks, double salt, int perHost = 0, bool ownCores = false) {
  std::vector<RankPlacement> placements(static_cast<size_t>(nranks));
  for (size_t r = 0; r < placements.size(); ++r) {
    placements[r].hostHash = perHost > 0 ? 7 + r / size_t(perHost) : 7;
  }
  ModelConstants constants = vmConstants(salt);
  if (ownCores) constants.host.cores = perHost > 0 ? perHost : nranks;
  return CostModel::create(constants, placements, {}, 4).value();
}

/// A communicator's limits by default: 4 channels, 4 slots of 512 KiB.
TunerOptions defaultOptions(int nranks) {
  TunerOptions options;
  options.nranks = nranks;
  options.maxChannels = 4;
  options.slotBytes = 512 << 10;
  options.nslots = 4;
  return options;
}

void BM_TunerCreate(benchmark::State& state) {
  const int nranks = static_cast<int>(state.range(0));
  const TunerOptions options = defaultOptions(nranks);
  double salt = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const CostModel model = oneHostModel(nranks, ++salt);
    state.ResumeTiming();
    Result<Tuner> tuner = Tuner::create(options, model, nullptr);
    if (!tuner.ok()) state.SkipWithError(tuner.status().message().c_str());
    benchmark::DoNotOptimize(tuner);
  }
}
BENCHMARK(BM_TunerCreate)->Arg(2)->Arg(4)->Arg(8)->Arg(16)->Arg(32)->Unit(benchmark::kMillisecond);

void tunerShare(benchmark::State& state, int perHost, bool ownCores = false) {
  const int nranks = static_cast<int>(state.range(0));
  const TunerOptions options = defaultOptions(nranks);
  double salt = 1e6;
  double slowest = 0;
  double total = 0;
  for (auto _ : state) {
    // Every rank a thread with its own model and memo, gathering with the others as ranks do.
    std::vector<CostModel> models;
    for (int r = 0; r < nranks; ++r) {
      models.push_back(oneHostModel(nranks, ++salt, perHost, ownCores));
    }
    ThreadGather gather(nranks);
    std::vector<double> cpu(static_cast<size_t>(nranks));
    std::vector<std::thread> threads;
    for (int r = 0; r < nranks; ++r) {
      threads.emplace_back([&, r] {
        Result<Tuner> tuner = Tuner::create(options, models[size_t(r)], nullptr, gather.share(r));
        cpu[size_t(r)] = ThreadGather::threadCpuSeconds();
        if (!tuner.ok()) state.SkipWithError(tuner.status().message().c_str());
      });
    }
    for (std::thread& t : threads) t.join();
    // Between two all-gathers every rank works alone: init waits for the slowest of each round.
    const std::vector<std::vector<double>>& marks = gather.cpuSeconds();
    for (size_t round = 0; round < marks[0].size(); ++round) {
      double longest = 0;
      for (int r = 0; r < nranks; ++r) {
        const std::vector<double>& m = marks[size_t(r)];
        longest = std::max(longest, m[round] - (round == 0 ? 0 : m[round - 1]));
      }
      slowest += longest * 1e3;
    }
    for (double seconds : cpu) total += seconds * 1e3;
  }
  state.counters["slowest_ms"] = slowest / double(state.iterations());
  state.counters["total_ms"] = total / double(state.iterations());
}
void BM_TunerShare(benchmark::State& state) { tunerShare(state, 0); }
BENCHMARK(BM_TunerShare)->Arg(2)->Arg(4)->Arg(8)->Arg(16)->Arg(32)->Unit(benchmark::kMillisecond);

// The same over hosts of 8 ranks: the rank counts braid-scale-init runs, and 1000 (no power of
// two: plans that fold ranks do not repeat host by host).
void BM_TunerShareHostsOf8(benchmark::State& state) { tunerShare(state, 8); }
BENCHMARK(BM_TunerShareHostsOf8)
    ->Arg(16)
    ->Arg(64)
    ->Arg(128)
    ->Arg(256)
    ->Arg(1000)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// Hosts of 8 cores for their 8 ranks, as on GPU servers: the staged long sizes take one round.
void BM_TunerShareOwnCores(benchmark::State& state) { tunerShare(state, 8, true); }
BENCHMARK(BM_TunerShareOwnCores)
    ->Arg(256)
    ->Arg(1000)
    ->Arg(1024)
    ->Arg(3000)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// Hosts of 16: each simulation follows twice the plans of hosts of 8.
void BM_TunerShareHostsOf16(benchmark::State& state) { tunerShare(state, 16); }
BENCHMARK(BM_TunerShareHostsOf16)->Arg(256)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_Predict(benchmark::State& state) {
  const CostModel model = oneHostModel(4, 0);
  const uint64_t bytes = uint64_t{1} << state.range(0);
  for (auto _ : state) {
    Result<double> us =
        model.predict(Collective::kAllReduce, Algorithm::kRing, bytes, 128 << 10, 2);
    benchmark::DoNotOptimize(us);
  }
}
BENCHMARK(BM_Predict)->DenseRange(10, 32, 6)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace braid
