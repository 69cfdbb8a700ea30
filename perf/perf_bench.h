// braid-perf's per-rank work: create the communicators, sweep the sizes, time and verify each
// measurement, and (rank 0) print the table. Drives the library through include/braid.h; what the
// tuner would choose comes through src/core/tools_api.h.
#pragma once

#include <string>
#include <vector>

#include "braid.h"
#include "perf/perf_options.h"

namespace braid::perf {

/// What every rank of one run shares.
struct RunSpec {
  PerfOptions options;
  /// One communicator per entry, all ranks joining each: algorithms[i] ("" lets the tuner
  /// choose) is forced on the communicator of ids[i] through BRAID_ALGO.
  std::vector<braidUniqueId> ids;
  std::vector<std::string> algorithms;
  /// Parallel to algorithms: BRAID_CHUNK_BYTES and BRAID_NCHANNELS forced on each communicator
  /// (0: the tuner's). With --tune the last communicator forces nothing and is only asked what the
  /// tuner would choose.
  std::vector<uint32_t> chunkBytes;
  std::vector<int> channels;
  int nranks = 1;
  int nprocs = 1;
};

/// Runs one rank of the sweep on the calling thread. Returns 0, or 1 when some value was wrong on
/// some rank (every rank returns the same). A failing library call prints the call, its result and
/// braidGetLastError() on stderr and ends the process with status 2: its peers, blocked in the
/// same collective, then fail too instead of waiting for it.
int runRank(const RunSpec& spec, int rank);

/// Makes `count` unique ids (this process keeps their rendezvous listeners alive).
Expected<std::vector<braidUniqueId>> makeUniqueIds(size_t count);

/// In a launcher's world: joins it through braidCommInitFromEnv, and rank 0 makes `count` ids
/// that every process receives. Writes this process's launcher rank and world size.
Expected<std::vector<braidUniqueId>> shareUniqueIds(size_t count, int* worldRank, int* worldSize);

}  // namespace braid::perf
