// braid-model-regret: the cost model's regret, offline, for any collective. It builds the tuner a
// communicator of this host would build (this host's topology, a calibration file, the default
// configuration) for the rank count and collective of a braid-perf --algo all --json sweep, and
// compares the model's choice at every size with what was measured:
//
//   regret = time(the model's choice) / time(the fastest algorithm) - 1,
//
// every (size, algorithm) timed as the fastest of its records (cycles, placements). It needs no
// second process and no quiet machine: the measurements are the ground truth, the model is judged.
// The sweep records no chunk or channel count: each algorithm was measured with what the tuner of
// the measuring build picked for it (--verbose prints what this build picks); where a model change
// picks another, that row's regret is only an estimate until measured again.
//
//   braid-model-regret --calibration FILE [--verbose] [--llc BYTES] [--bind core|none]
//   SWEEP.json...
// (--llc: judge the model as if the last-level cache held BYTES; --bind: where the sweep does not
// say, whether braid-perf bound its ranks to a CPU each - its default - or not)
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "algorithms/algorithms.h"
#include "base/config.h"
#include "base/dtype.h"
#include "topology/locality.h"
#include "topology/ordering.h"
#include "topology/process_topology.h"
#include "tuner/calibration.h"
#include "tuner/cost_model.h"
#include "tuner/tuner.h"

namespace braid {
namespace {

std::optional<Collective> collectiveNamed(std::string_view name) {
  for (int c = 0; c < kNumCollectives; ++c) {
    if (collectiveName(static_cast<Collective>(c)) == name) return static_cast<Collective>(c);
  }
  return std::nullopt;
}

struct Sweep {
  Collective coll = Collective::kAllReduce;
  int nranks = 0;
  /// Whether braid-perf bound rank p to the p-th CPU (mod their number): recorded since the
  /// sweeps say so, else the --bind option (default core, as braid-perf's own default).
  std::optional<bool> bound;
  std::map<uint64_t, std::map<std::string, double>> fastest;  ///< size -> algorithm -> us
  /// size -> the bytes the tuner is asked about: count x datatype size, as the library computes
  /// them (per rank for all-gather and reduce-scatter, per peer for all-to-all).
  std::map<uint64_t, uint64_t> callBytes;
};

Result<std::string> readText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return invalidArgument("cannot read " + path);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// The text after `"key": ` on a line of braid-perf's JSON (one record per line).
std::optional<std::string> field(const std::string& line, const std::string& key) {
  const std::string tag = "\"" + key + "\": ";
  const size_t at = line.find(tag);
  if (at == std::string::npos) return std::nullopt;
  size_t begin = at + tag.size();
  size_t end = begin;
  if (begin < line.size() && line[begin] == '"') {
    ++begin;
    end = line.find('"', begin);
  } else {
    end = line.find_first_of(",}", begin);
  }
  if (end == std::string::npos) return std::nullopt;
  return line.substr(begin, end - begin);
}

Result<Sweep> loadSweep(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, readText(path));
  Sweep sweep;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (sweep.nranks == 0 && line.find("\"nranks\": ") != std::string::npos &&
        line.find("\"algorithm\"") == std::string::npos) {
      sweep.nranks = std::stoi(*field(line, "nranks"));
      continue;
    }
    if (const auto bind = field(line, "bind"); bind && !sweep.bound) {
      sweep.bound = *bind == "core";
      continue;
    }
    const auto algo = field(line, "algorithm");
    const auto size = field(line, "size");
    const auto us = field(line, "time_us");
    const auto coll = field(line, "collective");
    const auto count = field(line, "count");
    const auto dtype = field(line, "dtype");
    if (!algo || !size || !us || !coll || !count || !dtype) continue;
    const std::optional<Collective> c = collectiveNamed(*coll);
    if (!c || *c == Collective::kSend || *c == Collective::kRecv) continue;
    if (!sweep.fastest.empty() && *c != sweep.coll) {
      return invalidArgument(path + ": measurements of more than one collective");
    }
    sweep.coll = *c;
    const double t = std::stod(*us);
    const std::optional<braidDataType_t> type = parseDataType(*dtype);
    if (!type) return invalidArgument(path + ": unknown dtype " + *dtype);
    sweep.callBytes[std::stoull(*size)] = std::stoull(*count) * dataTypeSize(*type);
    double& best = sweep.fastest[std::stoull(*size)][*algo];
    if (best == 0 || t < best) best = t;
  }
  if (sweep.nranks < 2 || sweep.fastest.empty()) {
    return invalidArgument(path + ": no collective measurements of 2 or more ranks");
  }
  return sweep;
}

