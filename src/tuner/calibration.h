// Calibration: the cost-model constants that are measured on the machine rather than read from
// its topology.
//
// The probe (calibration_probe.h) runs small hand-made plans through the real host data path - the
// plan executor, the progress engine's waiting, the CPU kernels and the FIFO code the shared-memory
// transport uses - between threads of this process, and times the kernels against the memory
// system. The crowded constants are fitted instead: each is the value at which the cost model's
// simulation of four ranks on two cores takes as long as those ranks really took.
//
// Rank 0 measures (or loads the per-host cache file) and every rank receives its values over the
// bootstrap, so all ranks build the same tuner. The cache lives in $XDG_CACHE_HOME/braid (or
// ~/.cache/braid), one small text file per host and binary (calibration-HOST-BINARY.txt), which
// records the binary's size and modification time so that a rebuilt data path is measured again.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace braid {

/// Measured constants (units in the names). Plain data: it travels between ranks as text.
/// The copy and reduce rates are of one thread, *Cache ones over a 32 KiB chunk again and again,
/// *Dram ones over buffers twice the last-level cache.
struct Calibration {
  /// The executor's cost of one step that moves (almost) nothing, on one thread.
  double stepUs = 0;
  /// One FIFO hand-off between ranks running on two cores, beyond the two steps.
  double hopUs = 0;
  /// The same hand-off when ranks outnumber cores, each hop waiting for the receiver to get a
  /// core back from a rank that spins and yields: fitted so that the cost model's simulation of
  /// four ranks on two cores running a small ring all-reduce, call after call, takes as long as
  /// the real thing.
  double crowdedHopUs = 0;
  /// The CPU such a crowded rank spends per slot it posts (waking a peer that yields or sleeps):
  /// fitted the same way to the direct all-reduce over four channels.
  double crowdedPostUs = 0;
  double copyCacheGBps = 0;    ///< kernels::copy, bytes copied per second
  double copyDramGBps = 0;     ///< kernels::copy, bytes copied per second
  double reduceCacheGBps = 0;  ///< the float32 sum kernel, output bytes per second
  double reduceDramGBps = 0;   ///< the float32 sum kernel, output bytes per second
  /// kernels::copy over a working set the last-level cache holds but a core's own caches do not
  /// (8 MiB, or half of cacheMiB when that is smaller); optional: 0 where the cache is too small
  /// to tell (the model then serves the whole cache at the cache rate, as for files written
  /// before this field).
  double copyLlcGBps = 0;
  /// What a receiving step adds per byte when another core filled the slot it reads: a stream
  /// of 32 KiB slots between two threads, less the copy itself.
  double transferGBps = 0;
  /// The last-level cache as the data path sees it: the largest working set (doubling from
  /// 4 MiB) whose float32 sum still runs at least 1.5x its rate from memory; the topology's own
  /// figure when every size checked ran that fast or none did. The model counts the smaller of
  /// this and the topology's, which a virtual machine may overstate
  /// (docs/performance-notes.md#the-cache-as-the-data-path-sees-it).
  double cacheMiB = 0;
  /// What a crowded rank's bytes cost, as a multiple, when its core last ran another rank (whose
  /// data evicted its own from the core's caches): fitted the same way, the two crowded terms
  /// above known, to the median run of a ring all-reduce of 1 MiB in 128 KiB chunks
  /// (docs/performance-notes.md#the-crowded-switch-factor). A short all-reduce pays a share of it
  /// (CostModel::switchShare).
  double crowdedSwitchFactor = 1;
  int cpus = 0;  ///< CPUs the measuring process could run on (1: no cross-core measurement)

  bool operator==(const Calibration&) const = default;
};

/// Where a calibration came from, for logs and tests.
enum class CalibrationSource { kMeasured, kCacheFile, kProcessCache };
/// The name logs print for `source`.
const char* calibrationSourceName(CalibrationSource source);

/// Checks that every constant is finite, positive and plausible; the error names the field.
Status validateCalibration(const Calibration& calibration);

/// "key value" lines (the cache file format; also what rank 0 sends to the others).
std::string formatCalibration(const Calibration& calibration, const std::string& fingerprint);
/// Parses formatCalibration's text. Fails on a missing, unknown or malformed field, or when the
/// recorded fingerprint differs from `fingerprint` (a stale cache), naming `origin` and the line.
Result<Calibration> parseCalibration(const std::string& text, const std::string& fingerprint,
                                     const std::string& origin);

/// The folder of the cache: $XDG_CACHE_HOME/braid, else $HOME/.cache/braid ("" when neither is
/// set).
std::string defaultCalibrationDir();
/// What identifies this build of the library: the path, size and modification time of the binary
/// that holds this code (the library, or a program it is linked into).
std::string buildFingerprint();
/// What identifies "the same data path on the same host": the host hash and buildFingerprint().
std::string calibrationFingerprint(uint64_t hostHash);

/// A host's calibration and where it came from.
struct CalibrationResult {
  Calibration calibration;
  CalibrationSource source = CalibrationSource::kMeasured;
  std::string cacheFile;  ///< the file read or written ("" without a cache folder)
  std::string note;       ///< why a cache file was not used or not written, when it was not
};

/// The calibration of this host: from this process's memory, else from `cacheDir`'s file for
/// `hostHash`, else measured now (and written there; a folder that cannot be written is no error,
/// the note says why). An empty cacheDir disables the file cache. llcBytes (0: unknown) sizes the
/// streaming measurements (see ProbeOptions).
Result<CalibrationResult> hostCalibration(const std::string& cacheDir, uint64_t hostHash,
                                          uint64_t llcBytes);

/// Forgets the calibrations this process holds (tests).
void clearProcessCalibrations();

}  // namespace braid
