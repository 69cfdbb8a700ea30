// braid-perf: sweeps message sizes of one collective and prints time, algbw and busbw per size,
// as nccl-tests' all_reduce_perf & co do. Without a launcher it forks --np local rank processes
// (default 4), each running -t ranks as threads; under torchrun, mpirun or srun each launched
// process runs -t ranks of the launcher's world.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "algorithms/algorithms.h"
#include "base/config.h"
#include "perf/perf_bench.h"
#include "perf/perf_launch.h"
#include "perf/perf_options.h"
#include "perf/perf_report.h"
#include "tuner/tuner.h"

namespace braid::perf {
namespace {

constexpr int kDefaultLocalProcesses = 4;
/// How long the other rank processes get to notice a failed one before they are killed.
constexpr std::chrono::milliseconds kFailureGrace{15000};

/// The BRAID_ALGO value of each communicator the run creates.
Result<std::vector<std::string>> algorithmColumns(const PerfOptions& options) {
  if (options.algo != "all") return std::vector<std::string>{options.algo};
  std::vector<std::string> names;
  for (Algorithm algo : algorithmsFor(libraryCollective(options.collective))) {
    names.emplace_back(algorithmName(algo));
  }
  if (names.empty()) {
    return invalidArgument("no algorithm serves " +
                           std::string(perfCollectiveName(options.collective)));
  }
  return names;
}

/// --tune: one communicator per variant, then one that forces nothing (the tuner as it stands).
Status tuneColumns(RunSpec& spec) {
  // The environment's settings (BRAID_CHUNK_BYTES raises the slot size) bound the chunks.
  ASSIGN_OR_RETURN(Config config, Config::load());
  const int maxChannels =
      config.nchannels > 0 ? config.nchannels : Tuner::kChannelCandidates.back();
  for (const TuneVariant& v :
       tuneVariants(libraryCollective(spec.options.collective), config.slotBytes, maxChannels)) {
    spec.algorithms.emplace_back(algorithmName(v.algo));
    spec.chunkBytes.push_back(v.chunkBytes);
    spec.channels.push_back(v.nchannels);
  }
  if (spec.algorithms.empty()) {
    return invalidArgument("--tune: no algorithm serves this collective");
  }
  spec.algorithms.emplace_back();
  spec.chunkBytes.push_back(0);
  spec.channels.push_back(0);
  return okStatus();
}

Status checkRoot(const PerfOptions& options, int nranks) {
  if (collectiveHasRoot(options.collective) && options.root >= nranks) {
    return invalidArgument("-r " + std::to_string(options.root) + " is not a rank of " +
                           std::to_string(nranks));
  }
  return okStatus();
}

Result<int> runLaunched(RunSpec spec) {
  int worldRank = 0;
  int worldSize = 1;
  ASSIGN_OR_RETURN(spec.ids, shareUniqueIds(spec.algorithms.size(), &worldRank, &worldSize));
  const int threads = spec.options.threads;
  spec.nprocs = worldSize;
  spec.nranks = worldSize * threads;
  RETURN_IF_ERROR(checkRoot(spec.options, spec.nranks));
  return runThreads(threads, [&](int t) { return runRank(spec, worldRank * threads + t); });
}

Result<int> runLocal(RunSpec spec) {
  const int threads = spec.options.threads;
  spec.nprocs = spec.options.nprocs > 0 ? spec.options.nprocs : kDefaultLocalProcesses;
  spec.nranks = spec.nprocs * threads;
  RETURN_IF_ERROR(checkRoot(spec.options, spec.nranks));
  const size_t nids = spec.algorithms.size();
  auto ranksOfProcess = [&](const RunSpec& mine, int p) {
    return runThreads(threads, [&](int t) { return runRank(mine, p * threads + t); });
  };
  if (spec.nprocs == 1) {
    ASSIGN_OR_RETURN(spec.ids, makeUniqueIds(nids));
    return ranksOfProcess(spec, 0);
  }
  // The ids are made after the fork, in the parent, which keeps their listeners alive.
  auto makeIds = [&]() -> Result<std::string> {
    ASSIGN_OR_RETURN(std::vector<braidUniqueId> ids, makeUniqueIds(nids));
    return std::string(reinterpret_cast<const char*>(ids.data()),
                       ids.size() * sizeof(braidUniqueId));
  };
  auto child = [&](int p, const std::string& payload) {
    RunSpec mine = spec;
    if (payload.size() != nids * sizeof(braidUniqueId)) {
      std::fprintf(stderr, "braid-perf: rank process %d: malformed unique ids\n", p);
      return 2;
    }
    mine.ids.resize(nids);
    std::memcpy(mine.ids.data(), payload.data(), payload.size());
    if (bindsCores(spec.options)) {
      if (Status bound = bindToCpu(p); !bound.ok()) {
        std::fprintf(stderr, "braid-perf: rank process %d: %s\n", p, bound.message().c_str());
        return 2;
      }
    }
    return ranksOfProcess(mine, p);
  };
  return runProcesses(spec.nprocs, makeIds, child, kFailureGrace);
}

int fail(const Status& status) {
  std::fprintf(stderr, "braid-perf: %s\n", status.message().c_str());
  return 2;
}

int perfMain(int argc, char** argv) {
  const std::string program = argc > 0 ? argv[0] : "braid-perf";
  const std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  Result<PerfOptions> parsed = parsePerfOptions(
      args, collectiveFromProgramName(program).value_or(PerfCollective::kAllReduce));
  if (!parsed.ok()) {
    std::fprintf(stderr, "braid-perf: %s\nRun '%s --help' for usage.\n",
                 parsed.status().message().c_str(), program.c_str());
    return 2;
  }
  RunSpec spec;
  spec.options = std::move(parsed).value();
  if (spec.options.help) {
    std::fputs(perfUsage(program).c_str(), stdout);
    return 0;
  }
  if (spec.options.helpEnv) {
    std::fputs(formatEnvHelp(configVariables()).c_str(), stdout);
    return 0;
  }
  if (!spec.options.tuneFile.empty()) {
    Status variants = tuneColumns(spec);
    if (!variants.ok()) return fail(variants);
  } else {
    Result<std::vector<std::string>> algorithms = algorithmColumns(spec.options);
    if (!algorithms.ok()) return fail(algorithms.status());
    spec.algorithms = std::move(algorithms).value();
    spec.chunkBytes.assign(spec.algorithms.size(), 0);
    spec.channels.assign(spec.algorithms.size(), 0);
  }

  Result<std::optional<LauncherWorld>> launcher = detectLauncher();
  if (!launcher.ok()) return fail(launcher.status());
  // --np asks for local processes even inside a launcher's job.
  const bool launched = spec.options.nprocs == 0 && launcher.value().has_value();
  Result<int> rc = launched ? runLaunched(std::move(spec)) : runLocal(std::move(spec));
  if (!rc.ok()) return fail(rc.status());
  return rc.value();
}

}  // namespace
}  // namespace braid::perf

int main(int argc, char** argv) { return braid::perf::perfMain(argc, argv); }
