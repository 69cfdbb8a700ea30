#include "executor/progress.h"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "executor/wait_report.h"

namespace braid {
namespace {

// Backoff thresholds, in nanoseconds of continuous idleness, set against what a pause, a yield, a
// futex wake-up and a cross-core flag cost (docs/performance-notes.md#backoff-thresholds).
constexpr int64_t kSpinNs = 50'000;  // a peer running on another core answers within this
// Ranks outnumbering cores: while every peer a run waits on is on another core, a spin about as
// long as a switch between two processes on one core before yielding
// (docs/performance-notes.md#spinning-and-yielding-on-a-crowded-host).
constexpr int64_t kCrowdedSpinNs = 5'000;
constexpr int64_t kYieldNs = 200'000;  // then yield: a peer sharing our core gets to run
// Ranks outnumbering cores yield longer before they sleep: their waits run long (a peer must
// first get a core), and one that sleeps makes the rank that wakes it pay the futex wake-up and
// itself come back late, which can lock every rank into sleeping on every call
// (docs/performance-notes.md#yielding-before-sleeping).
constexpr int64_t kCrowdedYieldNs = 2'000'000;
constexpr int64_t kSleepNs = 1'000'000;  // futex naps, re-checking health and timeout after each
constexpr int64_t kNapNs = 20'000;       // when no single Waker covers all runs
constexpr int64_t kHealthNs = 20'000;    // how often an idle engine looks for abort and failures
constexpr int64_t kLivenessNs = 100'000'000;  // how often blocked runs ask whether peers live

int64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

bool ready(const std::vector<ProgressTask>& tasks, const ProgressTask& task) {
  return std::all_of(task.after.begin(), task.after.end(),
                     [&](size_t i) { return tasks[i].finished; });
}

/// CPUs this process may run on: its main thread's affinity, whichever thread asks first (the
/// calibration's probe threads are each confined to one CPU; asking with their own affinity made
/// every later call of the process yield as if its ranks outnumbered the CPUs).
int usableCpus() {
  static const int cpus = [] {
    cpu_set_t set;
    if (sched_getaffinity(getpid(), sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
    return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  }();
  return cpus;
}

/// With more ranks on the host than CPUs, some rank that has work is waiting for a core, quite
/// likely ours: spinning only delays the data we wait for, so such a rank yields as soon as a sweep
/// finds nothing to do (docs/performance-notes.md#spinning-and-yielding-on-a-crowded-host).
bool oversubscribed(const std::vector<ProgressTask>& tasks) {
  for (const ProgressTask& t : tasks) {
    if (coresShared(t.client->waker())) return true;
  }
  return false;
}

/// Records the CPU this thread runs on in the Wakers of its runs' communicators, and says whether
/// some run is blocked on a peer that recorded the same CPU: that peer can only run once this
/// thread leaves the core, so spinning would just delay it. The scheduler does put two ranks on
/// one CPU when another process keeps the second busy
/// (docs/performance-notes.md#spinning-and-yielding-on-a-crowded-host).
bool sharesCpuWithPeer(const std::vector<ProgressTask>& tasks) {
  const int cpu = sched_getcpu();  // a few ns: glibc reads it from rseq
  if (cpu < 0) return false;
  bool shared = false;
  for (const ProgressTask& t : tasks) {
    if (t.finished) continue;
    if (Waker* w = t.client->waker();
        w != nullptr && w->cpu.load(std::memory_order_relaxed) != cpu) {
      w->cpu.store(cpu, std::memory_order_relaxed);
    }
    shared = shared || (t.started && t.run->blockedOnCpu(cpu));
  }
  return shared;
}

/// Whether spinning on a crowded host has been paying off for this thread's waits. It does where
/// each rank waits on peers directly (direct all-reduce); it does not where the peer it waits for
/// itself waits on the rank that shares this core (ring, tree), which a rank cannot see
/// (docs/performance-notes.md#spinning-and-yielding-on-a-crowded-host). So a spin is tried while
/// most recent ones ended with data, and otherwise one wait in kProbeEvery, to notice when they
/// would again.
class CrowdedSpinRecord {
 public:
  bool worthTrying() { return ++waits_ % kProbeEvery == 0 || wins_ >= kOne / 2; }
  /// A moving average of spins that ended with data, over about the last eight.
  void record(bool won) { wins_ = wins_ - wins_ / 8 + (won ? kOne / 8 : 0); }

 private:
  static constexpr uint32_t kOne = 1u << 16;
  static constexpr uint32_t kProbeEvery = 64;
  uint32_t wins_ = kOne;
  uint32_t waits_ = 0;
};

thread_local CrowdedSpinRecord tCrowdedSpins;

}  // namespace

bool coresShared(const Waker* waker) {
  if (waker == nullptr) return false;
  const uint32_t cpus = waker->hostCpus > 0 ? waker->hostCpus : static_cast<uint32_t>(usableCpus());
  return waker->hostRanks > cpus;
}

namespace {

Status runTasksUntilDone(std::vector<ProgressTask>& tasks) {
  // One Waker for every unfinished task lets the engine sleep on a futex; otherwise it naps.
  Waker* sharedWaker = nullptr;
  bool oneWaker = true;
  double timeout = 0;
  for (const ProgressTask& t : tasks) {
    Waker* w = t.client->waker();
    if (sharedWaker == nullptr) sharedWaker = w;
    if (w == nullptr || w != sharedWaker) oneWaker = false;
    const double tt = t.client->timeoutSeconds();
    if (tt > 0) timeout = timeout > 0 ? std::min(timeout, tt) : tt;
  }
  const int64_t timeoutNs = timeout > 0 ? static_cast<int64_t>(timeout * 1e9) : 0;

  size_t left = 0;
  for (const ProgressTask& t : tasks) left += t.finished ? 0 : 1;
  int64_t idleSince = 0;
  // Peers are asked whether they live only after a blocked stretch, not on every call (the clock
  // is first read once the engine is idle: a call that never waits reads it not at all).
  int64_t lastLiveness = 0;
  uint32_t spins = 0;
  std::vector<int> peers;
  // What this thread waits on, shown by the wait report once blocked for a liveness period.
  WaitSlot waitSlot;
  auto publishWaits = [&]() {
    std::vector<BlockedRun> blocked;
    for (ProgressTask& t : tasks) {
      if (t.finished || !t.started) continue;
      blocked.push_back({t.client->who(), t.run->describe(), t.run->position()});
    }
    waitSlot.publish(std::move(blocked), idleSince);
  };

  auto sweep = [&]() -> Result<bool> {
    bool moved = false;
    for (ProgressTask& t : tasks) {
      if (t.finished || !ready(tasks, t)) continue;
      t.started = true;
      Result<bool> r = t.run->progress();
      if (!r.ok()) {
        t.client->health().ok();  // let the client record peer state first
        return r.status().withContext(t.client->who() + " in " + t.run->describe());
      }
      moved |= r.value();
      if (t.run->done()) {
        t.finished = true;
        --left;
        moved = true;
      }
    }
    return moved;
  };

  // A run blocked on a peer that failed after finishing this call (its notice) or exited
  // (probeLiveness: asked of the OS) fails after one more sweep: what the peer posted before it
  // went is still in the FIFOs.
  // Returns whether that sweep moved something.
  auto failBlockedOnLostPeers = [&](bool probeLiveness) -> Result<bool> {
    for (ProgressTask& t : tasks) {
      if (t.finished || !t.started) continue;
      peers.clear();
      t.run->waitingOn(peers);
      std::sort(peers.begin(), peers.end());
      peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
      Status mismatch = t.run->findMismatch(peers);
      if (!mismatch.ok()) {
        return mismatch.withContext(t.client->who() + " in " + t.run->describe());
      }
      for (int peer : peers) {
        std::optional<PeerFailure> failure = t.client->peerFailure(peer);
        if (!failure && (!probeLiveness || t.client->peerAlive(peer))) continue;
        ASSIGN_OR_RETURN(bool movedAfter, sweep());
        if (movedAfter) return true;
        if (failure) {
          return failure->status.withContext(t.client->who() + " in " + t.run->describe());
        }
        return remoteError(t.client->describeLoss(peer) + " while " + t.client->who() +
                           " was waiting on it in " + t.run->describe() + ", " + t.run->position());
      }
    }
    return false;
  };

  const bool yieldAtOnce = oversubscribed(tasks);
  const int64_t yieldNs = yieldAtOnce ? kCrowdedYieldNs : kYieldNs;
  bool crowdedSpin = false;  // this wait spins on a crowded host
  int64_t lastHealth = 0;
  while (left > 0) {
    ASSIGN_OR_RETURN(bool moved, sweep());
    if (moved) {
      if (waitSlot.shown()) waitSlot.clear();
      if (crowdedSpin) tCrowdedSpins.record(true);
      crowdedSpin = false;
      idleSince = 0;
      spins = 0;
      continue;
    }
    // A few polls before reading the clock at all: a slot in flight from a running peer lands
    // within a couple of them. No pause between them: a pause delays noticing it
    // (docs/performance-notes.md#polls-before-the-clock).
    if (!yieldAtOnce && ++spins < 8) continue;
    int64_t spinNs = 0;
    if (sharesCpuWithPeer(tasks)) {
      crowdedSpin = false;
    } else if (!yieldAtOnce) {
      spinNs = kSpinNs;
    } else {
      if (idleSince == 0) crowdedSpin = tCrowdedSpins.worthTrying();
      spinNs = crowdedSpin ? kCrowdedSpinNs : 0;
    }
    const int64_t now = nowNs();
    if (idleSince == 0) idleSince = now;
    if (lastLiveness == 0) lastLiveness = now;
    const int64_t idle = now - idleSince;
    if (idle < spinNs) {
      cpuRelax();
      continue;
    }
    if (crowdedSpin) tCrowdedSpins.record(false);
    crowdedSpin = false;
    if (now - lastHealth >= kHealthNs || idle >= yieldNs) {
      lastHealth = now;
      for (ProgressTask& t : tasks) {
        if (t.finished) continue;
        Status health = t.client->health();
        if (!health.ok()) {
          return health.withContext(t.client->who() + " in " + t.run->describe());
        }
        // A peer that failed before finishing this collective can never deliver its part.
        const CallDescriptor& call = t.run->call();
        if (call.coll == static_cast<uint8_t>(Collective::kSend)) continue;
        if (std::optional<PeerFailure> f = t.client->peerFailure(kAnyPeer);
            f && f->collectivesDone <= call.seq) {
          return f->status.withContext(t.client->who() + " in " + t.run->describe());
        }
      }
      const bool probeLiveness = now - lastLiveness > kLivenessNs;
      if (probeLiveness) {
        lastLiveness = now;
        publishWaits();
        for (ProgressTask& t : tasks) {
          if (t.finished) continue;
          if (Status links = t.client->checkLinks(); !links.ok()) {
            return links.withContext(t.client->who() + " in " + t.run->describe());
          }
        }
      }
      ASSIGN_OR_RETURN(bool movedAfter, failBlockedOnLostPeers(probeLiveness));
      if (movedAfter) {
        idleSince = 0;
        spins = 0;
        continue;
      }
    }
    if (timeoutNs > 0 && idle > timeoutNs) {
      for (ProgressTask& t : tasks) {
        if (t.finished || !ready(tasks, t)) continue;
        return timeoutError(t.client->who() + ": " + t.run->describe() + " made no progress for " +
                            std::to_string(timeout) + " s (BRAID_TIMEOUT); stuck at " +
                            t.run->position());
      }
    }
    if (idle < yieldNs) {
      sched_yield();
      continue;
    }
    if (!oneWaker) {
      timespec nap{0, kNapNs};
      nanosleep(&nap, nullptr);
      continue;
    }
    // Raise `sleeping`, then look once more: a post that raced with us is either seen here or
    // rings the Waker (see fifo.h).
    const uint32_t seq = sharedWaker->seq.load(std::memory_order_acquire);
    announceSleep(sharedWaker);
    Result<bool> recheck = sweep();
    if (recheck.ok() && !recheck.value()) sleepOnWaker(sharedWaker, seq, kSleepNs);
    sharedWaker->sleeping.store(0, std::memory_order_relaxed);
    if (!recheck.ok()) return recheck.status();
    if (recheck.value()) {
      idleSince = 0;
      spins = 0;
    }
  }
  return okStatus();
}

}  // namespace

Status runTasks(std::vector<ProgressTask>& tasks) {
  Status status = runTasksUntilDone(tasks);
  if (!status.ok()) {
    // The caller may free or rewrite its buffers once this returns, while peers may still read
    // what an unfinished run lent them (in this process, from freed memory): take it back first.
    for (ProgressTask& t : tasks) {
      if (t.started && !t.finished) {
        t.run->withdrawLent([&t](int peer) { return t.client->peerAlive(peer); });
      }
    }
  }
  return status;
}

}  // namespace braid
