#include "perf/perf_bench.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/tools_api.h"
#include "perf/perf_data.h"
#include "perf/perf_device.h"
#include "perf/perf_report.h"
#include "perf/perf_types.h"

namespace braid::perf {
namespace {

using Clock = std::chrono::steady_clock;

// --tune: what one variant's measurement at one size may take at most (at least two iterations):
// large sizes must not take hours. Short calls are timed as --algo all times them: at -n 40 a
// 128 B call was timed over 7 us, and one hiccup put ring/512K into the table where rd was 1.6x
// faster.
constexpr double kTuneSeconds = 0.05;
// --algo all: what one algorithm's measurement at one size takes at least (more iterations than
// -n where calls are short, at most kAlgoAllMaxIters). At -n 40 an 8 KB call is timed over 25 us,
// and one scheduling hiccup doubled an algorithm's time and the regret with it.
constexpr double kAlgoAllSeconds = 0.005;
constexpr int kAlgoAllMaxIters = 100000;
// --algo all and --tune: the rounds every measured communicator's iterations at one size are
// split into, taken in turn with the others' (each keeps its fastest round). Measured one after
// the other, an algorithm's 5 ms could fall into a slow spell of the host that the others missed:
// on 2 vCPUs, n = 2, regrets of 67-76% at 8 B and 256 B that the next run did not repeat.
constexpr int kRounds = 4;
// The pilot iterations that set those counts: the fastest of kPilotIters, or the first alone
// when it took kPilotLongSeconds or more.
constexpr int kPilotIters = 5;
constexpr double kPilotLongSeconds = 0.001;

/// How measureInTurn() picks its iteration count.
enum class IterationCount {
  kAtLeast,  ///< --algo all: -n, or more until kAlgoAllSeconds
  kBounded,  ///< --tune: as kAtLeast, but no more than fit kTuneSeconds (at least two)
};

/// A failed library call as braid-perf reports it: the call, its result and the library's
/// last error.
Outcome apiOutcome(braidResult_t result, const char* call, braidComm_t comm) {
  if (result == braidSuccess) return Outcome();
  const char* detail = braidGetLastError(comm);
  return failure(std::string(call) + " failed: " + braidGetErrorString(result) +
                 (detail != nullptr && *detail != '\0' ? ": " + std::string(detail) : ""));
}

/// A tools-interface answer: empty on success, else what went wrong.
Outcome toolsOutcome(const std::string& error) {
  return error.empty() ? Outcome() : failure(error);
}

/// Page-aligned, pre-touched host memory (first-touch faults stay out of the timings); with
/// `shared` (-R 1) from braidMemAlloc, which peers on the host read in place.
class HostBuffer {
 public:
  HostBuffer() : data_(nullptr, Free{false}) {}
  static Expected<HostBuffer> allocate(size_t bytes, bool shared) {
    constexpr size_t kAlign = 4096;
    const size_t rounded = std::max((bytes + kAlign - 1) / kAlign * kAlign, kAlign);
    void* p = nullptr;
    if (shared) {
      PERF_TRY(apiOutcome(braidMemAlloc(&p, rounded), "braidMemAlloc", nullptr));
    } else {
      p = std::aligned_alloc(kAlign, rounded);
      if (p == nullptr) return failure("cannot allocate " + std::to_string(bytes) + " bytes");
    }
    std::memset(p, 0, rounded);
    return HostBuffer(static_cast<unsigned char*>(p), shared);
  }
  unsigned char* data() const { return data_.get(); }

 private:
  struct Free {
    bool shared;
    void operator()(unsigned char* p) const {
      if (shared) {
        braidMemFree(p);
      } else {
        std::free(p);
      }
    }
  };
  HostBuffer(unsigned char* p, bool shared) : data_(p, Free{shared}) {}
  std::unique_ptr<unsigned char, Free> data_;
};

/// --device: device memory mirroring a host buffer (results are still checked on the host).
class DeviceMirror {
 public:
  DeviceMirror() = default;
  ~DeviceMirror() { tools::deviceFree(ptr_); }
  DeviceMirror(const DeviceMirror&) = delete;
  DeviceMirror& operator=(const DeviceMirror&) = delete;
  Outcome allocate(size_t bytes) { return toolsOutcome(tools::deviceAllocate(bytes, &ptr_)); }
  unsigned char* data() const { return static_cast<unsigned char*>(ptr_); }

