#include "tuner/calibration_probe.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include "algorithms/algorithms.h"
#include "executor/connectors.h"
#include "executor/executor.h"
#include "executor/progress.h"
#include "fifo/fifo.h"
#include "kernels/cpu/reduce.h"
#include "transport/transport.h"
#include "tuner/plan_cost.h"

namespace braid {
namespace {

using Clock = std::chrono::steady_clock;

// FIFOs of the probe: deep enough for a ring all-reduce (two slots at least).
constexpr uint32_t kSlots = 4;
// A hop carries one float: what a latency-bound collective step moves.
constexpr uint32_t kTinyBytes = 4;

struct AlignedFree {
  void operator()(char* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<char, AlignedFree>;

Result<Buffer> allocate(uint64_t bytes) {
  const uint64_t rounded = std::max<uint64_t>(4096, (bytes + 4095) / 4096 * 4096);
  void* p = std::aligned_alloc(4096, rounded);
  if (p == nullptr) return systemError("calibration: cannot allocate " + std::to_string(bytes));
  std::memset(p, 1, rounded);  // touched now, so page faults stay out of the timings
  return Buffer(static_cast<char*>(p));
}

/// FIFOs between k ranks (each (sender, receiver, channel) a plan uses is made on first use) and
/// the ranks' Wakers, in this process's memory.
class LoopbackMesh {
 public:
  LoopbackMesh(int ranks, uint32_t slotBytes)
      : slotBytes_(slotBytes), wakers_(std::make_unique<Waker[]>(ranks)) {}
  /// The FIFO carrying `from`'s data to `to` on `channel`.
  Result<FifoView> view(int from, int to, int channel) {
    std::lock_guard<std::mutex> lock(mutex_);
    Fifo& f = fifos_[{from, to, channel}];
    if (f.control == nullptr) {
      f.control = std::make_unique<FifoControl>();
      f.headers.resize(kSlots);
      ASSIGN_OR_RETURN(f.data, allocate(uint64_t{kSlots} * slotBytes_));
    }
    return FifoView{f.control.get(), f.headers.data(), f.data.get(), kSlots, slotBytes_};
  }
  Waker* waker(int rank) { return &wakers_[rank]; }

 private:
  struct Fifo {
    std::unique_ptr<FifoControl> control;
    std::vector<SlotHeader> headers;
    Buffer data;
  };
  uint32_t slotBytes_;
  std::mutex mutex_;
  std::map<std::tuple<int, int, int>, Fifo> fifos_;
  std::unique_ptr<Waker[]> wakers_;
};

class LoopbackTransport final : public Transport {
 public:
  LoopbackTransport(LoopbackMesh* mesh, int rank) : mesh_(mesh), rank_(rank) {}
  std::string_view name() const override { return "loopback"; }
  bool canConnect(int peer) const override { return peer != rank_; }
  Result<SendConnector> sendConnector(int peer, int channel) override {
    ASSIGN_OR_RETURN(FifoView v, mesh_->view(rank_, peer, channel));
    return SendConnector(v, mesh_->waker(peer));
  }
  Result<RecvConnector> recvConnector(int peer, int channel) override {
    ASSIGN_OR_RETURN(FifoView v, mesh_->view(peer, rank_, channel));
    return RecvConnector(v, mesh_->waker(rank_));
  }

 private:
  LoopbackMesh* mesh_;
  int rank_;
};

class ProbeClient final : public ProgressClient {
 public:
  ProbeClient(Waker* waker, int rank) : waker_(waker), rank_(rank) {}
  Status health() override { return okStatus(); }
  std::optional<PeerFailure> peerFailure(int) override { return std::nullopt; }
  bool peerAlive(int) override { return true; }
  std::string describePeer(int peer) const override {
    return "calibration thread " + std::to_string(peer);
  }
  Waker* waker() override { return waker_; }
  double timeoutSeconds() const override { return 60; }
  std::string who() const override { return "calibration thread " + std::to_string(rank_); }

 private:
  Waker* waker_;
  int rank_;
};

/// The CPUs this process may run on, in order.
std::vector<int> allowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

/// The CPUs the probe's threads run on: the process's, or - where a launcher bound it to one
/// (mpirun --bind-to core, braid-perf --bind core) - every CPU a thread of it may be moved to.
/// The calibration describes the host, whose other ranks run on the other CPUs; measured on the
/// one CPU it reads hand-offs and switches several times too slow
/// (docs/performance-notes.md#where-the-probe-runs).
std::vector<int> probeCpus() {
  std::vector<int> cpus = allowedCpus();
  if (cpus.size() >= 2) return cpus;
  std::vector<int> host;
  // A thread of its own tries each CPU, so that the caller's affinity stays as it was.
  std::thread([&host] {
    const long configured = sysconf(_SC_NPROCESSORS_CONF);
    for (int c = 0; c < configured && c < CPU_SETSIZE; ++c) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(c, &one);
      if (pthread_setaffinity_np(pthread_self(), sizeof(one), &one) == 0) host.push_back(c);
    }
  }).join();
  return host.size() >= 2 ? host : cpus;
}

/// Confines the calling thread to `cpus` (all of the process's when empty); best effort, as the
/// placement only shapes what is measured.
void confineTo(const std::vector<int>& cpus) {
  if (cpus.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

Plan emptyProbePlan(int rank, int nranks, uint64_t bytes) {
  Plan plan;
  plan.coll = Collective::kSend;
  plan.algo = Algorithm::kPairwise;
  plan.rank = rank;
  plan.nranks = nranks;
  plan.elemSize = 4;
  plan.inputBytes = bytes;
  plan.outputBytes = bytes;
  plan.lanes.resize(1);
  return plan;
}

/// One thread per plan, thread r confined to cpus[r], each running its plan `calls` times: the
/// seconds from the moment all are ready to the moment the last one finishes.
Result<double> runGroup(const std::vector<Plan>& plans, const std::vector<PlanBuffers>& buffers,
                        const std::vector<std::vector<int>>& cpus, uint32_t slotBytes,
                        int calls = 1) {
  const int k = static_cast<int>(plans.size());
  LoopbackMesh mesh(k, slotBytes);
  // The threads wait as ranks of a host with this many ranks and CPUs do (shm_transport.cc):
  // crowded ones yield at once.
  std::vector<int> hostCpus;
  for (const std::vector<int>& set : cpus) hostCpus.insert(hostCpus.end(), set.begin(), set.end());
  std::sort(hostCpus.begin(), hostCpus.end());
  hostCpus.erase(std::unique(hostCpus.begin(), hostCpus.end()), hostCpus.end());
  for (int r = 0; r < k; ++r) {
    mesh.waker(r)->hostRanks = static_cast<uint32_t>(k);
    mesh.waker(r)->hostCpus = static_cast<uint32_t>(hostCpus.size());
  }
  const kernels::Reducer reducer(braidFloat32, braidSum, k);
  CallDescriptor call;
  call.coll = static_cast<uint8_t>(Collective::kSend);
  std::atomic<int> ready{0};
  std::vector<Clock::time_point> start(k);
  std::vector<Clock::time_point> end(k);
  std::vector<Status> status(k);
  auto body = [&](int r) {
    confineTo(cpus[r]);
    LoopbackTransport transport(&mesh, r);
    std::vector<Transport*> transports(k, &transport);
    transports[r] = nullptr;
    int channels = 1;
    for (const Lane& lane : plans[r].lanes) channels = std::max(channels, lane.channel + 1);
    ConnectorTable table(r, channels, std::move(transports));
    ProbeClient client(mesh.waker(r), r);
    ready.fetch_add(1);
    while (ready.load() < k) std::this_thread::yield();
    start[r] = Clock::now();
    for (int i = 0; i < calls && status[r].ok(); ++i) {
      PlanRun run(plans[r], buffers[r], reducer, call, &table);
      std::vector<ProgressTask> tasks(1);
      tasks[0].run = &run;
      tasks[0].client = &client;
      status[r] = runTasks(tasks);
    }
    end[r] = Clock::now();
  };
  // Every rank on a thread of its own: the caller's CPU affinity stays as it was.
  std::vector<std::thread> threads;
  for (int r = 0; r < k; ++r) threads.emplace_back(body, r);
  for (std::thread& t : threads) t.join();
  for (const Status& s : status) {
    if (!s.ok()) return s.withContext("calibration probe");
  }
  return std::chrono::duration<double>(*std::max_element(end.begin(), end.end()) -
                                       *std::min_element(start.begin(), start.end()))
      .count();
}

int scaled(double effort, int count) {
  return std::max(2, static_cast<int>(std::lround(count * effort)));
}

class Probe {
 public:
  explicit Probe(const ProbeOptions& options)
      : options_(options),
        deadline_(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(options.budgetSeconds))) {}

  Result<Calibration> run() {
    Calibration c;
    c.cpus = placeThreads();
    ASSIGN_OR_RETURN(c.stepUs, stepCost());
    ASSIGN_OR_RETURN(c.copyCacheGBps, kernelRate(false, kCacheBytes, kCachePasses));
    ASSIGN_OR_RETURN(c.reduceCacheGBps, kernelRate(true, kCacheBytes, kCachePasses));
    // What crosses cores needs both of them: a hypervisor that holds one back for a few
    // milliseconds spoils every run of a burst, so these are taken twice, before and after the
    // memory measurements (the longest), and the better of the two counts.
    ASSIGN_OR_RETURN(c.transferGBps, transferRate(c));
    ASSIGN_OR_RETURN(c.hopUs, handOffUs(c.stepUs));
    // The kernels against the memory system: buffers twice the last-level cache.
    const uint64_t dramBytes =
        std::clamp<uint64_t>(2 * options_.llcBytes, 16ull << 20, 64ull << 20);
    ASSIGN_OR_RETURN(c.copyDramGBps, kernelRate(false, dramBytes, 1));
    ASSIGN_OR_RETURN(c.reduceDramGBps, kernelRate(true, dramBytes, 1));
    ASSIGN_OR_RETURN(c.cacheMiB, effectiveCacheMiB(c.reduceDramGBps, dramBytes));
    ASSIGN_OR_RETURN(c.copyLlcGBps, llcCopyRate(c.cacheMiB, dramBytes));
    ASSIGN_OR_RETURN(double transferAgain, transferRate(c));
    c.transferGBps = std::max(c.transferGBps, transferAgain);
    ASSIGN_OR_RETURN(double hopAgain, handOffUs(c.stepUs));
    c.hopUs = std::min(c.hopUs, hopAgain);
    ASSIGN_OR_RETURN(c.crowdedHopUs, fitCrowdedHop(c));
    ASSIGN_OR_RETURN(c.crowdedPostUs, fitCrowdedPost(c));
    ASSIGN_OR_RETURN(c.crowdedSwitchFactor, fitCrowdedSwitch(c));
    RETURN_IF_ERROR(validateCalibration(c).withContext("calibration measured"));
    return c;
  }

  /// The one-way hand-off between two cores: a ping-pong's hop runs a send step and a receive
  /// step; what remains is the hand-off itself (the FIFO's counters, the header check, the other
  /// core fetching the slot).
  Result<double> handOffUs(double stepUs) {
    if (apart_.empty()) placeThreads();
    ASSIGN_OR_RETURN(double pingPong, ringSeconds(apart_, kPingPongLaps));
    pingPong = pingPong * 1e6 / (2.0 * kPingPongLaps);
    return std::max(0.01, pingPong - 2 * stepUs);
  }

 private:
  /// Where the probe's threads run: two cores apart, and four ranks crowded on two (the
  /// smallest oversubscribed host). Returns the CPUs this process may use.
  int placeThreads() {
    const std::vector<int> cpus = probeCpus();
    if (cpus.size() >= 2) {
      apart_ = {{cpus[0]}, {cpus[1]}};
      crowded_ = std::vector<std::vector<int>>(4, {cpus[0], cpus[1]});
    } else {
      apart_ = {{}, {}};
      crowded_ = {{}, {}};
    }
    return std::max<int>(1, static_cast<int>(cpus.size()));
  }

  // Cache-resident kernels run over a chunk the size collectives move at once, many times.
  static constexpr uint64_t kCacheBytes = 32 * 1024;
  static constexpr int kCachePasses = 256;
  // Short runs: the fastest of many short runs is one no other process interrupted.
  static constexpr int kPingPongLaps = 20;
  // Calls of the small ring all-reduce the crowded ranks run back to back.
  static constexpr int kCalls = 10;

  int runs(int count) const { return scaled(options_.effort, count * options_.repeats); }

  /// The given quantile of `count` timings: other work on a shared machine only ever makes a run
  /// slower, so a low quantile of many short runs sees through it where one long run cannot.
  /// Past the budget, the runs so far (at least one) count.
  template <typename F>
  Result<double> lowQuantile(int count, double quantile, F&& once) const {
    std::vector<double> seconds;
    for (int i = 0; i < count && (i == 0 || Clock::now() < deadline_); ++i) {
      ASSIGN_OR_RETURN(double s, once(i));
      seconds.push_back(s);
    }
    std::sort(seconds.begin(), seconds.end());
    return seconds[static_cast<size_t>(quantile * double(seconds.size() - 1))];
  }

  /// Microseconds per executed step that copies one float locally, on one thread.
  Result<double> stepCost() {
    ASSIGN_OR_RETURN(Buffer in, allocate(kTinyBytes));
    ASSIGN_OR_RETURN(Buffer out, allocate(kTinyBytes));
    constexpr int kSteps = 2000;
    Plan plan = emptyProbePlan(0, 1, kTinyBytes);
    for (int i = 0; i < kSteps; ++i) {
      plan.lanes[0].steps.push_back(makeLocalCopy(input(0), output(0), kTinyBytes));
    }
    const kernels::Reducer reducer(braidFloat32, braidSum, 1);
    ConnectorTable table(0, 1, std::vector<Transport*>(1, nullptr));
    ProbeClient client(nullptr, 0);
    ASSIGN_OR_RETURN(double seconds, lowQuantile(runs(10), 0.25, [&](int) -> Result<double> {
                       PlanRun run(plan, PlanBuffers{in.get(), out.get(), nullptr}, reducer,
                                   CallDescriptor{}, &table);
                       std::vector<ProgressTask> tasks(1);
                       tasks[0].run = &run;
                       tasks[0].client = &client;
                       const Clock::time_point t0 = Clock::now();
                       RETURN_IF_ERROR(runTasks(tasks));
                       return std::chrono::duration<double>(Clock::now() - t0).count();
                     }));
    return seconds * 1e6 / kSteps;
  }

  /// k ranks pass one float around a ring `laps` times, every rank forwarding what it receives
  /// (with two ranks: a ping-pong). Each rank's plan: send, then laps*k - 1 receive-and-forward
  /// steps, then a last receive.
  static std::vector<Plan> ringPlans(int k, int laps) {
    std::vector<Plan> plans;
    for (int r = 0; r < k; ++r) {
      plans.push_back(emptyProbePlan(r, k, kTinyBytes));
      std::vector<Step>& steps = plans.back().lanes[0].steps;
      const int next = (r + 1) % k;
      const int prev = (r + k - 1) % k;
      steps.push_back(makeSend(next, input(0), kTinyBytes));
      for (int i = 1; i < laps * k; ++i) {
        steps.push_back(makeRecvCopySend(prev, next, output(0), kTinyBytes));
      }
      steps.push_back(makeRecv(prev, output(0), kTinyBytes));
    }
    return plans;
  }

  /// Seconds of the fastest ringPlans run with the threads placed as `cpus` says.
  Result<double> ringSeconds(const std::vector<std::vector<int>>& cpus, int laps) {
    const int k = static_cast<int>(cpus.size());
    const std::vector<Plan> plans = ringPlans(k, laps);
    std::vector<Buffer> owned;
    std::vector<PlanBuffers> buffers;
    for (int r = 0; r < k; ++r) {
      ASSIGN_OR_RETURN(Buffer b, allocate(kTinyBytes));
      buffers.push_back({b.get(), b.get(), nullptr});
      owned.push_back(std::move(b));
    }
    return lowQuantile(runs(15), 0.0, [&](int) { return runGroup(plans, buffers, cpus, 4096); });
  }

  /// The hand-off latency with which the cost model's simulation (plan_cost.h: ranks sharing
  /// cores, every hop crowdedHopUs) of four ranks on two cores running the ring all-reduce
  /// of a small message, call after call, takes as long as those ranks really took. The
  /// simulation grows with the latency, so bisection finds it.
  Result<double> fitCrowdedHop(const Calibration& c) {
    ASSIGN_OR_RETURN(std::vector<Plan> plans, repeatedPlans(Algorithm::kRing, 1));
    ASSIGN_OR_RETURN(const double targetUs, crowdedUs(plans));
    SimMachine m = crowdedMachine(c);
    return bisect(c.hopUs, targetUs, targetUs, [&](double hopUs) {
      m.hopUs[0] = hopUs;
      return simulatePlans(plans, m);
    });
  }

  /// The CPU a crowded rank spends per slot it posts (waking a peer that yields or sleeps): fitted
  /// the same way, the hand-off latency known, to the direct all-reduce over four channels, whose
  /// every call posts twelve slots per rank.
  Result<double> fitCrowdedPost(const Calibration& c) {
    ASSIGN_OR_RETURN(std::vector<Plan> plans, repeatedPlans(Algorithm::kDirect, 4));
    ASSIGN_OR_RETURN(const double targetUs, crowdedUs(plans));
    SimMachine m = crowdedMachine(c);
    m.hopUs[0] = c.crowdedHopUs;
    return bisect(0.0, targetUs, targetUs, [&](double postUs) {
      m.postUs[0] = postUs;
      return simulatePlans(plans, m);
    });
  }

  /// What a crowded rank's bytes cost, as a multiple, when its core last ran another rank: fitted
  /// the same way, the two above known, to a ring all-reduce long enough that its chunks' bytes
  /// outweigh the hand-offs (the model's sizes and rates for it: chunks in the core's cache).
  Result<double> fitCrowdedSwitch(const Calibration& c) {
    constexpr uint32_t kChunk = 128 * 1024;
    constexpr uint64_t kBytes = 1 << 20;
    ASSIGN_OR_RETURN(std::vector<Plan> plans,
                     repeatedPlans(Algorithm::kRing, 1, kBytes / 4, kChunk));
    // A run to warm up first: the first runs over these new megabytes of buffers and FIFOs take
    // several times as long as later ones. Then the median run, not the fastest: where the
    // scheduler puts four ranks on two cores varies from run to run, and a lucky one steers the
    // tuner wrong (docs/performance-notes.md#the-crowded-switch-factor).
    RETURN_IF_ERROR(crowdedUs(plans, kBytes, kChunk, 1).status());
    ASSIGN_OR_RETURN(const double targetUs, crowdedUs(plans, kBytes, kChunk, 10, 0.5));
    SimMachine m = crowdedMachine(c);
    m.hopUs[0] = c.crowdedHopUs;
    m.postUs[0] = c.crowdedPostUs;
    return bisect(1.0, 16.0, targetUs, [&](double factor) {
      m.switchFactor = factor;
      return simulatePlans(plans, m);
    });
  }

  /// Every crowded rank's plan of kCalls all-reduces back to back, as one plan (the model
  /// simulates them so: a rank starts its next call as soon as it is done with its part); by
  /// default of a few floats per channel in one-float chunks.
  Result<std::vector<Plan>> repeatedPlans(Algorithm algo, int nchannels, uint64_t count = 0,
                                          uint32_t chunkBytes = kTinyBytes * 4) const {
    const int k = static_cast<int>(crowded_.size());
    PlanRequest request;
    request.coll = Collective::kAllReduce;
    request.algo = algo;
    request.nranks = k;
    request.count = count != 0 ? count : 4 * uint64_t(k) * uint64_t(nchannels);
    request.chunkBytes = chunkBytes;
    request.nchannels = nchannels;
    std::vector<Plan> plans;
    for (int r = 0; r < k; ++r) {
      request.rank = r;
      ASSIGN_OR_RETURN(Plan once, buildPlan(request));
      Plan repeated = once;
      for (int call = 1; call < kCalls; ++call) {
        for (size_t l = 0; l < once.lanes.size(); ++l) {
          repeated.lanes[l].steps.insert(repeated.lanes[l].steps.end(), once.lanes[l].steps.begin(),
                                         once.lanes[l].steps.end());
        }
      }
      plans.push_back(std::move(repeated));
    }
    return plans;
  }

  /// Microseconds the crowded ranks take for `plans` (the `quantile` of several runs: 0 the
  /// fastest), each of the kCalls calls in them run as the library runs a call: a PlanRun of its
  /// own, one after the other, over buffers of `bytes` and FIFO slots of `slotBytes`;
  /// runs(count) runs.
  Result<double> crowdedUs(const std::vector<Plan>& plans, uint64_t bytes = 4096,
                           uint32_t slotBytes = 4096, int count = 10, double quantile = 0.0) {
    std::vector<Plan> single = plans;
    for (Plan& p : single) {
      for (Lane& l : p.lanes) l.steps.resize(l.steps.size() / kCalls);
    }
    std::vector<Buffer> owned;
    std::vector<PlanBuffers> buffers;
    for (size_t r = 0; r < plans.size(); ++r) {
      ASSIGN_OR_RETURN(Buffer in, allocate(bytes));
      ASSIGN_OR_RETURN(Buffer out, allocate(bytes));
      ASSIGN_OR_RETURN(Buffer scratch, allocate(bytes));
      buffers.push_back({in.get(), out.get(), scratch.get()});
      owned.push_back(std::move(in));
      owned.push_back(std::move(out));
      owned.push_back(std::move(scratch));
    }
    ASSIGN_OR_RETURN(double seconds, lowQuantile(runs(count), quantile, [&](int) {
                       return runGroup(single, buffers, crowded_, slotBytes, kCalls);
                     }));
    return seconds * 1e6;
  }

  /// The cost model's machine for the crowded ranks (plan_cost.h).
  SimMachine crowdedMachine(const Calibration& c) const {
    SimMachine m;
    m.nranks = static_cast<int>(crowded_.size());
    m.hostOf.assign(crowded_.size(), 0);
    m.cores = {std::min(c.cpus, 2)};
    m.hopUs = {c.hopUs};
    m.postUs = {0};
    m.stepUs = c.stepUs;
    m.bytes.copy = 1e-3 / c.copyCacheGBps;
    m.bytes.reduce = 1e-3 / c.reduceCacheGBps;
    m.bytes.transfer = 1e-3 / c.transferGBps;
    return m;
  }

  /// The x in [lo, hi] at which simulated(x), which grows with x, reaches targetUs; lo when even
  /// lo overshoots it.
  template <typename F>
  static Result<double> bisect(double lo, double hi, double targetUs, F&& simulated) {
    ASSIGN_OR_RETURN(const double floorUs, simulated(lo));
    if (targetUs <= floorUs) return lo;
    for (int i = 0; i < 40; ++i) {
      const double mid = 0.5 * (lo + hi);
      ASSIGN_OR_RETURN(double t, simulated(mid));
      (t < targetUs ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi);
  }

  /// The cross-core transfer: rank 0 streams 32 KiB slots from a cached buffer, rank 1 copies
  /// them into its own; per byte, rank 1's step time less its step cost and the copy itself.
  Result<double> transferRate(const Calibration& c) {
    constexpr uint32_t kChunk = 32 * 1024;
    constexpr uint64_t kBuffer = 256 * 1024;
    constexpr int kPasses = 8;
    std::vector<Plan> plans = {emptyProbePlan(0, 2, kBuffer), emptyProbePlan(1, 2, kBuffer)};
    for (int p = 0; p < kPasses; ++p) {
      for (uint64_t off = 0; off < kBuffer; off += kChunk) {
        plans[0].lanes[0].steps.push_back(makeSend(1, input(off), kChunk));
        plans[1].lanes[0].steps.push_back(makeRecv(0, output(off), kChunk));
      }
    }
    ASSIGN_OR_RETURN(Buffer in, allocate(kBuffer));
    ASSIGN_OR_RETURN(Buffer out, allocate(kBuffer));
    const std::vector<PlanBuffers> buffers = {{in.get(), nullptr, nullptr},
                                              {nullptr, out.get(), nullptr}};
    ASSIGN_OR_RETURN(double seconds, lowQuantile(runs(5), 0.0, [&](int) {
                       return runGroup(plans, buffers, apart_, kChunk);
                     }));
    const double chunks = double(kPasses) * double(kBuffer / kChunk);
    const double perByteUs = (seconds * 1e6 / chunks - c.stepUs) / kChunk;
    // What the transfer adds over the local copy; never below a tenth of the whole.
    const double transferUs = std::max(perByteUs - 1e-3 / c.copyCacheGBps, 0.1 * perByteUs);
    return 1e-3 / std::max(transferUs, 1e-9);
  }

  /// Calibration::cacheMiB: the float32 sum over working sets (two buffers) doubling from 4 MiB,
  /// each summing as many bytes as the memory measurement did, against that measurement's rate.
  /// The largest that ran fast counts (a busy moment only ever makes a size look slow), unless
  /// the largest checked did: only sizes below the memory measurement's own working set can
  /// tell, and a cache at least that large serves it too (then the topology's figure stands, as
  /// when none ran fast).
  Result<double> effectiveCacheMiB(double memoryGBps, uint64_t memoryBufferBytes) {
    constexpr uint64_t kSmallest = 4ull << 20;
    // Well below what a cache gives over memory
    // (docs/performance-notes.md#the-cache-as-the-data-path-sees-it).
    constexpr double kCachedRatio = 1.5;
    const uint64_t largest = std::min(options_.llcBytes, memoryBufferBytes);
    uint64_t fast = 0;
    uint64_t checked = 0;
    for (uint64_t working = kSmallest; working <= largest; working *= 2) {
      const uint64_t half = working / 2;
      ASSIGN_OR_RETURN(double gbps, kernelRate(true, half, int(memoryBufferBytes / half)));
      if (gbps >= kCachedRatio * memoryGBps) fast = working;
      checked = working;
    }
    if (fast == 0 || fast == checked) return double(options_.llcBytes) / double(1 << 20);
    return double(fast) / double(1 << 20);
  }

  /// kernels::copy over a working set the last-level cache holds but no core's own cache does
  /// (beyond the 2 MiB L2s of current cores): 8 MiB, or half the cache where that is smaller.
  /// 0 where the cache holds no such set.
  Result<double> llcCopyRate(double cacheMiB, uint64_t memoryBufferBytes) {
    constexpr uint64_t kWorking = 8ull << 20;
    constexpr uint64_t kSmallest = 4ull << 20;
    const uint64_t working = std::min(kWorking, static_cast<uint64_t>(cacheMiB * 0.5 * (1 << 20)));
    if (working < kSmallest) return 0.0;
    const uint64_t half = working / 2;
    return kernelRate(false, half, int(memoryBufferBytes / half));
  }

  /// GB/s of kernels::copy (dst <- src) or of the float32 sum (dst <- dst + src) over `bytes`,
  /// `passes` times per run, on one thread; bytes counted once per output byte.
  Result<double> kernelRate(bool reduce, uint64_t bytes, int passes) {
    if (bufferBytes_ < bytes) {
      ASSIGN_OR_RETURN(src_, allocate(bytes));
      ASSIGN_OR_RETURN(dst_, allocate(bytes));
      bufferBytes_ = bytes;
    }
    const kernels::Reducer sum(braidFloat32, braidSum, 2);
    ASSIGN_OR_RETURN(double seconds, lowQuantile(runs(3), 0.0, [&](int) -> Result<double> {
                       const Clock::time_point t0 = Clock::now();
                       for (int p = 0; p < passes; ++p) {
                         if (reduce) {
                           sum.reduce(dst_.get(), dst_.get(), src_.get(), bytes / 4);
                         } else {
                           kernels::copy(dst_.get(), src_.get(), bytes);
                         }
                       }
                       return std::chrono::duration<double>(Clock::now() - t0).count();
                     }));
    return double(bytes) * passes / std::max(seconds, 1e-9) / 1e9;
  }

  ProbeOptions options_;
  Clock::time_point deadline_;
  std::vector<std::vector<int>> apart_;
  std::vector<std::vector<int>> crowded_;
  Buffer src_;
  Buffer dst_;
  uint64_t bufferBytes_ = 0;
};

}  // namespace

Result<Calibration> measureCalibration(const ProbeOptions& options) { return Probe(options).run(); }

Result<double> measureHandOffUs(const ProbeOptions& options, double stepUs) {
  return Probe(options).handOffUs(stepUs);
}

}  // namespace braid
