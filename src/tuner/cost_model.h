// The cost model: a predicted time for every (collective, algorithm, nranks, bytes, chunk,
// channels), found by building the Plan each rank would run and simulating all of them together on
// a model of this job's machine (plan_cost.h). Following the plans, rather than closed forms, gets
// each algorithm's real shape right: the ring's 2(n-1) steps per round and its pipelining, the
// double binary tree's two trees on two channels, the folds of rhd and rd at non-powers of two,
// direct's n-1 sends per chunk.
//
// The constants, and where each comes from:
//   alpha  per-message latency = hopUs (measured: a FIFO hand-off between two cores, calibration.h)
//          + the link's latency from the topology: a socket crossing (topology.cc, Intel MLC
//          remote-vs-local) between packages, NIC to fabric to NIC between hosts
//   per-step overhead = stepUs (measured: the executor's cost of a step that moves nothing)
//   beta   per-byte transfer: 1 / transfer rate for every slot a step reads (measured: a FIFO
//          stream of 32 KiB slots between two cores) + 1 / copy rate for every output it writes
//          (measured: kernels::copy on a cached chunk; the part of a step's chunk in and chunk
//          out per channel that overflows one core's cache, from the topology's level below
//          the LLC, goes at the memory rate instead) + what memory adds for every operand in
//          the caller's buffers (measured: the copy over buffers twice the LLC), weighted by the
//          share of the call's working set the last-level cache (size from the topology) cannot
//          hold. The working set is every rank's buffers plus the FIFO slots the call cycles
//          through (from its plans: per connector, min(FIFO depth, items) x its largest chunk,
//          plan_cost.h), since slots occupy the same cache: large chunks on many channels push
//          a call that would fit out of it; between hosts also 1 / the NIC's bandwidth
//          (topology: the port speed, else the default network link), one transfer at a time
//          per NIC
//   gamma  per-byte reduction = 1 / reduce rate (measured: the float32 sum kernel, cached)
//   oversubscription: the ranks of a host share min(cores of the host, cores the ranks are bound
//          to) cores (topology + every rank's Locality; where each is bound to a single core,
//          the distinct cores they name, each rank on its own). Where they outnumber them, each
//          rank keeps a core and runs on it until it must wait (plan_cost.h); every hop costs
//          crowdedHopUs (fitted so that this simulation of four ranks running a small ring
//          all-reduce on two cores takes as long as the real thing, calibration.h), every slot
//          posted costs its sender crowdedPostUs of CPU (fitted likewise to the direct
//          all-reduce over four channels), and a step that follows another rank's on its core
//          pays its bytes crowdedSwitchFactor times (fitted likewise to a 1 MiB ring
//          all-reduce in 128 KiB chunks)
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/plan.h"
#include "base/status.h"
#include "topology/ordering.h"
#include "topology/topology.h"
#include "tuner/calibration.h"
#include "tuner/plan_cost.h"

namespace braid {

/// What the model reads from a host's topology. Rank 0's host stands for every host of the job
/// (clusters are built of identical servers); only the cores the ranks may use come from each
/// rank's own Locality.
struct HostShape {
  int cores = 1;
  uint64_t llcBytes = 0;        ///< the largest CPU cache (0: unknown, 32 MiB assumed)
  uint64_t coreCacheBytes = 0;  ///< the largest cache below it, one core's (0: unknown, 1 MiB)
  double socketCrossingUs = 0;  ///< between two packages of the host
  double networkLatencyUs = 0;  ///< host to host: NIC to fabric and fabric to NIC
  double networkGBps = 0;       ///< one NIC, one direction

  bool operator==(const HostShape&) const = default;
};
HostShape hostShapeOf(const Topology& topology);

/// Everything rank 0 measures or reads and every rank must share, so all build the same tuner.
struct ModelConstants {
  Calibration calibration;
  HostShape host;

