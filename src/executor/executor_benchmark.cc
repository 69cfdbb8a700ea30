// Plan runs end to end, without bootstrap or communicator: n ranks as threads of this process,
// FIFOs and Wakers in process memory laid out as the shm transport lays them out, each rank
// driving a PlanRun of an all-reduce through runTasks (the progress engine, waits included).
//
// BM_PlanRunAllReduce/<bytes>/<algorithm>/threads:<n>: all-reduce of `bytes` (float32 sum).
// With more ranks than cores this measures what oversubscription costs the wait strategy.
// Read `call_us` (and bytes_per_second) for the time of one call: Google Benchmark counts every
// thread's iterations, so its Time column is the call's time divided by the n ranks.
// BM_PlanRunDepth/chunk:<bytes>/slots:<n>: a 4 MiB ring all-reduce of two ranks, by pipeline depth.
//   braid_benchmarks --benchmark_filter='BM_PlanRun' --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/algorithms.h"
#include "executor/connectors.h"
#include "executor/executor.h"
#include "executor/local_world.h"
#include "executor/progress.h"
#include "transport/transport.h"

namespace braid {
namespace {

constexpr uint32_t kSlotBytes = 128 << 10;  // the chunk, one per slot
constexpr uint32_t kNslots = 4;
struct RankState {
  std::unique_ptr<LocalTransport> transport;
  std::unique_ptr<LocalClient> client;
  ConnectorTable connectors;
  Plan plan;
  std::vector<float> input, output, scratch;
};

/// Everything one benchmark shape needs, shared by its threads and kept for the process's life
/// (the FIFO counters carry over from one benchmark run to the next, as in a communicator).
struct World {
  std::unique_ptr<LocalWorld> fifos;
  std::vector<RankState> ranks;
  kernels::Reducer reducer;
  CallDescriptor call;
  Status status;
};

/// What one benchmark runs: the call, and the FIFOs' chunk (= slot) size and depth.
struct Shape {
  int nranks = 2;
  size_t bytes = 0;
  Algorithm algo = Algorithm::kRing;
  bool spin = false;
  uint32_t chunkBytes = kSlotBytes;
  uint32_t nslots = kNslots;
  auto key() const { return std::tuple(nranks, bytes, algo, spin, chunkBytes, nslots); }
};

World& worldFor(const Shape& shape) {
  static std::mutex mutex;
  static std::map<decltype(shape.key()), std::unique_ptr<World>> worlds;
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<World>& w = worlds[shape.key()];
  if (w) return *w;
  const int nranks = shape.nranks;
  const size_t bytes = shape.bytes;
  const Algorithm algo = shape.algo;
  w = std::make_unique<World>();
  w->fifos =
      std::make_unique<LocalWorld>(nranks, shape.spin ? 0 : nranks, shape.chunkBytes, shape.nslots);
  w->reducer = kernels::Reducer(braidFloat32, braidSum, nranks);
  w->call.count = bytes / sizeof(float);
  w->call.algo = static_cast<uint8_t>(algo);
  w->ranks.resize(nranks);
  for (int r = 0; r < nranks; ++r) {
    RankState& rs = w->ranks[r];
    rs.transport = std::make_unique<LocalTransport>(w->fifos.get(), r);
    rs.client = std::make_unique<LocalClient>(w->fifos.get(), r);
    std::vector<Transport*> transports(nranks, rs.transport.get());
    transports[r] = nullptr;
    rs.connectors = ConnectorTable(r, 1, std::move(transports));
    PlanRequest req;
    req.coll = Collective::kAllReduce;
    req.algo = algo;
    req.nranks = nranks;
    req.rank = r;
    req.count = bytes / sizeof(float);
    req.elemSize = sizeof(float);
    req.chunkBytes = shape.chunkBytes;
    Result<Plan> plan = buildPlan(req);
    if (!plan.ok()) {
      w->status = plan.status();
      break;
    }
    rs.plan = std::move(plan).value();
    rs.input.assign(req.count, 1.0f + r);
    rs.output.assign(req.count, 0.0f);
    rs.scratch.assign(rs.plan.scratchBytes / sizeof(float) + 1, 0.0f);
  }
  return *w;
}

void runAllReduce(benchmark::State& state, const Shape& shape) {
  const int nranks = shape.nranks;
  const size_t bytes = shape.bytes;
  World& world = worldFor(shape);
  if (!world.status.ok()) {
    state.SkipWithError(world.status.message().c_str());
    return;
  }
  RankState& rs = world.ranks[state.thread_index()];
  PlanBuffers buffers{reinterpret_cast<const char*>(rs.input.data()),
                      reinterpret_cast<char*>(rs.output.data()),
                      reinterpret_cast<char*>(rs.scratch.data())};
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    PlanRun run(rs.plan, buffers, world.reducer, world.call, &rs.connectors);
    std::vector<ProgressTask> tasks(1);
    tasks[0].run = &run;
    tasks[0].client = rs.client.get();
    Status status = runTasks(tasks);
    if (!status.ok()) {
      state.SkipWithError(status.message().c_str());
      break;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const float expected = static_cast<float>(nranks * (nranks + 1) / 2);
  if (!rs.output.empty() && rs.output[0] != expected) state.SkipWithError("wrong sum");
  // Each rank took part in every call: its share of the bytes, so that the threads' sum is the
  // calls' bytes, and its own time per call, averaged over the ranks.
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(bytes / static_cast<size_t>(nranks)));
  state.counters["call_us"] = benchmark::Counter(
      seconds * 1e6 / static_cast<double>(std::max<int64_t>(1, state.iterations())),
      benchmark::Counter::kAvgThreads);
}

void BM_PlanRunAllReduce(benchmark::State& state, int nranks, Algorithm algo, bool spin) {
  runAllReduce(state, Shape{nranks, static_cast<size_t>(state.range(0)), algo, spin});
}

// The pipeline's depth: a 4 MiB ring all-reduce of two ranks with `chunk`-byte slots, `slots`
// of them per FIFO. What a rank has in flight (chunk x slots), not the chunk alone, sets the
// speed: 64 KiB x 4 runs at about half the rate of 64 KiB x 8 or 128 KiB x 4 (call_us).
void BM_PlanRunDepth(benchmark::State& state) {
  Shape shape;
  shape.bytes = 4 << 20;
  shape.chunkBytes = static_cast<uint32_t>(state.range(0));
  shape.nslots = static_cast<uint32_t>(state.range(1));
  runAllReduce(state, shape);
}
BENCHMARK(BM_PlanRunDepth)
    ->ArgNames({"chunk", "slots"})
    ->ArgsProduct({{32 << 10, 64 << 10, 128 << 10, 512 << 10}, {2, 4, 8, 16}})
    ->Threads(2)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// "/spin": the Wakers claim a core per rank, so the engine spins before yielding even when the
// ranks outnumber the cores (the behaviour before oversubscription was taken into account).
const bool kRegistered = [] {
  for (int n : {2, 4}) {
    for (Algorithm algo : {Algorithm::kRing, Algorithm::kDirect, Algorithm::kRhd, Algorithm::kRd,
                           Algorithm::kTree}) {
      for (bool spin : {false, true}) {
        if (spin && n <= 2) continue;
        const std::string name = "BM_PlanRunAllReduce/" + std::to_string(n) + "ranks/" +
                                 std::string(algorithmName(algo)) + (spin ? "/spin" : "");
        benchmark::RegisterBenchmark(name.c_str(), BM_PlanRunAllReduce, n, algo, spin)
            ->Arg(8)
            ->Arg(64 << 10)
            ->Arg(1 << 20)
            ->Arg(4 << 20)
            ->Threads(n)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  return true;
}();

}  // namespace
}  // namespace braid