Result<Calibration> loadCalibration(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, readText(path));
  // Judge the model with these constants whatever binary measured them.
  std::string fingerprint;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("fingerprint ", 0) == 0) fingerprint = line.substr(12);
  }
  return parseCalibration(text, fingerprint, path);
}

// The tuner of a communicator of `nranks` ranks on this host, rank p bound to the p-th CPU
// (mod their number) when `bound`; `algo` is its BRAID_ALGO.
Result<Tuner> hostTuner(const Calibration& calibration, const Config& config, int nranks,
                        bool bound, const std::string& algo, bool describe, uint64_t llcBytes) {
  ASSIGN_OR_RETURN(std::shared_ptr<const Topology> topology, processTopology(TopologyOptions{}));
  ModelConstants constants;
  constants.calibration = calibration;
  constants.host = hostShapeOf(*topology);
  if (llcBytes > 0) {  // both the topology's figure and the measured one
    constants.host.llcBytes = llcBytes;
    constants.calibration.cacheMiB = double(llcBytes) / double(1 << 20);
  }
  std::vector<RankPlacement> placements(static_cast<size_t>(nranks));
  // braid-perf --bind core puts local rank p on the p-th of the CPUs it may use.
  const std::vector<int> cpus = topology->processBinding().pus.toVector();
  for (int r = 0; r < nranks; ++r) {
    RankPlacement& p = placements[static_cast<size_t>(r)];
    p.hostHash = 1;
    p.locality = bound && !cpus.empty()
                     ? computeLocality(*topology, CpuSet::of({cpus[size_t(r) % cpus.size()]}))
                     : localLocality(*topology);
  }
  std::vector<int> ring = orderRanks(placements);
  bool identity = true;
  for (int r = 0; r < nranks; ++r) identity &= ring[static_cast<size_t>(r)] == r;
  if (identity) ring.clear();
  ASSIGN_OR_RETURN(CostModel model, CostModel::create(constants, placements, std::move(ring),
                                                      config.nslots, config.fifoBytes));
  if (describe) std::printf("# n=%d: %s\n", nranks, model.describe().c_str());
  // The communicator's default channel count (communicator.cc).
  constexpr int kDefaultMaxChannels = 4;
  const int channels = config.nchannels > 0 ? config.nchannels : kDefaultMaxChannels;
  TunerOptions options = TunerOptions::fromConfig(config, nranks, channels);
  options.algo = algo;
  return Tuner::create(options, model, nullptr);
}