  bool operator==(const ModelConstants&) const = default;
};
/// A fixed-size, bit-exact little-endian encoding for the bootstrap.
constexpr size_t kModelConstantsWireBytes = 19 * 8;
void encodeModelConstants(const ModelConstants& constants, uint8_t* out);
ModelConstants decodeModelConstants(const uint8_t* in);

class CostModel {
 public:
  CostModel() = default;
  /// placements[r] describes rank r (host and locality); ring is the communicator's ring order
  /// (empty: identity); nslots the FIFO depth in messages between hosts, shmBudgetBytes the
  /// payload bytes a rank keeps in flight within a host (BRAID_FIFO_BYTES; 0: nslots messages
  /// there too).
  static Result<CostModel> create(const ModelConstants& constants,
                                  const std::vector<RankPlacement>& placements,
                                  std::vector<int> ring, int nslots, uint64_t shmBudgetBytes = 0);

  int nranks() const { return machine_.nranks; }
  /// Predicted microseconds of one call of `coll` moving `bytes` per rank (as the API counts
  /// them: count * element size), root 0 for rooted collectives. Send and receive are not
  /// modelled.
  Result<double> predict(Collective coll, Algorithm algo, uint64_t bytes, uint32_t chunkBytes,
                         int nchannels) const;

  /// One line for the log: hosts, cores, ranks, and the constants in use.
  std::string describe() const;
  /// Bytes that identify everything predictions depend on: equal keys, equal predictions.
  const std::string& key() const { return key_; }

 private:
  /// Every rank's plan of one call.
  Result<std::vector<Plan>> plansFor(Collective coll, Algorithm algo, uint64_t bytes,
                                     uint32_t chunkBytes, int nchannels) const;
  Result<double> simulate(Collective coll, Algorithm algo, uint64_t bytes, uint32_t chunkBytes,
                          int nchannels, const SimMachine& machine) const;
  /// The FIFO slot bytes a long call of this candidate keeps busy (plan_cost.h), remembered.
  Result<uint64_t> longSlotFootprint(Collective coll, Algorithm algo, uint64_t span,
                                     uint32_t chunkBytes, int nchannels) const;
  /// Where the caller's buffers are served from: the shares of their traffic that the last-level
  /// cache and memory serve (the rest the cores' own caches do).
  struct BufferTiers {
    double llc = 0;
    double memory = 0;
  };
  /// simulate() with every caller-buffer byte served by one tier (0: the cores' caches, 1: the
  /// last-level cache, 2: memory), each result kept.
  Result<double> remembered(Collective coll, Algorithm algo, uint64_t bytes, uint32_t chunkBytes,
                            int nchannels, int tier) const;
  /// Where a call's traffic is served from, its FIFOs keeping `slotBytes` of slots busy.
  BufferTiers bufferTiers(Collective coll, Algorithm algo, uint64_t bytes,
                          uint64_t slotBytes) const;
  /// The share of a candidate's kernel traffic (a chunk in and one out per channel) that one
  /// core's own cache holds.
  double inCoreShare(uint64_t bytes, uint32_t chunkBytes, int nchannels) const;
  SimMachine machineWith(BufferTiers tiers, double inCore) const;
  /// The most ranks per core of any host.
  double crowding() const;
  /// The share of the crowded switch factor a short all-reduce pays: none while the buffers and
  /// slots of the ranks sharing a core stay well inside its cache, all once they fill half.
  double switchShare(Collective coll, uint64_t bytes, uint64_t slotBytes) const;

  /// Simulations of long messages, shared by copies of the model.
  struct Memo {
    std::mutex mutex;
    std::map<std::tuple<Collective, Algorithm, uint64_t, uint32_t, int, int>, double> times;
    std::map<std::tuple<Collective, Algorithm, uint64_t, uint32_t, int>, uint64_t> slots;
  };

  ModelConstants constants_;
  SimMachine machine_;  ///< byte costs left at zero; machineWith() fills them
  std::vector<int> ring_;
  std::vector<int> coresOfHost_;
  int maxRanksPerHost_ = 1;
  std::vector<int> ranksOnHost_;
  std::string key_;
  std::shared_ptr<Memo> memo_ = std::make_shared<Memo>();
};

}  // namespace braid
