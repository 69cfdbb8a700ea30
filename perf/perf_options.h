// braid-perf command line: nccl-tests' flags (-b -e -f -i -n -w -m -c -d -o -r -t -a -z -p ...)
// with their long forms, plus the flags of our own (--np, --algo, --json, --help-env).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "braid.h"
#include "perf/perf_error.h"

namespace braid::perf {

/// The operations braid-perf measures; sendrecv is a ring of braidSend/braidRecv pairs.
enum class PerfCollective {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kSendRecv,
};

/// "allreduce", "broadcast", ... as given on the command line.
std::string_view perfCollectiveName(PerfCollective coll);
/// Accepts the names above and nccl-tests' spellings ("all_reduce", "all_gather", ...).
std::optional<PerfCollective> parsePerfCollective(std::string_view name);
/// The collective an nccl-tests program name implies ("all_reduce_perf" -> allreduce), so that
/// braid-perf can be installed under those names; nullopt for any other name.
std::optional<PerfCollective> collectiveFromProgramName(std::string_view argv0);
/// The library's name of the collective behind a braid-perf one, as BRAID_ALGO and the tools
/// interface spell it (sendrecv: "send").
std::string_view libraryCollectiveName(PerfCollective coll);
/// Whether the collective takes a reduction op, and whether it has a root.
bool collectiveReduces(PerfCollective coll);
bool collectiveHasRoot(PerfCollective coll);

/// How per-rank iteration times combine into the reported time (-a).
enum class AverageMode { kRank0 = 0, kAverage = 1, kMin = 2, kMax = 3 };

/// Where braid-perf's local rank processes run.
enum class BindPolicy {
  kAuto,  ///< kCore for host buffers and one rank per process, else kNone
  kNone,  ///< where the scheduler puts them
  kCore,  ///< local rank process p on the p-th CPU it may use, as mpirun --bind-to core
};

/// How --device calls are timed (host calls always complete before returning).
enum class DeviceTiming {
  kStream,   ///< -n calls enqueued on a stream, one synchronisation per timed loop (nccl-tests)
  kGraph,    ///< -G/--graph: the -n calls captured into a CUDA graph, replayed
  kEachCall  ///< --sync-each-call: the host waits for every call (a NULL-stream call)
};

/// "stream", "graph" or "each call", as the table's header says.
const char* deviceTimingName(DeviceTiming timing);

struct PerfOptions {
  PerfCollective collective = PerfCollective::kAllReduce;
  uint64_t minBytes = 32ull << 20;
  uint64_t maxBytes = 32ull << 20;
  uint64_t stepBytes = 1ull << 20;  ///< used when stepFactor is 1
  uint64_t stepFactor = 1;
  int iters = 20;
  int warmupIters = 5;
  int aggIters = 1;  ///< operations per timed iteration, issued inside one group
  int check = 1;     ///< verified runs per size and placement (0: no checking)
  int cycles = 1;    ///< times the whole sweep runs (0: forever)
  std::vector<braidDataType_t> dataTypes = {braidFloat32};
  std::vector<braidRedOp_t> ops = {braidSum};
  int root = 0;     ///< -1: every root in turn
  int threads = 1;  ///< ranks per process, one thread and communicator each
  int nprocs = 0;   ///< --np; 0: the launcher's world, or 4 without a launcher
  AverageMode average = AverageMode::kAverage;
  bool blocking = false;       ///< -z: accepted; host calls always complete before returning
  bool parallelInit = false;   ///< -p: accepted; ranks always initialise concurrently
  double timeoutSeconds = -1;  ///< -T: passed as BRAID_TIMEOUT when >= 0
  std::string algo;            ///< --algo: "" (the tuner decides), an algorithm name, or "all"
  std::string jsonFile;        ///< --json
  std::string tuneFile;        ///< --tune: measure every algorithm variant, write the table here
  bool device = false;         ///< --device: buffers in CUDA device memory (the current GPU)
  DeviceTiming deviceTiming = DeviceTiming::kStream;  ///< with --device
  bool sharedBuffers = false;                         ///< -R 1: host buffers from braidMemAlloc
  BindPolicy bind = BindPolicy::kAuto;                ///< --bind
  bool help = false;
  bool helpEnv = false;
};

/// Whether the local rank processes are bound to a CPU each (--bind, auto resolved).
bool bindsCores(const PerfOptions& options);

/// Parses the arguments after the program name. `defaultCollective` is what the program name
/// implies; a positional collective name overrides it. Errors name the offending argument.
Expected<PerfOptions> parsePerfOptions(
    const std::vector<std::string>& args,
    PerfCollective defaultCollective = PerfCollective::kAllReduce);

/// The --help text.
std::string perfUsage(std::string_view program);

/// The message sizes of the sweep in bytes: min, then times the factor (or plus the step) while
/// not above max.
std::vector<uint64_t> sweepSizes(const PerfOptions& options);

}  // namespace braid::perf
