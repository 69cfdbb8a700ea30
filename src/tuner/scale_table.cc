// braid-scale-table: every all-reduce algorithm priced on a simulated cluster of thousands of
// GPUs, with no processes (cluster_model.h), beside its alpha-beta figure, and the algorithm the
// tuner's rule (the cheapest predicted) picks at each size. docs/scale.md shows its output.
//
//   braid-scale-table --server FILE [--ranks 1024,4096,16384] [--min BYTES] [--max BYTES]
//                     [--factor F] [--chunk BYTES] [--channels N] [--budget STEPS] [--csv]
//
// --server: an hwloc XML description of one host (tests/data/gpu8_sxm_ib400.xml); hosts are its
// copies, one rank per GPU. --csv prints one line per (ranks, bytes, algorithm) for plotting
// (perf/results/scale/plot.py). Sizes are bytes per rank, from --min to --max, each --factor
// times the last (2). --budget: the most plan steps one simulation holds (4M, about 1 GB).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "algorithms/algorithms.h"
#include "topology/discover.h"
#include "tuner/cluster_model.h"

namespace braid {
namespace {

struct Options {
  std::string server;
  std::vector<int> ranks = {1024, 4096, 16384};
  uint64_t minBytes = 8;
  uint64_t maxBytes = uint64_t{1} << 30;
  uint32_t chunkBytes = 512 << 10;
  int nchannels = 2;
  uint64_t budget = 4'000'000;
  uint64_t factor = 2;  ///< each size is the last times this
  bool csv = false;
};

// "8", "64K", "1M", "1G".
bool parseBytes(const char* text, uint64_t& out) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text) return false;
  uint64_t scale = 1;
  if (*end == 'K') scale = uint64_t{1} << 10;
  if (*end == 'M') scale = uint64_t{1} << 20;
  if (*end == 'G') scale = uint64_t{1} << 30;
  if (scale != 1) ++end;
  if (*end != '\0') return false;
  out = uint64_t(v) * scale;
  return true;
}

std::string sizeText(uint64_t bytes) {
  const char* units[] = {"B", "K", "M", "G"};
  int u = 0;
  while (u < 3 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++u;
  }
  return std::to_string(bytes) + units[u];
}

int usage(const char* why) {
  std::fprintf(stderr,
               "braid-scale-table: %s\nusage: braid-scale-table --server FILE [--ranks "
               "1024,4096,16384] [--min BYTES] [--max BYTES] [--chunk BYTES] [--channels N] "
               "[--factor F] [--budget STEPS] [--csv]\n",
               why);
  return 2;
}

bool parseArgs(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    uint64_t b = 0;
    if (a == "--csv") {
      o.csv = true;
      continue;
    }
    if (v == nullptr) return false;
    ++i;
    if (a == "--server") {
      o.server = v;
    } else if (a == "--ranks") {
      o.ranks.clear();
      for (const char* p = v; *p;) {
        char* end = nullptr;
        const long r = std::strtol(p, &end, 10);
        if (end == p || r < 2) return false;
        o.ranks.push_back(int(r));
        p = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end != '\0') return false;
      }
    } else if (a == "--min" && parseBytes(v, b) && b > 0) {
      o.minBytes = b;
    } else if (a == "--max" && parseBytes(v, b) && b > 0) {
      o.maxBytes = b;
    } else if (a == "--chunk" && parseBytes(v, b) && b > 0 && b <= (uint64_t{1} << 30)) {
      o.chunkBytes = uint32_t(b);
    } else if (a == "--channels" && std::atoi(v) >= 1 && std::atoi(v) <= 64) {
      o.nchannels = std::atoi(v);
    } else if (a == "--factor" && parseBytes(v, b) && b >= 2) {
      o.factor = b;
    } else if (a == "--budget" && parseBytes(v, b) && b > 0) {
      o.budget = b;
    } else {
      return false;
    }
  }
  return !o.server.empty() && o.minBytes <= o.maxBytes;
}

// Each algorithm's pace at one size, and which is the cheapest.
struct Row {
  uint64_t bytes = 0;
  std::map<Algorithm, Price> prices;
  std::map<Algorithm, double> formulas;
};