Status judge(const Sweep& sweep, const Calibration& calibration, const Config& config, bool verbose,
             bool bindDefault, uint64_t llcBytes) {
  const bool bound = sweep.bound.value_or(bindDefault);
  ASSIGN_OR_RETURN(Tuner tuner,
                   hostTuner(calibration, config, sweep.nranks, bound, "", true, llcBytes));
  // What braid-perf ran for each algorithm: that algorithm forced, chunk and channels tuned.
  std::map<std::string, Tuner> forced;
  for (const auto& [name, us] : sweep.fastest.begin()->second) {
    ASSIGN_OR_RETURN(Tuner t,
                     hostTuner(calibration, config, sweep.nranks, bound, name, false, llcBytes));
    forced.emplace(name, std::move(t));
  }
  double logSum = 0;
  double worst = 0;
  uint64_t worstSize = 0;
  int sizes = 0;
  int right = 0;
  for (const auto& [size, times] : sweep.fastest) {
    std::string bestName;
    double bestUs = 0;
    for (const auto& [name, us] : times) {
      if (bestName.empty() || us < bestUs) bestName = name, bestUs = us;
    }
    const uint64_t bytes = sweep.callBytes.at(size);
    const Choice choice = tuner.chooseUnforced(sweep.coll, bytes);
    const std::string chosen(algorithmName(choice.algo));
    const auto it = times.find(chosen);
    if (it == times.end()) {
      return invalidArgument("the model chose " + chosen + ", which was not measured");
    }
    const double regret = it->second / bestUs - 1;
    logSum += std::log1p(regret);
    if (regret > worst) worst = regret, worstSize = size;
    right += regret == 0;
    ++sizes;
    std::printf("n=%d %10llu B  chose %-6s (%s %u x%d) regret %6.1f%%  fastest %-6s %10.2f us\n",
                sweep.nranks, static_cast<unsigned long long>(size), chosen.c_str(),
                choiceSourceName(choice.source), choice.chunkBytes, choice.nchannels, 100 * regret,
                bestName.c_str(), bestUs);
    if (!verbose) continue;
    for (const auto& [name, us] : times) {
      const std::optional<Algorithm> algo = findAlgorithm(name);
      double predicted = -1;
      if (algo) {
        predicted = tuner.predictedUs(sweep.coll, *algo, bytes).value_or(-1.0);
      }
      const Choice ran = forced.at(name).choose(sweep.coll, bytes);
      std::printf("      %-6s %6u x%d measured %10.2f us  model %10.2f us  (model/measured %.2f)\n",
                  name.c_str(), ran.chunkBytes, ran.nchannels, us, predicted,
                  predicted > 0 ? predicted / us : 0.0);
    }
  }
  std::printf(
      "%s n=%d model regret over %d sizes: geometric mean %.1f%%, max %.1f%% (%llu B); "
      "fastest chosen at %d\n",
      std::string(collectiveName(sweep.coll)).c_str(), sweep.nranks, sizes,
      100 * std::expm1(logSum / sizes), 100 * worst, static_cast<unsigned long long>(worstSize),
      right);
  return okStatus();
}

int run(int argc, char** argv) {
  std::string calibrationFile;
  bool verbose = false;
  uint64_t llcBytes = 0;  // 0: the topology's
  bool bindDefault = true;
  std::vector<std::string> sweeps;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--calibration") == 0 && i + 1 < argc) {
      calibrationFile = argv[++i];
    } else if (std::strcmp(argv[i], "--verbose") == 0) {
      verbose = true;
    } else if (std::strcmp(argv[i], "--llc") == 0 && i + 1 < argc) {
      llcBytes = std::strtoull(argv[++i], nullptr, 0);
    } else if (std::strcmp(argv[i], "--bind") == 0 && i + 1 < argc) {
      bindDefault = std::strcmp(argv[++i], "none") != 0;
    } else {
      sweeps.push_back(argv[i]);
    }
  }
  if (calibrationFile.empty() || sweeps.empty()) {
    std::fprintf(stderr,
                 "usage: %s --calibration FILE [--verbose] [--llc BYTES] [--bind core|none] "
                 "SWEEP.json...\n",
                 argv[0]);
    return 2;
  }
  Result<Calibration> calibration = loadCalibration(calibrationFile);
  Result<Config> config = Config::load();
  if (!calibration.ok() || !config.ok()) {
    std::fprintf(stderr, "%s\n",
                 (calibration.ok() ? config.status() : calibration.status()).message().c_str());
    return 1;
  }
  for (const std::string& path : sweeps) {
    Result<Sweep> sweep = loadSweep(path);
    Status status = sweep.ok() ? judge(sweep.value(), calibration.value(), config.value(), verbose,
                                       bindDefault, llcBytes)
                               : sweep.status();
    if (!status.ok()) {
      std::fprintf(stderr, "%s\n", status.message().c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace braid

int main(int argc, char** argv) { return braid::run(argc, argv); }