 private:
  void* ptr_ = nullptr;
};

/// A communicator destroyed with its owner.
class CommHandle {
 public:
  CommHandle() = default;
  explicit CommHandle(braidComm_t comm) : comm_(comm) {}
  CommHandle(CommHandle&& other) noexcept : comm_(other.comm_) { other.comm_ = nullptr; }
  CommHandle& operator=(CommHandle&&) = delete;
  ~CommHandle() {
    if (comm_ != nullptr) braidCommDestroy(comm_);
  }
  braidComm_t get() const { return comm_; }

 private:
  braidComm_t comm_ = nullptr;
};

/// Where one placement's operands lie.
struct Operands {
  unsigned char* send = nullptr;
  unsigned char* recv = nullptr;
  unsigned char* outputEnd = nullptr;  ///< the guard after the output starts here
};

/// One measurement, combined over ranks.
struct Sample {
  double seconds = 0;
  std::optional<uint64_t> wrong;
};

struct RankRecord {
  int32_t pid;
  char host[60];
};
static_assert(sizeof(RankRecord) == 64);

class RankBench {
 public:
  RankBench(const RunSpec& spec, int rank) : spec_(spec), opt_(spec.options), rank_(rank) {}

  Expected<int> run() {
    PERF_TRY(createComms());
    PERF_TRY(printPreamble());
    const uint64_t bytes = opt_.maxBytes + 2 * kGuardBytes;
    PERF_ASSIGN(HostBuffer send, HostBuffer::allocate(bytes, opt_.sharedBuffers));
    PERF_ASSIGN(HostBuffer recv, HostBuffer::allocate(bytes, opt_.sharedBuffers));
    sendBuf_ = std::move(send);
    recvBuf_ = std::move(recv);
    bufferBytes_ = bytes;
    if (opt_.device) {
      PERF_TRY(sendDev_.allocate(bytes));
      PERF_TRY(recvDev_.allocate(bytes));
    }
    averages_.resize(comms_.size());
    PERF_TRY(warmUpHelpers());
    for (int cycle = 0; opt_.cycles == 0 || cycle < opt_.cycles; ++cycle) {
      PERF_TRY(sweepAll());
    }
    if (rank_ == 0) PERF_TRY(printSummary());
    return totalWrong_ == 0 ? 0 : 1;
  }

 private:
  bool algoColumns() const { return opt_.algo == "all"; }
  bool tuneMode() const { return !opt_.tuneFile.empty(); }
  /// Out of place only, one time per communicator: --algo all and --tune.
  bool columns() const { return algoColumns() || tuneMode(); }
  int n() const { return spec_.nranks; }
  braidComm_t comm0() const { return comms_.front().get(); }
  /// The communicators that are measured (with --tune the last one only answers questions).
  size_t measured() const { return tuneMode() ? comms_.size() - 1 : comms_.size(); }
  /// A communicator whose tuner's choice, BRAID_ALGO aside, is the one to judge.
  braidComm_t tunerComm() const { return comms_.back().get(); }

  Outcome createComms() {
    for (size_t i = 0; i < spec_.ids.size(); ++i) {
      std::vector<std::string> settings;
      if (!spec_.algorithms[i].empty()) settings.push_back("BRAID_ALGO=" + spec_.algorithms[i]);
      if (i < spec_.chunkBytes.size() && spec_.chunkBytes[i] != 0) {
        settings.push_back("BRAID_CHUNK_BYTES=" + std::to_string(spec_.chunkBytes[i]));
      }
      if (i < spec_.channels.size() && spec_.channels[i] != 0) {
        settings.push_back("BRAID_NCHANNELS=" + std::to_string(spec_.channels[i]));
      }
      if (opt_.timeoutSeconds >= 0) {
        char text[64];
        std::snprintf(text, sizeof(text), "BRAID_TIMEOUT=%g", opt_.timeoutSeconds);
        settings.push_back(text);
      }
      std::vector<const char*> pointers;
      for (const std::string& s : settings) pointers.push_back(s.c_str());
      pointers.push_back(nullptr);
      braidConfig_t config = BRAID_CONFIG_INITIALIZER;
      config.settings = pointers.data();
      braidComm_t comm = nullptr;
      PERF_TRY(apiOutcome(braidCommInitRankConfig(&comm, n(), spec_.ids[i], rank_, &config),
                          "braidCommInitRankConfig", nullptr));
      comms_.emplace_back(comm);
    }
    return Outcome();
  }

