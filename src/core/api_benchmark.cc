// What one call through the C API costs before any data moves: a one-rank communicator, whose
// collectives only copy (or reduce) the caller's buffer, so the time is the library's per-call
// path - argument checks, plan lookup, the progress engine - which small calls pay on every rank.
//
//   braid_benchmarks --benchmark_filter='BM_Api' --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <vector>

#include "braid.h"

namespace braid {
namespace {

class OneRank {
 public:
  OneRank() {
    braidUniqueId id;
    ok_ = braidGetUniqueId(&id) == braidSuccess &&
          braidCommInitRank(&comm_, 1, id, 0) == braidSuccess;
  }
  ~OneRank() {
    if (comm_ != nullptr) braidCommDestroy(comm_);
  }
  bool ok() const { return ok_; }
  braidComm_t comm() const { return comm_; }

 private:
  braidComm_t comm_ = nullptr;
  bool ok_ = false;
};

void BM_ApiAllReduce(benchmark::State& state) {
  OneRank one;
  if (!one.ok()) return state.SkipWithError("cannot create a one-rank communicator");
  const size_t count = static_cast<size_t>(state.range(0)) / sizeof(float);
  std::vector<float> in(count, 1.0f), out(count);
  for (auto _ : state) {
    if (braidAllReduce(in.data(), out.data(), count, braidFloat32, braidSum, one.comm(), nullptr) !=
        braidSuccess) {
      return state.SkipWithError("braidAllReduce failed");
    }
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_ApiAllReduce)->Arg(8)->Arg(4096);

void BM_ApiBroadcast(benchmark::State& state) {
  OneRank one;
  if (!one.ok()) return state.SkipWithError("cannot create a one-rank communicator");
  std::vector<float> buffer(16, 1.0f);
  for (auto _ : state) {
    if (braidBroadcast(buffer.data(), buffer.data(), buffer.size(), braidFloat32, 0, one.comm(),
                       nullptr) != braidSuccess) {
      return state.SkipWithError("braidBroadcast failed");
    }
    benchmark::DoNotOptimize(buffer.data());
  }
}
BENCHMARK(BM_ApiBroadcast);

}  // namespace
}  // namespace braid
