#include "perf/perf_options.h"

#include <array>
#include <functional>
#include <limits>

#include "perf/perf_numbers.h"
#include "perf/perf_types.h"

namespace braid::perf {
namespace {

struct CollectiveName {
  PerfCollective coll;
  std::string_view name;
  std::string_view ncclTestsName;  ///< nccl-tests' spelling, also its program name before "_perf"
};

constexpr std::array<CollectiveName, 7> kCollectives = {{
    {PerfCollective::kAllReduce, "allreduce", "all_reduce"},
    {PerfCollective::kBroadcast, "broadcast", "broadcast"},
    {PerfCollective::kReduce, "reduce", "reduce"},
    {PerfCollective::kAllGather, "allgather", "all_gather"},
    {PerfCollective::kReduceScatter, "reducescatter", "reduce_scatter"},
    {PerfCollective::kAllToAll, "alltoall", "alltoall"},
    {PerfCollective::kSendRecv, "sendrecv", "sendrecv"},
}};

using Apply = std::function<Outcome(PerfOptions&, std::string_view)>;

struct OptionSpec {
  char shortName;             ///< 0: long form only
  std::string_view longName;  ///< without the leading "--"
  bool takesValue;
  Apply apply;
};

Apply intOption(int PerfOptions::*field, int lo, int hi) {
  return [=](PerfOptions& o, std::string_view v) -> Outcome {
    PERF_ASSIGN(int64_t n, parseIntegerValue(v, lo, hi));
    o.*field = static_cast<int>(n);
    return Outcome();
  };
}

Apply boolOption(bool PerfOptions::*field) {
  return [=](PerfOptions& o, std::string_view v) -> Outcome {
    PERF_ASSIGN(int64_t n, parseIntegerValue(v, 0, 1));
    o.*field = n != 0;
    return Outcome();
  };
}

Apply sizeOption(uint64_t PerfOptions::*field) {
  return [=](PerfOptions& o, std::string_view v) -> Outcome {
    PERF_ASSIGN(o.*field, parseSizeValue(v));
    return Outcome();
  };
}

/// Options nccl-tests has that mean nothing for host buffers: accepted so that command lines
/// carry over, with the value that is meaningful here enforced.
Apply acceptedOption(int64_t lo, int64_t hi) {
  return [=](PerfOptions&, std::string_view v) -> Outcome {
    PERF_ASSIGN(int64_t n, parseIntegerValue(v, lo, hi));
    (void)n;
    return Outcome();
  };
}

Outcome applyDataTypes(PerfOptions& o, std::string_view v) {
  o.dataTypes.clear();
  if (v == "all") {
    o.dataTypes = allDataTypes();
    return Outcome();
  }
  std::optional<braidDataType_t> type = parseTypeName(v);
  if (!type) return failure("unknown datatype '" + std::string(v) + "'");
  o.dataTypes.push_back(*type);
  return Outcome();
}

Outcome applyOps(PerfOptions& o, std::string_view v) {
  o.ops.clear();
  if (v == "all") {
    o.ops = allRedOps();
    return Outcome();
  }
  std::optional<braidRedOp_t> op = parseOpName(v);
  if (!op) return failure("unknown reduction op '" + std::string(v) + "'");
  o.ops.push_back(*op);
  return Outcome();
}

const std::vector<OptionSpec>& optionTable() {
  static const std::vector<OptionSpec> kTable = {
      {'t', "nthreads", true, intOption(&PerfOptions::threads, 1, 1024)},
      {'g', "ngpus", true,
       [](PerfOptions&, std::string_view v) -> Outcome {
         PERF_ASSIGN(int64_t n, parseIntegerValue(v, 1, 1024));
         if (n != 1) {
           return failure("each rank here is a host thread: use --np and -t for more ranks");
         }
         return Outcome();
       }},
      {'b', "minbytes", true, sizeOption(&PerfOptions::minBytes)},
      {'e', "maxbytes", true, sizeOption(&PerfOptions::maxBytes)},
      {'i', "stepbytes", true, sizeOption(&PerfOptions::stepBytes)},
      {'f', "stepfactor", true,
       [](PerfOptions& o, std::string_view v) -> Outcome {
         PERF_ASSIGN(int64_t n, parseIntegerValue(v, 1, 1 << 20));
         o.stepFactor = static_cast<uint64_t>(n);
         return Outcome();
       }},
      {'n', "iters", true, intOption(&PerfOptions::iters, 1, 1 << 30)},
      {'m', "agg_iters", true, intOption(&PerfOptions::aggIters, 1, 1 << 20)},
      {'w', "warmup_iters", true, intOption(&PerfOptions::warmupIters, 0, 1 << 30)},
      {'N', "run_cycles", true, intOption(&PerfOptions::cycles, 0, 1 << 30)},
      {'p', "parallel_init", true, boolOption(&PerfOptions::parallelInit)},
      {'c', "check", true, intOption(&PerfOptions::check, 0, 1 << 20)},
      {'o', "op", true, applyOps},
      {'d', "datatype", true, applyDataTypes},
      {'r', "root", true, intOption(&PerfOptions::root, -1, std::numeric_limits<int>::max())},
      {'z', "blocking", true, boolOption(&PerfOptions::blocking)},
      {'y', "stream_null", true, acceptedOption(0, 1)},
      {'T', "timeout", true,
       [](PerfOptions& o, std::string_view v) -> Outcome {
         PERF_ASSIGN(o.timeoutSeconds, parseSecondsValue(v));
         return Outcome();
       }},
      {'G', "cudagraph", true,
       [](PerfOptions& o, std::string_view v) -> Outcome {
         // nccl-tests' count of graph launches: any positive count means graphs here.
         PERF_ASSIGN(int64_t n, parseIntegerValue(v, 0, 1 << 20));
         if (n > 0) o.deviceTiming = DeviceTiming::kGraph;
         return Outcome();
       }},
      {0, "graph", false,
       [](PerfOptions& o, std::string_view) -> Outcome {
         o.deviceTiming = DeviceTiming::kGraph;
         return Outcome();
       }},
      {0, "sync-each-call", false,
       [](PerfOptions& o, std::string_view) -> Outcome {
         o.deviceTiming = DeviceTiming::kEachCall;
         return Outcome();
       }},
      {'C', "report_cputime", true, acceptedOption(0, 1)},
      {'R', "local_register", true,
       [](PerfOptions& o, std::string_view v) -> Outcome {
         // nccl-tests' 1 (local) and 2 (user buffer) registration both mean shared buffers here.
         PERF_ASSIGN(int64_t n, parseIntegerValue(v, 0, 2));
         o.sharedBuffers = n != 0;
         return Outcome();
       }},
      {'a', "average", true,
       [](PerfOptions& o, std::string_view v) -> Outcome {
         PERF_ASSIGN(int64_t n, parseIntegerValue(v, 0, 3));
         o.average = static_cast<AverageMode>(n);
         return Outcome();
       }},
      {0, "np", true, intOption(&PerfOptions::nprocs, 1, 4096)},
      {0, "algo", true,
       [](PerfOptions& o, std::string_view v) -> Outcome {
         if (v.empty()) return failure("empty algorithm name");
         o.algo = std::string(v);
         return Outcome();
       }},
      {0, "json", true,
       [](PerfOptions& o, std::string_view v) -> Outcome {
         if (v.empty()) return failure("empty file name");
         o.jsonFile = std::string(v);
         return Outcome();
       }},
      {0, "tune", true,
       [](PerfOptions& o, std::string_view v) -> Outcome {
         if (v.empty()) return failure("empty file name");
         o.tuneFile = std::string(v);
         return Outcome();
       }},
      {0, "bind", true,
       [](PerfOptions& o, std::string_view v) -> Outcome {
         if (v == "auto") {
           o.bind = BindPolicy::kAuto;
         } else if (v == "none") {
           o.bind = BindPolicy::kNone;
         } else if (v == "core") {
           o.bind = BindPolicy::kCore;
         } else {
           return failure("--bind: '" + std::string(v) + "' is not auto, none or core");
         }
         return Outcome();
       }},
      {0, "device", false,
       [](PerfOptions& o, std::string_view) -> Outcome {
         o.device = true;
         return Outcome();
       }},
      {'h', "help", false,
       [](PerfOptions& o, std::string_view) -> Outcome {
         o.help = true;
         return Outcome();
       }},
      {0, "help-env", false,
       [](PerfOptions& o, std::string_view) -> Outcome {
         o.helpEnv = true;
         return Outcome();
       }},
  };
  return kTable;
}

const OptionSpec* findShort(char c) {
  for (const OptionSpec& spec : optionTable()) {
    if (spec.shortName == c) return &spec;
  }
  return nullptr;
}

const OptionSpec* findLong(std::string_view name) {
  for (const OptionSpec& spec : optionTable()) {
    if (spec.longName == name) return &spec;
  }
  return nullptr;
}

std::string spelling(const OptionSpec& spec) {
  return spec.shortName != 0 ? std::string("-") + spec.shortName
                             : "--" + std::string(spec.longName);
}

Outcome validate(const PerfOptions& o) {
  if (o.minBytes > o.maxBytes) {
    return failure("-b (" + std::to_string(o.minBytes) + ") is above -e (" +
                   std::to_string(o.maxBytes) + ")");
  }
  if (o.stepFactor <= 1 && o.stepBytes == 0 && o.minBytes < o.maxBytes) {
    return failure("-i 0 with -f 1 never reaches -e: give -f > 1 or -i > 0");
  }
  if (!o.tuneFile.empty()) {
    if (!o.algo.empty()) return failure("--tune measures every algorithm: drop --algo");
    if (o.collective == PerfCollective::kSendRecv) {
      return failure("--tune: sendrecv has nothing to tune");
    }
  }
  return Outcome();
}

}  // namespace

std::string_view libraryCollectiveName(PerfCollective coll) {
  return coll == PerfCollective::kSendRecv ? "send" : perfCollectiveName(coll);
}

std::string_view perfCollectiveName(PerfCollective coll) {
  for (const CollectiveName& c : kCollectives) {
    if (c.coll == coll) return c.name;
  }
  return "invalid";
}

std::optional<PerfCollective> parsePerfCollective(std::string_view name) {
  for (const CollectiveName& c : kCollectives) {
    if (name == c.name || name == c.ncclTestsName) return c.coll;
  }
  if (name == "all_to_all") return PerfCollective::kAllToAll;
  if (name == "send_recv") return PerfCollective::kSendRecv;
  return std::nullopt;
}

std::optional<PerfCollective> collectiveFromProgramName(std::string_view argv0) {
  const size_t slash = argv0.rfind('/');
  std::string_view base = slash == std::string_view::npos ? argv0 : argv0.substr(slash + 1);
  constexpr std::string_view kSuffix = "_perf";
  if (base.size() <= kSuffix.size() || !base.ends_with(kSuffix)) return std::nullopt;
  return parsePerfCollective(base.substr(0, base.size() - kSuffix.size()));
}

bool collectiveReduces(PerfCollective coll) {
  return coll == PerfCollective::kAllReduce || coll == PerfCollective::kReduce ||
         coll == PerfCollective::kReduceScatter;
}

bool collectiveHasRoot(PerfCollective coll) {
  return coll == PerfCollective::kBroadcast || coll == PerfCollective::kReduce;
}

bool bindsCores(const PerfOptions& options) {
  // Unbound, 4 ranks on 2 cores ran an 8 B all-reduce at 10 us or at 18 us from one run to the
  // next, as the scheduler placed them; bound, at 7.5 us every run. A GPU rank belongs near its
  // GPU, and threads of one process would share its one CPU: those stay unbound.
  if (options.bind == BindPolicy::kAuto) return !options.device && options.threads == 1;
  return options.bind == BindPolicy::kCore;
}

Expected<PerfOptions> parsePerfOptions(const std::vector<std::string>& args,
                                       PerfCollective defaultCollective) {
  PerfOptions options;
  options.collective = defaultCollective;
  bool sawCollective = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const OptionSpec* spec = nullptr;
    std::optional<std::string> inlineValue;
    if (arg.size() > 2 && arg.starts_with("--")) {
      const size_t eq = arg.find('=');
      spec = findLong(std::string_view(arg).substr(2, eq == std::string::npos ? eq : eq - 2));
      if (eq != std::string::npos) inlineValue = arg.substr(eq + 1);
    } else if (arg.size() >= 2 && arg[0] == '-' && arg[1] != '-') {
      spec = findShort(arg[1]);
      if (arg.size() > 2) inlineValue = arg.substr(2);
    } else {
      std::optional<PerfCollective> coll = parsePerfCollective(arg);
      if (!coll) return failure("unknown collective '" + arg + "' (see --help)");
      if (sawCollective) return failure("more than one collective named: '" + arg + "'");
      options.collective = *coll;
      sawCollective = true;
      continue;
    }
    if (spec == nullptr) return failure("unknown option '" + arg + "' (see --help)");
    std::string value;
    if (spec->takesValue) {
      if (inlineValue) {
        value = *inlineValue;
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return failure(spelling(*spec) + " needs a value");
      }
    } else if (inlineValue) {
      return failure(spelling(*spec) + " takes no value");
    }
    Outcome status = spec->apply(options, value);
    if (!status.ok()) return status.withContext(spelling(*spec));
  }
  PERF_TRY(validate(options));
  return options;
}