  Outcome printPreamble() {
    RankRecord mine{};
    mine.pid = static_cast<int32_t>(getpid());
    gethostname(mine.host, sizeof(mine.host) - 1);
    std::vector<RankRecord> all(static_cast<size_t>(n()));
    PERF_TRY(apiOutcome(
        braidAllGather(&mine, all.data(), sizeof(RankRecord), braidUint8, comm0(), nullptr),
        "braidAllGather", comm0()));
    if (rank_ != 0) return Outcome();
    std::vector<RankInfo> ranks;
    for (int r = 0; r < n(); ++r) {
      all[r].host[sizeof(all[r].host) - 1] = '\0';
      ranks.push_back({r, all[r].pid, all[r].host});
    }
    std::string text = formatHeader(opt_) + formatRanks(ranks);
    if (tuneMode()) {
      text += formatTuneColumnHeader();
    } else {
      text += algoColumns() ? formatAlgoColumnHeader(spec_.algorithms, true) : formatColumnHeader();
    }
    emit(text);
    return Outcome();
  }

  Outcome sweepAll() {
    const bool reduces = collectiveReduces(opt_.collective);
    const std::vector<braidRedOp_t> ops = reduces ? opt_.ops : std::vector<braidRedOp_t>{braidSum};
    std::vector<int> roots = {-1};
    if (collectiveHasRoot(opt_.collective)) {
      roots.clear();
      for (int r = 0; r < n(); ++r) {
        if (opt_.root == -1 || opt_.root == r) roots.push_back(r);
      }
    }
    for (braidDataType_t type : opt_.dataTypes) {
      for (braidRedOp_t op : ops) {
        for (int root : roots) {
          for (uint64_t bytes : sweepSizes(opt_)) PERF_TRY(measureSize(type, op, root, bytes));
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
    check.nranks = n();
    check.rank = rank_;
    check.root = root < 0 ? 0 : root;
    check.shape = collShape(opt_.collective, bytes, elementSize(type), n());
    const std::string_view opText = collectiveReduces(opt_.collective) ? opName(op) : "none";
    std::string row = formatRowPrefix(check.shape.reportBytes(), check.shape.paramCount,
                                      typeName(type), opText, root);

    std::vector<double> busBws;
    std::vector<double> times;
    std::optional<uint64_t> algoWrong;
    std::vector<Sample> inTurn;
    if (columns()) {
      PERF_ASSIGN(inTurn, measureInTurn(check, tuneMode() ? IterationCount::kBounded
                                                          : IterationCount::kAtLeast));
    }
    for (size_t c = 0; c < measured(); ++c) {
      for (bool inPlace : {false, true}) {
        if (inPlace && columns()) continue;
        Sample sample;
        if (columns()) {
          sample = inTurn[c];
        } else {
          PERF_ASSIGN(sample, measure(comms_[c].get(), check, inPlace));
        }
        times.push_back(sample.seconds * 1e6);
        const Bandwidth bw = bandwidth(opt_.collective, check.shape, n(), sample.seconds);
        averages_[c].add(bw.busBw);
        if (sample.wrong) {
          totalWrong_ += *sample.wrong;
          algoWrong = algoWrong.value_or(0) + *sample.wrong;
        }
        if (algoColumns()) {
          busBws.push_back(bw.busBw);
        } else if (!tuneMode()) {
          row += formatPlacement(sample.seconds * 1e6, bw, sample.wrong);
        }
        if (rank_ == 0 && !opt_.jsonFile.empty()) {
          json_.add({std::string(perfCollectiveName(opt_.collective)),
                     spec_.algorithms[c].empty() ? "auto" : spec_.algorithms[c],
                     std::string(typeName(type)), std::string(opText), root,
                     check.shape.reportBytes(), check.shape.paramCount, n(), sample.seconds * 1e6,
                     bw.algBw, bw.busBw, sample.wrong, inPlace});
        }
      }
    }
    const uint64_t callBytes = check.shape.paramCount * elementSize(type);
    const std::string key = rowKey(type, op, root, check.shape.reportBytes());
    if (algoColumns()) {
      PERF_ASSIGN(TunerCell cell, regretCell(callBytes, key, times));
      row += formatAlgoCells(spec_.algorithms, busBws, algoWrong, cell);
    }
    if (tuneMode()) PERF_TRY(tuneRow(callBytes, key, times, row));
    if (rank_ == 0) emit(row + "\n");
    return Outcome();
  }

  /// The row's key in the summaries: its size, and its type, op and root where several are swept.
  std::string rowKey(braidDataType_t type, braidRedOp_t op, int root, uint64_t bytes) const {
    std::string key = std::to_string(bytes);
    if (opt_.dataTypes.size() > 1) key += " " + std::string(typeName(type));
    if (opt_.ops.size() > 1 && collectiveReduces(opt_.collective)) {
      key += " " + std::string(opName(op));
    }
    if (collectiveHasRoot(opt_.collective) && opt_.root == -1) {
      key += " root " + std::to_string(root);
    }
    return key;
  }

  /// --algo all: the algorithm the tuner chooses (BRAID_ALGO aside) and what it cost here.
  Expected<TunerCell> regretCell(uint64_t callBytes, const std::string& key,
                                 const std::vector<double>& times) {
    PERF_ASSIGN(const tools::TunerChoice choice, tunerChoice(callBytes));
    const std::string& name = choice.algorithm;
    size_t chosen = 0;
    while (chosen < spec_.algorithms.size() && spec_.algorithms[chosen] != name) ++chosen;
    if (chosen == times.size()) return failure("the tuner chose " + name + ", not a column");
    regret_.add(key, times, chosen);
    const double fastest = *std::min_element(times.begin(), times.end());
    return TunerCell{name, fastest > 0 ? times[chosen] / fastest - 1.0 : 0.0};
  }

  /// --tune: records every variant's time, and shows the fastest so far and the tuner's choice.
  Outcome tuneRow(uint64_t callBytes, const std::string& key, const std::vector<double>& times,
                  std::string& row) {
    for (size_t v = 0; v < times.size(); ++v) tune_.record(callBytes, v, times[v]);
    PERF_ASSIGN(const tools::TunerChoice choice, tunerChoice(callBytes));
    const std::vector<TuneVariant>& variants = tune_.variants();
    auto isChoice = [&](const TuneVariant& v) {
      return v.algorithm == choice.algorithm && v.chunkBytes == choice.chunkBytes &&
             v.nchannels == choice.nchannels;
    };
    size_t chosen = 0;
    while (chosen < variants.size() && !isChoice(variants[chosen])) ++chosen;
    const TuneVariant choiceVariant{choice.algorithm, choice.chunkBytes, choice.nchannels};
    const auto [best, bestUs] = tune_.best(callBytes);
    double choiceUs = -1;
    if (chosen < variants.size()) {
      choiceUs = tune_.time(callBytes, chosen);
      regret_.add(key, times, chosen);
    }
    row += formatTuneCells(variants[best].label(), bestUs, choiceVariant.label(), choiceUs);
    return Outcome();
  }

  /// The tuner's choice, BRAID_ALGO aside, for a call of the swept collective moving callBytes.
  Expected<tools::TunerChoice> tunerChoice(uint64_t callBytes) const {
    tools::TunerChoice choice;
    PERF_TRY(toolsOutcome(tools::tunerChoice(tunerComm(), libraryCollectiveName(opt_.collective),
                                             callBytes, /*honourOverride=*/false, &choice)));
    return choice;
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
    const uint64_t rank = static_cast<uint64_t>(rank_);
    o.send = base + rank * s.sendInPlaceOffset * s.typeSize;
    o.recv = base + rank * s.recvInPlaceOffset * s.typeSize;
    o.outputEnd = base + s.inPlaceBytes();
    return o;
  }

  Outcome issue(braidComm_t comm, const CheckSpec& c, const Operands& o,
                braidStream_t stream = nullptr) const {
    const uint64_t count = c.shape.paramCount;
    switch (c.coll) {
      case PerfCollective::kAllReduce:
        return apiOutcome(braidAllReduce(o.send, o.recv, count, c.type, c.op, comm, stream),
                          "braidAllReduce", comm);
      case PerfCollective::kBroadcast:
        return apiOutcome(braidBroadcast(o.send, o.recv, count, c.type, c.root, comm, stream),
                          "braidBroadcast", comm);
      case PerfCollective::kReduce:
        return apiOutcome(braidReduce(o.send, o.recv, count, c.type, c.op, c.root, comm, stream),
                          "braidReduce", comm);
      case PerfCollective::kAllGather:
        return apiOutcome(braidAllGather(o.send, o.recv, count, c.type, comm, stream),
                          "braidAllGather", comm);
      case PerfCollective::kReduceScatter:
        return apiOutcome(braidReduceScatter(o.send, o.recv, count, c.type, c.op, comm, stream),
                          "braidReduceScatter", comm);
      case PerfCollective::kAllToAll:
        return apiOutcome(braidAllToAll(o.send, o.recv, count, c.type, comm, stream),
                          "braidAllToAll", comm);
      case PerfCollective::kSendRecv: {
        PERF_TRY(apiOutcome(braidGroupStart(), "braidGroupStart", nullptr));
        Outcome sent =
            apiOutcome(braidSend(o.send, count, c.type, (c.rank + 1) % c.nranks, comm, stream),
                       "braidSend", comm);
        Outcome received = apiOutcome(
            braidRecv(o.recv, count, c.type, (c.rank + c.nranks - 1) % c.nranks, comm, stream),
            "braidRecv", comm);
        // The group must close even when a call inside it failed.
        Outcome ended = apiOutcome(braidGroupEnd(), "braidGroupEnd", comm);
        PERF_TRY(sent);
        PERF_TRY(received);
        return ended;
      }
    }
    return failure("unknown collective");
  }

  /// One timed iteration: aggIters operations, grouped when more than one.
  Outcome iteration(braidComm_t comm, const CheckSpec& c, const Operands& o,
                    braidStream_t stream = nullptr) const {
    if (opt_.aggIters == 1) return issue(comm, c, o, stream);
    PERF_TRY(apiOutcome(braidGroupStart(), "braidGroupStart", nullptr));
    Outcome status;
    for (int a = 0; a < opt_.aggIters && status.ok(); ++a) status = issue(comm, c, o, stream);
    Outcome ended = apiOutcome(braidGroupEnd(), "braidGroupEnd", comm);
    PERF_TRY(status);
    return ended;
  }

  /// A communicator's first calls set up what they use (FIFO pages, connections), each rank at
  /// its own pace. Made first in the barrier that starts the first size's timed loop, they let
  /// ranks into it milliseconds apart (broadcast, 4 ranks, 64 B: 128 us a call averaged over
  /// ranks, against 1-2 us at the next size). So the barrier and the time reductions run a few
  /// times on every communicator before any size.
  Outcome warmUpHelpers() {
    for (const auto& comm : comms_) {
      for (int i = 0; i < 3; ++i) {
        PERF_TRY(barrier(comm.get()));
        PERF_TRY(slowestRank(comm.get(), 0.0).outcome());
      }
    }
    return Outcome();
  }

  Outcome barrier(braidComm_t comm) {
    return apiOutcome(braidAllReduce(&token_, &token_, 1, braidFloat32, braidSum, comm, nullptr),
                      "braidAllReduce (barrier)", comm);
  }

  /// The per-iteration time combined over ranks as -a asks.
  Expected<double> combineTime(braidComm_t comm, double seconds) {
    double value = seconds;
    braidRedOp_t op = braidSum;
    switch (opt_.average) {
      case AverageMode::kRank0: value = rank_ == 0 ? seconds : 0.0; break;
      case AverageMode::kAverage: break;
      case AverageMode::kMin: op = braidMin; break;
      case AverageMode::kMax: op = braidMax; break;
    }
    PERF_TRY(apiOutcome(braidAllReduce(&value, &value, 1, braidFloat64, op, comm, nullptr),
                        "braidAllReduce (time)", comm));
    return opt_.average == AverageMode::kAverage ? value / n() : value;
  }

  /// One iteration's seconds, for the iteration count: each rank's fastest of a few timed
  /// iterations, the slowest rank's agreed by all. One iteration alone was at the mercy of one
  /// hiccup (a rank woken late from its futex), which then set a count as low as -n and stayed
  /// in the average (--tune, 4 ranks, 32 B: 149 us against 21 us for the same plan).
  Expected<double> pilotSeconds(braidComm_t comm, const CheckSpec& c, const Operands& o) {
    double once = 1e30;
    for (int trial = 0; trial < kPilotIters; ++trial) {
      PERF_TRY(barrier(comm));
      const Clock::time_point t0 = Clock::now();
      PERF_TRY(iteration(comm, c, o));
      once = std::min(once, std::chrono::duration<double>(Clock::now() - t0).count());
      // Long calls are their own average: past the first, more trials only cost time. Every
      // rank must make the same number of calls, so the rule reads what all agree on.
      if (trial == 0) {
        PERF_ASSIGN(const double slowest, slowestRank(comm, once));
        if (slowest >= kPilotLongSeconds) return slowest;
      }
    }
    PERF_ASSIGN(const double slowest, slowestRank(comm, once));
    return std::max(slowest, 1e-9);
  }

  /// The largest of the ranks' `seconds`, on every rank.
  Expected<double> slowestRank(braidComm_t comm, double seconds) {
    PERF_TRY(
        apiOutcome(braidAllReduce(&seconds, &seconds, 1, braidFloat64, braidMax, comm, nullptr),
                   "braidAllReduce (iteration time)", comm));
    return seconds;
  }

  /// -n iterations of one communicator, after -w untimed ones.
  Expected<Sample> measure(braidComm_t comm, const CheckSpec& c, bool inPlace) {
    const Operands hostOperands = operands(c, inPlace);
    fillInput(c, hostOperands.send);
    PERF_TRY(toDevice());
    const Operands o = target(hostOperands);
    for (int w = 0; w < opt_.warmupIters; ++w) PERF_TRY(iteration(comm, c, o));
    Sample sample;
    PERF_ASSIGN(sample.seconds, timedSeconds(comm, c, o, opt_.iters));
    PERF_ASSIGN(sample.wrong, verify(comm, c, hostOperands, inPlace));
    return sample;
  }

  /// --algo all and --tune: every measured communicator out of place, their iterations in
  /// kRounds rounds taken in turn, each keeping its fastest round (kRounds above).
  Expected<std::vector<Sample>> measureInTurn(const CheckSpec& c, IterationCount count) {
    const Operands hostOperands = operands(c, /*inPlace=*/false);
    fillInput(c, hostOperands.send);
    PERF_TRY(toDevice());
    const Operands o = target(hostOperands);
    std::vector<int> rounds(measured());
    std::vector<int> perRound(measured());
    for (size_t k = 0; k < measured(); ++k) {
      braidComm_t comm = comms_[k].get();
      for (int w = 0; w < opt_.warmupIters; ++w) PERF_TRY(iteration(comm, c, o));
      PERF_ASSIGN(const int iters, iterationCount(comm, c, o, count));
      rounds[k] = std::min(kRounds, iters);
      perRound[k] = (iters + rounds[k] - 1) / rounds[k];
    }
    std::vector<Sample> samples(measured(), Sample{1e30, std::nullopt});
    for (int round = 0; round < kRounds; ++round) {
      for (size_t k = 0; k < measured(); ++k) {
        if (round >= rounds[k]) continue;
        PERF_ASSIGN(const double seconds, timedSeconds(comms_[k].get(), c, o, perRound[k]));
        samples[k].seconds = std::min(samples[k].seconds, seconds);
      }
    }
    for (size_t k = 0; k < measured(); ++k) {
      PERF_ASSIGN(samples[k].wrong, verify(comms_[k].get(), c, hostOperands, false));
    }
    return samples;
  }

  /// -n, or more where calls are short (kAtLeast: to fill kAlgoAllSeconds; kBounded: as much,
  /// but within kTuneSeconds and at least two), the same on every rank.
  Expected<int> iterationCount(braidComm_t comm, const CheckSpec& c, const Operands& o,
                               IterationCount count) {
    PERF_ASSIGN(double once, pilotSeconds(comm, c, o));
    const double fit = std::min(kAlgoAllSeconds / once, 1.0 * kAlgoAllMaxIters);
    int iters = std::max(opt_.iters, static_cast<int>(fit));
    if (count == IterationCount::kBounded) {
      const int budget = static_cast<int>(std::min(kTuneSeconds / once, 1.0 * kAlgoAllMaxIters));
      iters = std::max(std::min(2, opt_.iters), std::min(iters, budget));
    }
    return std::max(iters, 1);
  }

  /// Seconds per operation over `iters` iterations started together, combined over ranks (-a).
  Expected<double> timedSeconds(braidComm_t comm, const CheckSpec& c, const Operands& o,
                                int iters) {
    if (!opt_.device) {
      PERF_TRY(barrier(comm));
      const Clock::time_point start = Clock::now();
      for (int i = 0; i < iters; ++i) PERF_TRY(iteration(comm, c, o));
      const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      return combineTime(comm, elapsed / (static_cast<double>(iters) * opt_.aggIters));
    }
    // --device: the loop's calls enqueued, captured or waited for as -G/--sync-each-call say.
    const DeviceLoop::Calls calls = [&](braidStream_t stream) -> Outcome {
      for (int i = 0; i < iters; ++i) PERF_TRY(iteration(comm, c, o, stream));
      return Outcome();
    };
    PERF_TRY(deviceLoop_.open(opt_.deviceTiming));
    PERF_TRY(deviceLoop_.prepare(calls));
    PERF_TRY(barrier(comm));
    const Clock::time_point start = Clock::now();
    PERF_TRY(deviceLoop_.run(calls));
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    deviceLoop_.finish();
    return combineTime(comm, elapsed / (static_cast<double>(iters) * opt_.aggIters));
  }

  /// -c: the wrong elements all ranks found in that many verified calls (nothing without -c).
  Expected<std::optional<uint64_t>> verify(braidComm_t comm, const CheckSpec& c,
                                           const Operands& hostOperands, bool inPlace) {
    // In place, a rank's send reads the buffer its receive overwrites: the result depends on how
    // the two interleave, so there is nothing to verify (the time is still meaningful).
    const bool verifiable = !(inPlace && c.coll == PerfCollective::kSendRecv);
    if (opt_.check <= 0 || !verifiable) return std::optional<uint64_t>();
    uint64_t wrong = 0;
    for (int round = 0; round < opt_.check; ++round) {
      PERF_ASSIGN(uint64_t w, verifyOnce(comm, c, hostOperands, inPlace));
      wrong += w;
    }
    PERF_TRY(apiOutcome(braidAllReduce(&wrong, &wrong, 1, braidUint64, braidSum, comm, nullptr),
                        "braidAllReduce (wrong count)", comm));
    return std::optional<uint64_t>(wrong);
  }

  /// Refills, runs once, and counts this rank's wrong elements, changed inputs and guard bytes.
  Expected<uint64_t> verifyOnce(braidComm_t comm, const CheckSpec& c, const Operands& o,
                                bool inPlace) {
    // Poison first: in place, the input filled next overlays part of the output.
    std::memset(o.recv, kPoisonByte, c.shape.recvBytes());
    fillInput(c, o.send);
    unsigned char* guardBefore = recvBuf_.data();
    writeGuard(guardBefore);
    writeGuard(o.outputEnd);
    PERF_TRY(toDevice());
    PERF_TRY(issue(comm, c, target(o)));
    PERF_TRY(toHost());
    const Mismatches out = checkOutput(c, o.recv);
    const Mismatches in = inPlace ? Mismatches{} : checkInputIntact(c, o.send);
    const uint64_t guard = countGuardDamage(guardBefore) + countGuardDamage(o.outputEnd);
    const char* where = inPlace ? "in-place" : "out-of-place";
    if (out.count > 0 || in.count > 0 || guard > 0) {
      std::fprintf(stderr, "braid-perf: rank %d: %s %s %s %llu B %s:", rank_,
                   std::string(perfCollectiveName(c.coll)).c_str(),
                   std::string(typeName(c.type)).c_str(), std::string(opName(c.op)).c_str(),
                   static_cast<unsigned long long>(c.shape.reportBytes()), where);
      if (out.count > 0) {
        std::fprintf(stderr, " %llu wrong output element(s), first at %llu: expected %s, got %s;",
                     static_cast<unsigned long long>(out.count),
                     static_cast<unsigned long long>(out.firstIndex), out.expected.c_str(),
                     out.actual.c_str());
      }
      if (in.count > 0) {
        std::fprintf(stderr, " %llu input element(s) overwritten, first at %llu;",
                     static_cast<unsigned long long>(in.count),
                     static_cast<unsigned long long>(in.firstIndex));
      }
      if (guard > 0) {
        std::fprintf(stderr, " %llu guard byte(s) outside the output written;",
                     static_cast<unsigned long long>(guard));
      }
      std::fprintf(stderr, "\n");
    }
    return out.count + in.count + guard;
  }

  Outcome printSummary() {
    if (tuneMode()) {
      emit(formatAlgoSummary(totalWrong_, {}, {}) +
           regret_.format("Regret of the tuner as it stood (model, or the table it read)"));
      PERF_TRY(writeTuningTable());
    } else if (algoColumns()) {
      std::vector<double> values;
      for (const BusBwAverage& a : averages_) values.push_back(a.value());
      emit(formatAlgoSummary(totalWrong_, spec_.algorithms, values) + regret_.format());
    } else {
      emit(formatSummary(totalWrong_, averages_.front().value()));
    }
    if (!opt_.jsonFile.empty()) PERF_TRY(json_.writeFile(opt_.jsonFile));
    return Outcome();
  }

  /// Rank 0 merges what --tune measured into the file: lines of other collectives and rank
  /// counts stay; a file that cannot be read as a tuning table is left alone.
  Outcome writeTuningTable() {
    const std::string& file = opt_.tuneFile;
    std::vector<tools::TuningLine> lines;
    for (const TuneRange& r : tune_.entries()) {
      lines.push_back({r.minBytes, r.maxBytes, r.toInf, r.variant.algorithm, r.variant.chunkBytes,
                       r.variant.nchannels, r.timeUs});
    }
    PERF_TRY(toolsOutcome(
        tools::mergeTuningTable(file, libraryCollectiveName(opt_.collective), n(), lines)));
    emit("# Tuning table: " + std::to_string(lines.size()) + " line(s) for " +
         std::string(perfCollectiveName(opt_.collective)) + " at " + std::to_string(n()) +
         " ranks written to " + file + "\n#\n");
    return Outcome();
  }

  static RegretSummary labelled(const RunSpec& spec) {
    RegretSummary r;
    std::vector<std::string> labels;
    if (spec.options.tuneFile.empty()) {
      labels = spec.algorithms;
    } else {
      for (const TuneVariant& v : variantsOf(spec)) labels.push_back(v.label());
    }
    r.setLabels(std::move(labels));
    return r;
  }

  static std::vector<TuneVariant> variantsOf(const RunSpec& spec) {
    std::vector<TuneVariant> out;
    if (spec.options.tuneFile.empty()) return out;
    for (size_t i = 0; i + 1 < spec.algorithms.size(); ++i) {
      out.push_back({spec.algorithms[i], spec.chunkBytes[i], spec.channels[i]});
    }
    return out;
  }

  static void emit(const std::string& text) {
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  }

  const RunSpec& spec_;
  const PerfOptions& opt_;
  const int rank_;
  std::vector<CommHandle> comms_;
  /// The operands the library sees: the host buffers, or with --device their device mirrors.
  Operands target(const Operands& host) const {
    if (!opt_.device) return host;
    auto map = [&](unsigned char* p) -> unsigned char* {
      if (p == nullptr) return nullptr;
      if (p >= sendBuf_.data() && p < sendBuf_.data() + bufferBytes_) {
        return sendDev_.data() + (p - sendBuf_.data());
      }
      return recvDev_.data() + (p - recvBuf_.data());
    };
    return {map(host.send), map(host.recv), map(host.outputEnd)};
  }
  Outcome toDevice() {
    if (!opt_.device) return Outcome();
    PERF_TRY(toolsOutcome(tools::copyToDevice(sendDev_.data(), sendBuf_.data(), bufferBytes_)));
    return toolsOutcome(tools::copyToDevice(recvDev_.data(), recvBuf_.data(), bufferBytes_));
  }
  Outcome toHost() {
    if (!opt_.device) return Outcome();
    PERF_TRY(toolsOutcome(tools::copyToHost(sendBuf_.data(), sendDev_.data(), bufferBytes_)));
    return toolsOutcome(tools::copyToHost(recvBuf_.data(), recvDev_.data(), bufferBytes_));
  }

  HostBuffer sendBuf_;
  HostBuffer recvBuf_;
  uint64_t bufferBytes_ = 0;
  DeviceMirror sendDev_;
  DeviceMirror recvDev_;
  DeviceLoop deviceLoop_;
  std::vector<BusBwAverage> averages_;
  uint64_t totalWrong_ = 0;
  float token_ = 0;
  JsonReport json_{spec_.options, spec_.nranks, spec_.nprocs};
  RegretSummary regret_ = labelled(spec_);
  TuneRecorder tune_{variantsOf(spec_)};
};

}  // namespace

int runRank(const RunSpec& spec, int rank) {
  Expected<int> result = RankBench(spec, rank).run();
  if (result.ok()) return result.value();
  std::fprintf(stderr, "braid-perf: rank %d: %s\n", rank, result.outcome().message().c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  // Peers in this process are blocked in collectives this rank will never join.
  _exit(2);
}

Expected<std::vector<braidUniqueId>> makeUniqueIds(size_t count) {
  std::vector<braidUniqueId> ids(count);
  for (braidUniqueId& id : ids) {
    PERF_TRY(apiOutcome(braidGetUniqueId(&id), "braidGetUniqueId", nullptr));
  }
  return ids;
}

Expected<std::vector<braidUniqueId>> shareUniqueIds(size_t count, int* worldRank, int* worldSize) {
  braidComm_t raw = nullptr;
  PERF_TRY(apiOutcome(braidCommInitFromEnv(&raw), "braidCommInitFromEnv", nullptr));
  CommHandle world(raw);
  PERF_TRY(apiOutcome(braidCommUserRank(raw, worldRank), "braidCommUserRank", raw));
  PERF_TRY(apiOutcome(braidCommCount(raw, worldSize), "braidCommCount", raw));
  std::vector<braidUniqueId> ids(count);
  if (*worldRank == 0) {
    PERF_ASSIGN(ids, makeUniqueIds(count));
  }
  PERF_TRY(apiOutcome(braidBroadcast(ids.data(), ids.data(), count * sizeof(braidUniqueId),
                                     braidUint8, 0, raw, nullptr),
                      "braidBroadcast (unique ids)", raw));
  return ids;
}

}  // namespace braid::perf
