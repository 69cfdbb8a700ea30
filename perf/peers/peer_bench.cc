#include "perf/peers/peer_bench.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "perf/perf_report.h"
#include "perf/perf_types.h"

namespace braid::perf::peers {
namespace {

using Clock = std::chrono::steady_clock;

/// Page-aligned, pre-touched host memory (first-touch faults stay out of the timings).
class HostBuffer {
 public:
  HostBuffer() = default;
  static Expected<HostBuffer> allocate(size_t bytes) {
    constexpr size_t kAlign = 4096;
    const size_t rounded = std::max<size_t>((bytes + kAlign - 1) / kAlign * kAlign, kAlign);
    void* p = std::aligned_alloc(kAlign, rounded);
    if (p == nullptr) return failure("cannot allocate " + std::to_string(bytes) + " bytes");
    std::memset(p, 0, rounded);
    return HostBuffer(static_cast<unsigned char*>(p));
  }
  unsigned char* data() const { return data_.get(); }

 private:
  struct Free {
    void operator()(unsigned char* p) const { std::free(p); }
  };
  explicit HostBuffer(unsigned char* p) : data_(p) {}
  std::unique_ptr<unsigned char, Free> data_;
};

struct RankRecord {
  int32_t pid;
  char host[60];
};
static_assert(sizeof(RankRecord) == 64);

/// Where one placement's operands lie.
struct Operands {
  unsigned char* send = nullptr;
  unsigned char* recv = nullptr;
  unsigned char* outputEnd = nullptr;  ///< the guard after the output starts here
};

struct Sample {
  double seconds = 0;
  std::optional<uint64_t> wrong;
};

void emit(const std::string& text) {
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

class PeerSweep {
 public:
  PeerSweep(PeerComm& comm, const PerfOptions& options, std::string_view program)
      : comm_(comm),
        opt_(options),
        program_(program),
        rank_(comm.rank()),
        n_(comm.size()),
        json_(options, comm.size(), comm.size()) {}

  Expected<int> run() {
    if (collectiveHasRoot(opt_.collective) && opt_.root >= n_) {
      return failure("-r " + std::to_string(opt_.root) + " is not a rank of " + std::to_string(n_));
    }
    PERF_TRY(printPreamble());
    const uint64_t bytes = opt_.maxBytes + 2 * kGuardBytes;
    PERF_ASSIGN(sendBuf_, HostBuffer::allocate(bytes));
    PERF_ASSIGN(recvBuf_, HostBuffer::allocate(bytes));
    for (int cycle = 0; opt_.cycles == 0 || cycle < opt_.cycles; ++cycle) {
      PERF_TRY(sweepAll());
    }
    if (rank_ == 0) {
      emit(formatSummary(totalWrong_, average_.value()));
      if (!opt_.jsonFile.empty()) PERF_TRY(writeJson());
    }
    return totalWrong_ == 0 ? 0 : 1;
  }

 private:
  Outcome printPreamble() {
    RankRecord mine{};
    mine.pid = static_cast<int32_t>(getpid());
    gethostname(mine.host, sizeof(mine.host) - 1);
    std::vector<RankRecord> all(static_cast<size_t>(n_));
    PERF_TRY(comm_.allGather(&mine, all.data(), sizeof(RankRecord)));
    if (rank_ != 0) return Outcome();
    std::vector<RankInfo> ranks;
    for (int r = 0; r < n_; ++r) {
      all[r].host[sizeof(all[r].host) - 1] = '\0';
      ranks.push_back({r, all[r].pid, all[r].host});
    }
    emit("# " + std::string(program_) + ": " + comm_.description() + "\n" + formatHeader(opt_) +
         formatRanks(ranks) + formatColumnHeader());
    return Outcome();
  }

  Outcome sweepAll() {
    const bool reduces = collectiveReduces(opt_.collective);
    const std::vector<braidRedOp_t> ops = reduces ? opt_.ops : std::vector<braidRedOp_t>{braidSum};
    std::vector<int> roots = {-1};
    if (collectiveHasRoot(opt_.collective)) {
      roots.clear();
      for (int r = 0; r < n_; ++r) {
        if (opt_.root == -1 || opt_.root == r) roots.push_back(r);
      }
    }
    for (braidDataType_t type : opt_.dataTypes) {
      for (braidRedOp_t op : ops) {
        for (int root : roots) {
          for (uint64_t bytes : sweepSizes(opt_)) {
            PERF_TRY(measureSize(type, op, root, bytes));
          }
        }
      }
    }
    return Outcome();
  }

  Outcome measureSize(braidDataType_t type, braidRedOp_t op, int root, uint64_t bytes) {
    CheckSpec check;
    check.coll = opt_.collective;
    check.type = type;
    check.op = op;
    check.nranks = n_;
    check.rank = rank_;
    check.root = root < 0 ? 0 : root;
    check.shape = collShape(opt_.collective, bytes, elementSize(type), n_);
    const std::string_view opText = collectiveReduces(opt_.collective) ? opName(op) : "none";
    std::string row = formatRowPrefix(check.shape.reportBytes(), check.shape.paramCount,
                                      typeName(type), opText, root);
    for (bool inPlace : {false, true}) {
      PERF_ASSIGN(Sample sample, measure(check, inPlace));
      const Bandwidth bw = bandwidth(opt_.collective, check.shape, n_, sample.seconds);
      average_.add(bw.busBw);
      if (sample.wrong) totalWrong_ += *sample.wrong;
      row += formatPlacement(sample.seconds * 1e6, bw, sample.wrong);
      if (rank_ == 0 && !opt_.jsonFile.empty()) {
        json_.add({std::string(perfCollectiveName(opt_.collective)),
                   opt_.algo.empty() ? "auto" : opt_.algo, std::string(typeName(type)),
                   std::string(opText), root, check.shape.reportBytes(), check.shape.paramCount, n_,
                   sample.seconds * 1e6, bw.algBw, bw.busBw, sample.wrong, inPlace});
      }
    }
    if (rank_ == 0) emit(row + "\n");
    return Outcome();
  }

  Operands operands(const CheckSpec& check, bool inPlace) const {
    const CollShape& s = check.shape;
    Operands o;
    if (!inPlace) {
      o.send = sendBuf_.data() + kGuardBytes;
      o.recv = recvBuf_.data() + kGuardBytes;
      o.outputEnd = o.recv + s.recvBytes();
      return o;
    }
    unsigned char* base = recvBuf_.data() + kGuardBytes;
    o.send = base + static_cast<uint64_t>(rank_) * s.sendInPlaceOffset * s.typeSize;
    o.recv = base + comm_.inPlaceRecvOffset(check) * s.typeSize;
    o.outputEnd = base + s.inPlaceBytes();
    return o;
  }

  /// Every rank's value of a per-rank time, combined as -a asks.
  Expected<double> combineTime(double seconds) {
    std::vector<double> all(static_cast<size_t>(n_));
    PERF_TRY(comm_.allGather(&seconds, all.data(), sizeof(double)));
    double sum = 0;
    double lo = all.front();
    double hi = all.front();
    for (double v : all) {
      sum += v;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    switch (opt_.average) {
      case AverageMode::kRank0: return all.front();
      case AverageMode::kAverage: return sum / n_;
      case AverageMode::kMin: return lo;
      case AverageMode::kMax: return hi;
    }
    return sum / n_;
  }

  Expected<uint64_t> sumOverRanks(uint64_t value) {
    std::vector<uint64_t> all(static_cast<size_t>(n_));
    PERF_TRY(comm_.allGather(&value, all.data(), sizeof(uint64_t)));
    uint64_t sum = 0;
    for (uint64_t v : all) sum += v;
    return sum;
  }

  Expected<Sample> measure(const CheckSpec& c, bool inPlace) {
    const Operands o = operands(c, inPlace);
    fillInput(c, o.send);
    PERF_ASSIGN(PeerRunner runner, comm_.prepare({c, o.send, o.recv, inPlace}));
    for (int w = 0; w < opt_.warmupIters; ++w) PERF_TRY(runner());
    PERF_TRY(comm_.barrier());
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < opt_.iters; ++i) {
      for (int a = 0; a < opt_.aggIters; ++a) PERF_TRY(runner());
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    Sample sample;
    PERF_ASSIGN(sample.seconds,
                combineTime(elapsed / (static_cast<double>(opt_.iters) * opt_.aggIters)));
    if (opt_.check > 0) {
      uint64_t wrong = 0;
      for (int round = 0; round < opt_.check; ++round) {
        PERF_ASSIGN(uint64_t w, verifyOnce(runner, c, o, inPlace));
        wrong += w;
      }
      PERF_ASSIGN(sample.wrong, sumOverRanks(wrong));
    }
    return sample;
  }

  /// Refills, runs once, and counts this rank's wrong elements, changed inputs and guard bytes.
  Expected<uint64_t> verifyOnce(const PeerRunner& runner, const CheckSpec& c, const Operands& o,
                                bool inPlace) {
    // Poison first: in place, the input filled next overlays part of the output.
    std::memset(o.recv, kPoisonByte, c.shape.recvBytes());
    fillInput(c, o.send);
    unsigned char* guardBefore = recvBuf_.data();
    writeGuard(guardBefore);
    writeGuard(o.outputEnd);
    PERF_TRY(runner());
    const Mismatches out = checkOutput(c, o.recv);
    const Mismatches in = inPlace ? Mismatches{} : checkInputIntact(c, o.send);
    const uint64_t guard = countGuardDamage(guardBefore) + countGuardDamage(o.outputEnd);
    if (out.count > 0 || in.count > 0 || guard > 0) {
      std::fprintf(
          stderr,
          "%.*s: rank %d: %s %llu B %s: %llu wrong output element(s) (first at %llu: "
          "expected %s, got %s), %llu input element(s) overwritten, %llu guard byte(s) "
          "written\n",
          static_cast<int>(program_.size()), program_.data(), rank_,
          std::string(perfCollectiveName(c.coll)).c_str(),
          static_cast<unsigned long long>(c.shape.reportBytes()),
          inPlace ? "in-place" : "out-of-place", static_cast<unsigned long long>(out.count),
          static_cast<unsigned long long>(out.firstIndex), out.expected.c_str(), out.actual.c_str(),
          static_cast<unsigned long long>(in.count), static_cast<unsigned long long>(guard));
    }
    return out.count + in.count + guard;
  }

  Outcome writeJson() const {
    // The document is braid-perf's; only the tool differs.
    std::string text = json_.document();
    const std::string from = "\"tool\": \"braid-perf\"";
    const size_t at = text.find(from);
    if (at != std::string::npos) {
      text.replace(at, from.size(), "\"tool\": " + jsonString(program_));
    }
    std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(opt_.jsonFile.c_str(), "w"),
                                               &std::fclose);
    if (!file || std::fwrite(text.data(), 1, text.size(), file.get()) != text.size()) {
      return failure("cannot write " + opt_.jsonFile);
    }
    return Outcome();
  }

  PeerComm& comm_;
  const PerfOptions& opt_;
  const std::string_view program_;
  const int rank_;
  const int n_;
  HostBuffer sendBuf_;
  HostBuffer recvBuf_;
  BusBwAverage average_;
  uint64_t totalWrong_ = 0;
  JsonReport json_;
};

}  // namespace

uint64_t PeerComm::inPlaceRecvOffset(const CheckSpec& spec) const {
  return static_cast<uint64_t>(rank()) * spec.shape.recvInPlaceOffset;
}

Outcome checkCommonOptions(const PerfOptions& options) {
  if (options.threads != 1) return failure("-t: peer programs run one rank per process");
  if (options.collective == PerfCollective::kSendRecv) {
    return failure("sendrecv is not measured by the peer programs");
  }
  return Outcome();
}

Expected<int> runPeerSweep(PeerComm& comm, const PerfOptions& options, std::string_view program) {
  return PeerSweep(comm, options, program).run();
}

bool parsePeerArgs(int argc, char** argv, std::string_view extraUsage, PerfOptions* options,
                   int* exitStatus) {
  const std::string program = argc > 0 ? argv[0] : "peer-perf";
  const std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  Expected<PerfOptions> parsed = parsePerfOptions(args);
  Outcome status = parsed.ok() ? checkCommonOptions(parsed.value()) : parsed.outcome();
  if (!status.ok()) {
    std::fprintf(stderr, "%s: %s\nRun '%s --help' for usage.\n", program.c_str(),
                 status.message().c_str(), program.c_str());
    *exitStatus = 2;
    return false;
  }
  *options = std::move(parsed).value();
  if (options->help || options->helpEnv) {
    std::fputs(perfUsage(program).c_str(), stdout);
    std::fputs(std::string(extraUsage).c_str(), stdout);
    *exitStatus = 0;
    return false;
  }
  return true;
}

}  // namespace braid::perf::peers