std::vector<uint64_t> sweepSizes(const PerfOptions& o) {
  std::vector<uint64_t> sizes;
  uint64_t size = o.minBytes;
  while (size <= o.maxBytes) {
    sizes.push_back(size);
    uint64_t next = 0;
    if (o.stepFactor > 1) {
      // A zero start would never grow: continue from one byte.
      if (size == 0) {
        next = 1;
      } else if (size > std::numeric_limits<uint64_t>::max() / o.stepFactor) {
        break;
      } else {
        next = size * o.stepFactor;
      }
    } else {
      if (o.stepBytes == 0 || size > std::numeric_limits<uint64_t>::max() - o.stepBytes) break;
      next = size + o.stepBytes;
    }
    size = next;
  }
  return sizes;
}

const char* deviceTimingName(DeviceTiming timing) {
  switch (timing) {
    case DeviceTiming::kStream: return "stream";
    case DeviceTiming::kGraph: return "graph";
    case DeviceTiming::kEachCall: return "each call";
  }
  return "?";
}

std::string perfUsage(std::string_view program) {
  std::string p(program);
  return "USAGE: " + p +
         " [allreduce|broadcast|reduce|allgather|reducescatter|alltoall|sendrecv] [options]\n"
         "\n"
         "Sweeps message sizes of one collective over host-memory ranks and prints time, algbw "
         "and\n"
         "busbw per size, out-of-place and in-place, as nccl-tests does.\n"
         "\n"
         "  -b,--minbytes <size>          smallest message (K/M/G suffixes; default 32M)\n"
         "  -e,--maxbytes <size>          largest message (default 32M)\n"
         "  -i,--stepbytes <size>         increment between sizes when -f is 1 (default 1M)\n"
         "  -f,--stepfactor <n>           multiply the size by n at each step (default 1)\n"
         "  -n,--iters <n>                timed iterations per size (default 20)\n"
         "  -w,--warmup_iters <n>         untimed iterations before each measurement (default 5)\n"
         "  -m,--agg_iters <n>            operations issued in one group per iteration (default "
         "1)\n"
         "  -c,--check <n>                verified runs per size, 0 to skip checking (default 1)\n"
         "  -N,--run_cycles <n>           repeat the sweep n times, 0 forever (default 1)\n"
         "  -d,--datatype <type|all>      int8 uint8 int32 uint32 int64 uint64 half float double\n"
         "                                bfloat16 (default float)\n"
         "  -o,--op <op|all>              sum prod max min avg (default sum)\n"
         "  -r,--root <rank|-1>           root of broadcast/reduce, -1 for every root (default 0)\n"
         "  -t,--nthreads <n>             ranks per process, one thread each (default 1)\n"
         "  -a,--average <0|1|2|3>        reported time: 0 rank 0, 1 average, 2 min, 3 max\n"
         "                                over ranks (default 1)\n"
         "  -T,--timeout <seconds>        BRAID_TIMEOUT for the communicators\n"
         "  -z,--blocking <0|1>           accepted; host calls always complete before returning\n"
         "  -p,--parallel_init <0|1>      accepted; ranks always initialise concurrently\n"
         "  -g -C -y                      accepted for nccl-tests command lines (no effect)\n"
         "  --np <n>                      spawn n local rank processes (default: the launcher's\n"
         "                                world when BRAID_RANK, RANK, OMPI_COMM_WORLD_RANK,\n"
         "                                PMI_RANK or SLURM_PROCID is set, else 4)\n"
         "  --bind <auto|none|core>       core: local rank process p runs on the p-th CPU it may\n"
         "                                use (modulo their number), as mpirun --bind-to core;\n"
         "                                none: the scheduler places them; auto (default): core\n"
         "                                with host buffers and one rank per process, else none\n"
         "  --algo <name|all>             force an algorithm (BRAID_ALGO=name); all: one busbw\n"
         "                                column per algorithm serving the collective, then the\n"
         "                                algorithm the tuner chooses (BRAID_ALGO aside) and its\n"
         "                                regret, time(choice) / time(fastest) - 1, with a\n"
         "                                summary over the fastest of the cycles (-N); each\n"
         "                                measurement runs -n iterations, or more to fill 5 ms\n"
         "  --json <file>                 write every measurement to file as JSON\n"
         "  --tune <file>                 measure every algorithm with each chunk (32K, 128K,\n"
         "                                512K) and channel count (1, 2, 4) per size and write\n"
         "                                the fastest into the tuning table <file> (read by\n"
         "                                BRAID_TUNING_FILE; lines of other rank counts and\n"
         "                                collectives already there are kept); each variant\n"
         "                                keeps its fastest of the cycles (-N), measured as\n"
         "                                with --algo all but for at most 50 ms\n"
         "  -R,--local_register <0/1/2>   1 or 2: host buffers from braidMemAlloc, which ranks on\n"
         "                                this host read from one another in place (one copy\n"
         "                                per byte instead of two; default 0)\n"
         "  --device                      buffers in CUDA device memory of each process's\n"
         "                                current GPU (checked on the host after each run); the\n"
         "                                -n calls are enqueued on a stream and the host waits\n"
         "                                once per timed loop, as nccl-tests does\n"
         "  -G,--cudagraph <n>, --graph   with --device: capture the -n calls into a CUDA graph\n"
         "                                and time its replay (n > 0; nccl-tests' count)\n"
         "  --sync-each-call              with --device: the host waits for every call\n"
         "  --help-env                    list the BRAID_ environment variables\n"
         "  -h,--help                     this text\n"
         "\n"
         "Ranks = processes x threads. Exit status is non-zero when a value is wrong or a call "
         "fails.\n";
}

}  // namespace braid::perf
