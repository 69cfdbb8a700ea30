// Calibration: the cost-model constants that are measured on the machine rather than read from
// its topology.
//
// The probe (calibration_probe.h) runs small hand-made plans through the real host data path - the
// plan executor, the progress engine's waiting, the CPU kernels and the FIFO code the shared-memory
// transport uses - between two threads of this process, and derives:
//
//   stepUs        executor cost of one step that moves (almost) nothing, on one thread
//   hopUs         one FIFO hand-off between ranks running on two cores, beyond the two steps
//   crowdedHopUs  the same hand-off when ranks outnumber cores: four ranks on two cores pass data
//                 around a ring, each hop waiting for the receiver to get a core back from a rank
//                 that spins and yields (what every hop of 4 ranks on 2 cores pays): fitted so that
//                 the cost model's simulation of four ranks on two cores running a small ring
//                 all-reduce, call after call, takes as long as the real thing
//   crowdedPostUs the CPU such a rank spends per slot it posts (waking a peer that yields or
//                 sleeps): fitted the same way to the direct all-reduce over four channels
//   crowdedSwitchFactor  what a crowded rank's bytes cost, as a multiple, when its core last ran
//                 another rank (that rank's data evicted its own from the core's caches): fitted
//                 the same way, the two above known, to the median run of a ring all-reduce of
//                 1 MiB in 128 KiB chunks (measured on a 2-vCPU VM: 2.7-3.4 in seven calibrations;
//                 the fastest run instead read 2.0-2.5, and once 1; the model's choices on the
//                 all-reduce sweeps of perf/sweeps/ are the same anywhere in 2-3.4); a short
//                 all-reduce pays a share of it (CostModel::switchShare)
//   copy*GBps     kernels::copy on one thread, bytes per second
//   reduce*GBps   the float32 sum kernel on one thread, output bytes per second
//                 (*Cache: a 32 KiB chunk again and again; *Dram: buffers twice the LLC)
//   transferGBps  what a receiving step adds per byte when the slot it reads was filled by another
//                 core: a stream of 32 KiB slots between two threads, less the copy itself
//   copyLlcGBps   kernels::copy over a working set the last-level cache holds but a core's own
//                 caches do not (8 MiB, or half of cacheMiB when that is smaller); 0 where the
//                 cache is too small to tell (then the model serves the whole cache at the
//                 cache rate, as files written before this field do)
//   cacheMiB      the last-level cache as the data path sees it: the largest working set
//                 (doubling from 4 MiB) whose float32 sum still runs at least 1.5x its rate
//                 from memory; the topology's own figure when every size checked ran that fast
//                 or none did. A virtual machine may report the whole socket's L3 (508 MiB on
//                 one whose vCPUs share a 32 MiB one); the model counts the smaller of the two
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
struct Calibration {
  double stepUs = 0;
  double hopUs = 0;
  double crowdedHopUs = 0;
  double crowdedPostUs = 0;
  double copyCacheGBps = 0;
  double copyDramGBps = 0;
  double reduceCacheGBps = 0;
  double reduceDramGBps = 0;
  double copyLlcGBps = 0;  ///< optional: 0 = not measured
  double transferGBps = 0;
  double cacheMiB = 0;
  double crowdedSwitchFactor = 1;
  int cpus = 0;  ///< CPUs the measuring process could run on (1: no cross-core measurement)

  bool operator==(const Calibration&) const = default;
};

/// Where a calibration came from, for logs and tests.
enum class CalibrationSource { kMeasured, kCacheFile, kProcessCache };
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
/// What identifies "the same data path on the same host": the host hash, and the path, size and
/// modification time of the binary that holds this code.
std::string calibrationFingerprint(uint64_t hostHash);

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
