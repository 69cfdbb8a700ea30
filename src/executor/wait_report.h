// What is stuck where: every thread blocked in runTasks for more than a liveness period publishes
// the calls it is in, the step and peer each waits on and since when; waitReport() renders them
// all. With BRAID_REPORT_SIGNAL set, that signal makes a watcher thread print the report to
// stderr: the question every hung job asks, answered without a debugger. The handler only writes
// a byte to a pipe (async-signal-safe); the watcher does the rest.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace braid {

/// One run a thread is blocked in, as the report shows it.
struct BlockedRun {
  std::string who;       ///< "rank 1/4"
  std::string call;      ///< "allreduce(count=1000, float, sum) #7 [ring]"
  std::string position;  ///< "lane 0 at step 3/5 (recvReduceCopy waiting on rank 2)"
};

/// A thread's entry in the report, from publish() until clear() or destruction. Not copyable.
class WaitSlot {
 public:
  WaitSlot() = default;
  ~WaitSlot() { clear(); }
  WaitSlot(const WaitSlot&) = delete;
  WaitSlot& operator=(const WaitSlot&) = delete;

  /// Shows `runs`, blocked without progress since blockedSinceNs (CLOCK_MONOTONIC).
  void publish(std::vector<BlockedRun> runs, int64_t blockedSinceNs);
  /// Removes the entry (the thread made progress or left); cheap when none is shown.
  void clear();
  bool shown() const { return id_ != 0; }

 private:
  uint64_t id_ = 0;
};

/// Every published wait of this process, one line per blocked run, with how long it has been
/// blocked; a line saying so when no thread is blocked.
std::string waitReport();

/// Makes `signo` print waitReport() (prefixed "[host:pid] BRAID wait report") to stderr. Idempotent
/// for the same signal in one process (a forked child installs its own watcher); a second,
/// different signal is an error, as is a signal that cannot be caught.
Status enableWaitReportSignal(int signo);

}  // namespace braid
