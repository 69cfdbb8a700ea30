// What a communicator's init spends on the machine's topology when its host's cache entry is
// there (every rank after the host's first process): hwloc's XML loaded and turned into a graph.
//
// BM_DiscoverFromCache: as a rank does it, hwloc's unread plugins left closed.
// BM_DiscoverFromCacheAllPlugins: the same with HWLOC_PLUGINS_BLACKLIST set empty, which opens
//   every plugin hwloc finds (what each rank paid before they were left closed).
//   braid_benchmarks --benchmark_filter=BM_DiscoverFromCache
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "topology/discover.h"

namespace braid {
namespace {

void discoverFromCache(benchmark::State& state, bool allPlugins) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("braid_discover_bench_" + std::to_string(getpid()));
  TopologyOptions options;
  options.cacheDir = dir.string();
  if (!discoverTopology(options).ok()) {  // the host's first process: probes, writes the entry
    state.SkipWithError("cannot probe this machine");
    return;
  }
  if (allPlugins) setenv("HWLOC_PLUGINS_BLACKLIST", "", 1);
  for (auto _ : state) {
    Result<Topology> t = discoverTopology(options);
    if (!t.ok()) {
      state.SkipWithError(t.status().message().c_str());
      break;
    }
    benchmark::DoNotOptimize(t->numPus());
  }
  if (allPlugins) unsetenv("HWLOC_PLUGINS_BLACKLIST");
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

void BM_DiscoverFromCache(benchmark::State& state) { discoverFromCache(state, false); }
void BM_DiscoverFromCacheAllPlugins(benchmark::State& state) { discoverFromCache(state, true); }

BENCHMARK(BM_DiscoverFromCache)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DiscoverFromCacheAllPlugins)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace braid
