// The sweep of braid-perf, run over another collective library (Open MPI, MPICH, Gloo) so that
// its numbers line up with Braid's: the same flags, message sizes, buffer layout, input values,
// correctness check, busbw factors and nccl-tests table. A library plugs in through PeerComm.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "perf/perf_data.h"
#include "perf/perf_error.h"
#include "perf/perf_options.h"

namespace braid::perf::peers {

/// The operands of one measurement (one size and placement), laid out as braid-perf lays them.
struct PeerOp {
  CheckSpec spec;  ///< collective, datatype, op, ranks, root and element counts
  unsigned char* send = nullptr;
  unsigned char* recv = nullptr;
  bool inPlace = false;
};

/// Runs the prepared operation once; every rank calls it the same number of times.
using PeerRunner = std::function<Outcome()>;

/// One rank's handle on a peer library's communicator.
class PeerComm {
 public:
  virtual ~PeerComm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// The library and its version, printed in the table header.
  virtual std::string description() const = 0;
  /// Gathers `bytes` bytes from every rank into `all`, in rank order.
  virtual Outcome allGather(const void* mine, void* all, size_t bytes) = 0;
  virtual Outcome barrier() = 0;
  /// Element offset, from the start of the single in-place buffer, of this rank's in-place
  /// output. The default is nccl-tests' (rank x recvInPlaceOffset); MPI's in-place
  /// reduce-scatter leaves the result at the start instead.
  virtual uint64_t inPlaceRecvOffset(const CheckSpec& spec) const;
  /// Whatever one operation needs, built once per size and placement (outside the timing).
  virtual Expected<PeerRunner> prepare(const PeerOp& op) = 0;
};

/// Rejects the options no peer program honours: -t above 1 and the sendrecv collective. (--np
/// and --algo are each program's own business.)
Outcome checkCommonOptions(const PerfOptions& options);

/// Runs the whole sweep on this rank; rank 0 prints the table and writes --json, whose "tool"
/// field is `program`. Returns 0, or 1 when some value was wrong on some rank.
Expected<int> runPeerSweep(PeerComm& comm, const PerfOptions& options, std::string_view program);

/// Parses argv with braid-perf's parser and checkCommonOptions. Returns true when the program
/// should run; otherwise it has printed the usage (--help, `extraUsage` appended) or the error,
/// and `exitStatus` is what the program should exit with (0 or 2).
bool parsePeerArgs(int argc, char** argv, std::string_view extraUsage, PerfOptions* options,
                   int* exitStatus);

}  // namespace braid::perf::peers
