// The calibration probe: measures the constants of calibration.h. Latencies and the cross-core
// transfer come from hand-made plans run through the real host data path (PlanRun, runTasks, the
// CPU kernels, SendConnector and RecvConnector) by threads of this process - never the caller's
// own, whose CPU affinity it leaves alone - over FIFOs in process memory laid out as the
// shared-memory transport lays them out; copy and reduce rates from the kernels against the
// memory system. Takes about a second, once per host and build (then cached).
#pragma once

#include <cstdint>

#include "base/status.h"
#include "tuner/calibration.h"

namespace braid {

/// How the probe measures.
struct ProbeOptions {
  /// Bytes of the last-level cache; the memory-rate measurements use buffers twice as large (at
  /// least 16 MiB, at most 64 MiB) so that they run from memory, not from the cache.
  uint64_t llcBytes = 32ull << 20;
  /// Each measurement is many short runs of which a low quantile counts (a shared machine only
  /// ever makes a run slower); this multiplies their number.
  int repeats = 3;
  /// Scales every iteration count (tests use a small one).
  double effort = 1.0;
  /// Past this many seconds each remaining measurement runs once: on a host many times slower
  /// than it should be (a sanitizer build, a crowded machine) the ranks waiting for the
  /// calibration see it in seconds, not minutes. A normal host needs well under a second.
  double budgetSeconds = 5.0;
};

/// Measures this host. Errors only when the data path itself fails (a bug, not a slow machine).
Result<Calibration> measureCalibration(const ProbeOptions& options);

/// Calibration::hopUs alone, measured now (1-2 ms with one repeat): whether a cached
/// calibration still describes the host.
Result<double> measureHandOffUs(const ProbeOptions& options, double stepUs);

}  // namespace braid
