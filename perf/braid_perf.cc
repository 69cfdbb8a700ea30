// braid-perf: sweeps message sizes of one collective and prints time, algbw and busbw per size,
// as nccl-tests' all_reduce_perf & co do. Without a launcher it forks --np local rank processes
// (default 4), each running -t ranks as threads; under torchrun, mpirun or srun each launched
// process runs -t ranks of the launcher's world.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/tools_api.h"
#include "perf/perf_bench.h"
#include "perf/perf_launch.h"
#include "perf/perf_options.h"
#include "perf/perf_report.h"

namespace braid::perf {
namespace {

constexpr int kDefaultLocalProcesses = 4;
/// How long the other rank processes get to notice a failed one before they are killed.
constexpr std::chrono::milliseconds kFailureGrace{15000};

/// The BRAID_ALGO value of each communicator the run creates.
Expected<std::vector<std::string>> algorithmColumns(const PerfOptions& options) {
  if (options.algo != "all") return std::vector<std::string>{options.algo};
  std::vector<std::string> names = tools::algorithmsFor(libraryCollectiveName(options.collective));
  if (names.empty()) {
    return failure("no algorithm serves " + std::string(perfCollectiveName(options.collective)));
  }
  return names;
}

/// --tune: one communicator per variant, then one that forces nothing (the tuner as it stands).
Outcome tuneColumns(RunSpec& spec) {
  // The environment's settings (BRAID_CHUNK_BYTES raises the slot size) bound the chunks.
  tools::TuneSpace space;
  if (std::string error = tools::tuneSpace(&space); !error.empty()) return failure(error);
  const std::vector<std::string> algorithms =
      tools::algorithmsFor(libraryCollectiveName(spec.options.collective));
  for (const TuneVariant& v : tuneVariants(algorithms, space.chunkBytes, space.channels,
                                           space.slotBytes, space.maxChannels)) {
    spec.algorithms.push_back(v.algorithm);
    spec.chunkBytes.push_back(v.chunkBytes);
    spec.channels.push_back(v.nchannels);
  }
  if (spec.algorithms.empty()) {
    return failure("--tune: no algorithm serves this collective");
  }
  spec.algorithms.emplace_back();
  spec.chunkBytes.push_back(0);
  spec.channels.push_back(0);
  return Outcome();
}

/// --help-env: the library's BRAID_ variables.
std::string envHelp() {
  std::vector<EnvVariableHelp> variables;
  for (const tools::EnvVariable& v : tools::environmentVariables()) {
    variables.push_back({v.name, v.defaultText, v.doc});
  }
  return formatEnvHelp(variables);
}

Outcome checkRoot(const PerfOptions& options, int nranks) {
  if (collectiveHasRoot(options.collective) && options.root >= nranks) {
    return failure("-r " + std::to_string(options.root) + " is not a rank of " +
                   std::to_string(nranks));
  }
  return Outcome();
}

Expected<int> runLaunched(RunSpec spec) {
  int worldRank = 0;
  int worldSize = 1;
  PERF_ASSIGN(spec.ids, shareUniqueIds(spec.algorithms.size(), &worldRank, &worldSize));
  const int threads = spec.options.threads;
  spec.nprocs = worldSize;
  spec.nranks = worldSize * threads;
  PERF_TRY(checkRoot(spec.options, spec.nranks));
  return runThreads(threads, [&](int t) { return runRank(spec, worldRank * threads + t); });
}

Expected<int> runLocal(RunSpec spec) {
  const int threads = spec.options.threads;
  spec.nprocs = spec.options.nprocs > 0 ? spec.options.nprocs : kDefaultLocalProcesses;
  spec.nranks = spec.nprocs * threads;
  PERF_TRY(checkRoot(spec.options, spec.nranks));
  const size_t nids = spec.algorithms.size();
  auto ranksOfProcess = [&](const RunSpec& mine, int p) {
    return runThreads(threads, [&](int t) { return runRank(mine, p * threads + t); });
  };
  if (spec.nprocs == 1) {
    PERF_ASSIGN(spec.ids, makeUniqueIds(nids));
    return ranksOfProcess(spec, 0);
  }
  // The ids are made after the fork, in the parent, which keeps their listeners alive.
  auto makeIds = [&]() -> Expected<std::string> {
    PERF_ASSIGN(std::vector<braidUniqueId> ids, makeUniqueIds(nids));
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
      if (Outcome bound = bindToCpu(p); !bound.ok()) {
        std::fprintf(stderr, "braid-perf: rank process %d: %s\n", p, bound.message().c_str());
        return 2;
      }
    }
    return ranksOfProcess(mine, p);
  };
  return runProcesses(spec.nprocs, makeIds, child, kFailureGrace);
}

int fail(const Outcome& status) {
  std::fprintf(stderr, "braid-perf: %s\n", status.message().c_str());
  return 2;
}

int perfMain(int argc, char** argv) {
  const std::string program = argc > 0 ? argv[0] : "braid-perf";
  const std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  Expected<PerfOptions> parsed = parsePerfOptions(
      args, collectiveFromProgramName(program).value_or(PerfCollective::kAllReduce));
  if (!parsed.ok()) {
    std::fprintf(stderr, "braid-perf: %s\nRun '%s --help' for usage.\n",
                 parsed.outcome().message().c_str(), program.c_str());
    return 2;
  }
  RunSpec spec;
  spec.options = std::move(parsed).value();
  if (spec.options.help) {
    std::fputs(perfUsage(program).c_str(), stdout);
    return 0;
  }
  if (spec.options.helpEnv) {
    std::fputs(envHelp().c_str(), stdout);
    return 0;
  }
  if (!spec.options.tuneFile.empty()) {
    Outcome variants = tuneColumns(spec);
    if (!variants.ok()) return fail(variants);
  } else {
    Expected<std::vector<std::string>> algorithms = algorithmColumns(spec.options);
    if (!algorithms.ok()) return fail(algorithms.outcome());
    spec.algorithms = std::move(algorithms).value();
    spec.chunkBytes.assign(spec.algorithms.size(), 0);
    spec.channels.assign(spec.algorithms.size(), 0);
  }

  Expected<std::optional<LauncherWorld>> launcher = detectLauncher();
  if (!launcher.ok()) return fail(launcher.outcome());
  // --np asks for local processes even inside a launcher's job.
  const bool launched = spec.options.nprocs == 0 && launcher.value().has_value();
  Expected<int> rc = launched ? runLaunched(std::move(spec)) : runLocal(std::move(spec));
  if (!rc.ok()) return fail(rc.outcome());
  return rc.value();
}

}  // namespace
}  // namespace braid::perf

int main(int argc, char** argv) { return braid::perf::perfMain(argc, argv); }
