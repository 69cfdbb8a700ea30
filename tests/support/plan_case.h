// Test support: one collective's plans on every rank with their buffers, inputs and expected
// outputs, laid out as the device executor reads them (DeviceCall), for tests that run plans on
// host threads standing in for the kernel (kernels/host_lane_runner.h). int32 sums, so every
// result is exact; in place as the API lays buffers out.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/plan.h"
#include "base/status.h"
#include "kernels/cuda/device_abi.h"
#include "kernels/executor_protocol.h"
#include "kernels/ll_protocol.h"

namespace braid::testing {

struct PlanCaseSpec {
  Collective coll = Collective::kAllReduce;  ///< kSend: rank 0 sends to rank nranks - 1
  Algorithm algo = Algorithm::kRing;
  int nranks = 2;
  uint64_t count = 0;  ///< elements per rank (per peer for all-to-all, per block for gathers)
  int root = 0;
  bool inPlace = false;
  uint32_t chunkBytes = 1024;
  int nchannels = 1;
  /// The call check lane goes on this channel (as the communicator adds it); -1: none.
  int callCheckChannel = -1;
  std::vector<int> hosts;  ///< PlanRequest::hosts (the hierarchical algorithm)
  uint32_t seq = 0;        ///< the calls' sequence number
};

/// "allreduce/ring n=3 count=273 ch=2 chunk=1024 inplace".
std::string describeSpec(const PlanCaseSpec& spec);

/// Every collective (and a Send/Recv pair) with every algorithm that serves it on `nranks`:
/// `count` elements in chunks of `chunkBytes` over 2 channels, the call check on channel 2,
/// roots rotating, every other case in place, call k with sequence number firstSeq + k.
std::vector<PlanCaseSpec> everyCollectiveAndAlgorithm(int nranks, uint64_t count,
                                                      uint32_t chunkBytes, uint32_t firstSeq = 0);

class PlanCase {
 public:
  /// Builds every rank's plan (an error when the algorithm cannot serve the request) and fills
  /// the inputs.
  static Result<std::unique_ptr<PlanCase>> make(const PlanCaseSpec& spec);

  int nranks() const { return spec_.nranks; }
  const Plan& plan(int rank) const { return ranks_[rank].plan; }
  /// Whether `rank` has anything to run (a Send/Recv case leaves the ranks between idle).
  bool runs(int rank) const { return !ranks_[rank].flat.lanes.empty(); }
  /// The call `rank` runs: its plan and buffers (valid while this object lives).
  gpu::DeviceCall call(int rank);
  /// "" when `rank`'s output holds what the collective defines, else the first mismatches.
  std::string check(int rank) const;

 private:
  struct RankData {
    Plan plan;
    gpu::FlatPlan flat;
    std::vector<int32_t> buffer;  ///< output, and input too in place
    std::vector<int32_t> input;   ///< out of place
    std::vector<char> scratch;
    const int32_t* inputAt = nullptr;
    int32_t* outputAt = nullptr;
    CallDescriptor descriptor;
  };

  explicit PlanCase(const PlanCaseSpec& spec) : spec_(spec) {}
  int32_t expected(int rank, uint64_t index) const;
  bool checksOutput(int rank) const;

  PlanCaseSpec spec_;
  std::vector<RankData> ranks_;
};

/// FIFOs in host memory between every pair of ranks on every channel, in the layout the device
/// executor reads (DeviceFifo), with each rank's send and receive tables.
class HostFifoMesh {
 public:
  /// nlines > 0: every FIFO also has a low-latency ring of that many lines (ll_protocol.h).
  HostFifoMesh(int nranks, int maxChannels, uint32_t nslots, uint32_t slotBytes,
               uint32_t nlines = 0);
  /// ExecutorArgs for `rank` (its tables, a control block and an error latch of its own).
  gpu::ExecutorArgs args(int rank);
  /// The ring ends of `rank`, laid out as args(rank)'s FIFO tables.
  gpu::LlArgs llArgs(int rank);
  /// Lines `sender` wrote to `receiver` on `channel`, and those the receiver has credited back.
  uint64_t linesSent(int sender, int receiver, int channel) const;
  uint64_t linesCredited(int sender, int receiver, int channel) const;
  const gpu::DeviceControl& control(int rank) const { return *controls_[rank]; }
  /// The slots posted into the FIFO from `sender` to `receiver` on `channel` (its head) and
  /// freed (its tail).
  uint64_t head(int sender, int receiver, int channel) const;
  uint64_t tail(int sender, int receiver, int channel) const;

 private:
  struct Fifo {
    alignas(64) uint64_t head = 0;
    alignas(64) uint64_t tail = 0;
    std::vector<SlotHeader> headers;
    std::vector<char> data;
    alignas(64) uint64_t credits = 0;
    std::vector<gpu::LlLine> lines;
  };
  Fifo& fifo(int sender, int receiver, int channel) {
    return *fifos_[(size_t(sender) * nranks_ + receiver) * maxChannels_ + channel];
  }
  const Fifo& fifo(int sender, int receiver, int channel) const {
    return *fifos_[(size_t(sender) * nranks_ + receiver) * maxChannels_ + channel];
  }

  int nranks_;
  int maxChannels_;
  std::vector<std::unique_ptr<Fifo>> fifos_;
  std::vector<std::vector<gpu::DeviceFifo>> tables_;  ///< per rank: sends, then receives
  std::vector<std::vector<gpu::LlFifo>> llTables_;    ///< per rank: sends, then receives
  std::vector<std::unique_ptr<gpu::DeviceControl>> controls_;
  std::vector<std::unique_ptr<uint32_t>> latches_;
};

/// Every rank of `pc` that runs, running its lanes at once over `mesh` (runLanesOnHost), a thread
/// per rank standing in for its GPU; with `lines`, the low-latency protocol's executor over the
/// mesh's rings.
void runOnHostLanes(PlanCase& pc, HostFifoMesh& mesh, bool lines = false);

/// The descriptor of AllReduce call `seq` of `count` elements of `dtype`: what the protocol tests
/// stamp their slots and lines with.
CallDescriptor allReduceCall(uint32_t seq, braidDataType_t dtype, uint64_t count);

}  // namespace braid::testing