int run(int argc, char** argv) {
  Options o;
  if (!parseArgs(argc, argv, o)) return usage("bad or missing arguments");
  TopologyOptions topoOptions;
  topoOptions.xmlFile = o.server;
  Result<Topology> server = discoverTopology(topoOptions);
  if (!server.ok())
    return usage(("cannot load " + o.server + ": " + server.status().message()).c_str());
  const std::vector<Algorithm> algos = algorithmsFor(Collective::kAllReduce);
  if (o.csv) std::printf("ranks,bytes,algorithm,simulated_us,route,alpha_beta_us\n");
  for (int n : o.ranks) {
    Result<ClusterShape> probe = clusterOf(*server, 1);
    if (!probe.ok()) return usage(probe.status().message().c_str());
    if (n % probe->ranksPerHost != 0) return usage("ranks must be whole hosts");
    Result<ClusterShape> cluster = clusterOf(*server, n / probe->ranksPerHost);
    if (!o.csv) {
      std::printf("\n## %d ranks: %s; chunk %s, %d channels\n\n", n, cluster->describe().c_str(),
                  sizeText(o.chunkBytes).c_str(), o.nchannels);
      std::printf("| bytes |");
      for (Algorithm a : algos) std::printf(" %s |", std::string(algorithmName(a)).c_str());
      std::printf(" picked | worst off alpha-beta |\n| ---: |");
      for (size_t i = 0; i < algos.size(); ++i) std::printf(" ---: |");
      std::printf(" --- | ---: |\n");
    }
    for (uint64_t bytes = o.minBytes; bytes <= o.maxBytes; bytes *= o.factor) {
      Row row;
      row.bytes = bytes;
      for (Algorithm a : algos) {
        // Direct sends n-1 copies per rank: at thousands of ranks it is out of the question
        // (the tuner's modelMayPick bars it), and its plans are O(n^2) steps.
        if (a == Algorithm::kDirect) continue;
        Result<Price> p = priceAllReduce(*cluster, a, bytes, o.chunkBytes, o.nchannels, o.budget);
        if (!p.ok()) {
          std::fprintf(stderr, "%s at %d ranks, %s: %s\n", std::string(algorithmName(a)).c_str(), n,
                       sizeText(bytes).c_str(), p.status().message().c_str());
          continue;
        }
        row.prices[a] = *p;
        // The formula at the bytes the simulation priced (a rounded count stands for its own).
        row.formulas[a] = alphaBetaAllReduceUs(*cluster, a, p->bytes, o.chunkBytes, o.nchannels);
      }
      Algorithm best = Algorithm::kRing;
      double bestUs = -1;
      double worst = 0;
      for (const auto& [a, p] : row.prices) {
        if (bestUs < 0 || p.us < bestUs) {
          bestUs = p.us;
          best = a;
        }
        const double f = row.formulas[a];
        if (f > 0) worst = std::max(worst, std::abs(p.us / f - 1));
        if (o.csv) {
          std::printf("%d,%llu,%s,%.3f,%s,%.3f\n", n, static_cast<unsigned long long>(bytes),
                      std::string(algorithmName(a)).c_str(), p.us,
                      std::string(priceRouteName(p.route)).c_str(), f);
          std::fflush(stdout);
        }
      }
      if (o.csv) continue;
      std::printf("| %s |", sizeText(bytes).c_str());
      for (Algorithm a : algos) {
        auto it = row.prices.find(a);
        if (it == row.prices.end()) {
          std::printf(" - |");
          continue;
        }
        const char mark = it->second.route == PriceRoute::kLinear    ? '~'
                          : it->second.route == PriceRoute::kRounded ? '*'
                                                                     : ' ';
        std::printf(" %.1f%c (%.1f) |", it->second.us, mark, row.formulas[a]);
      }
      std::printf(" %s | %.1f%% |\n", std::string(algorithmName(best)).c_str(), 100 * worst);
      std::fflush(stdout);
    }
  }
  if (!o.csv) {
    std::printf(
        "\nmicroseconds simulated (alpha-beta); ~ extrapolated linearly from the two largest "
        "sizes within the step budget, * a count rounded up to whole elements per rank; picked: "
        "the cheapest simulated, as the tuner picks from its model\n");
  }
  return 0;
}

}  // namespace
}  // namespace braid

int main(int argc, char** argv) { return braid::run(argc, argv); }
