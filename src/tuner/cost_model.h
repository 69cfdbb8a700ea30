// The cost model: a predicted time for every (collective, algorithm, nranks, bytes, chunk,
// channels), found by building the Plan each rank would run and simulating all of them together on
// a model of this job's machine (plan_cost.h). Following the plans, rather than closed forms, gets
// each algorithm's real shape right: the ring's 2(n-1) steps per round and its pipelining, the
// double binary tree's two trees on two channels, the folds of rhd and rd at non-powers of two,
// direct's n-1 sends per chunk.
//
// The constants: alpha, a FIFO hand-off (measured) plus the topology's link latency; a per-step
// overhead (measured); beta, per byte, the cross-core transfer, copy and memory rates (measured)
// weighted by how much of the call's working set - every rank's buffers and the FIFO slots it
// cycles through - the caches hold, and between hosts the NIC's bandwidth; gamma, the reduce rate
// (measured); and where ranks outnumber cores, the crowded terms fitted to real runs
// (calibration.h). Where each comes from: docs/performance-notes.md#the-cost-models-constants.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
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
/// The shape of `topology`'s host; the default link models (topology.h) stand in for a socket
/// crossing or network link it does not describe.
HostShape hostShapeOf(const Topology& topology);

/// Everything rank 0 measures or reads and every rank must share, so all build the same tuner.
struct ModelConstants {
  Calibration calibration;
  HostShape host;

  bool operator==(const ModelConstants&) const = default;
};
/// A fixed-size, bit-exact little-endian encoding for the bootstrap.
constexpr size_t kModelConstantsWireBytes = 19 * 8;
/// Writes kModelConstantsWireBytes bytes at `out`.
void encodeModelConstants(const ModelConstants& constants, uint8_t* out);
/// Reads what encodeModelConstants wrote, bit for bit.
ModelConstants decodeModelConstants(const uint8_t* in);

/// Predicts the time of one call of every algorithm and shape by simulating its plans; copies
/// share what they remember of long messages.
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
  /// The hosts the ranks span.
  int hosts() const { return static_cast<int>(ranksOnHost_.size()); }
  /// The most ranks per core of any host.
  double crowding() const;
  /// Predicted microseconds of one call of `coll` moving `bytes` per rank (as the API counts
  /// them: count * element size), root 0 for rooted collectives. Send and receive are not
  /// modelled.
  Result<double> predict(Collective coll, Algorithm algo, uint64_t bytes, uint32_t chunkBytes,
                         int nchannels) const;

  /// An all-reduce over hosts alike whose ranks (rd and rhd: an even count a host) or hosts
  /// (hier_rhd) beyond the largest power of two fold into others first, priced from machines of
  /// that power of two. rd and rhd: the slower of that many ranks in hosts like these and in
  /// hosts of half their ranks (folded hosts work with half), plus the fold's reduce into a
  /// neighbour and broadcast back between two ranks of a host. hier_rhd: that many hosts with
  /// NICs at 2/3 the rate (a host that took over another's sends 1.5x the bytes), plus two
  /// network latencies. predict() prices such calls so from kFoldPricedFromRanks ranks on; an
  /// error for any other call.
  Result<double> predictFolded(Collective coll, Algorithm algo, uint64_t bytes, uint32_t chunkBytes,
                               int nchannels) const;

  /// The longest message predict simulates whole with this chunk and channel count; longer ones
  /// are priced from simulations of spans that every longer size shares (so a caller costing
  /// many sizes keeps those on one model). Depends on the rank count and the arguments alone.
  uint64_t wholeUpTo(Collective coll, Algorithm algo, uint32_t chunkBytes, int nchannels) const;

  /// One line for the log: hosts, cores, ranks, and the constants in use.
  std::string describe() const;
  /// Bytes that identify everything predictions depend on: equal keys, equal predictions.
  const std::string& key() const { return key_; }

 private:
  /// The plans of one call: every rank's, or on a machine that repeats host by host (period_)
  /// where the plans repeat too, the first host's alone (periodic).
  struct CallPlans {
    std::vector<Plan> plans;
    std::optional<RankSymmetry> periodic;  ///< how the other hosts map onto the first's plans
  };
  /// The span of a long message: simulated at one and two spans and extrapolated past them.
  uint64_t spanOf(Collective coll, Algorithm algo, uint32_t chunkBytes, int nchannels) const;
  /// The plans of a call; from kRoundedFromRanks ranks on, an error where they do not repeat host
  /// by host and all of them hold over `maxSteps` steps (the call is then not priced).
  Result<CallPlans> plansFor(Collective coll, Algorithm algo, uint64_t bytes, uint32_t chunkBytes,
                             int nchannels, uint64_t maxSteps) const;
  /// The most steps of any plan among the first host's (given) and the last host's: ranks that
  /// fold into a neighbour (rd, rhd) or hosts that fold into another (hier_rhd) have few, so the
  /// first host alone may hold none of the plans that cost the simulation most.
  size_t largestPlanSteps(PlanRequest request, const std::vector<Plan>& firstHost) const;
  /// plansFor, shared with the last few callers that asked for the same call: a long message's
  /// spans are simulated once per cache tier, and their plans need building once.
  Result<std::shared_ptr<const CallPlans>> recentPlansFor(Collective coll, Algorithm algo,
                                                          uint64_t bytes, uint32_t chunkBytes,
                                                          int nchannels) const;
  /// simulatePlans, or simulatePeriodicPlans for periodic plans.
  static Result<double> run(const CallPlans& plans, const SimMachine& machine);
  /// slotFootprint of the whole machine.
  uint64_t machineFootprint(const CallPlans& plans) const;
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
  /// The share of the crowded switch factor a short all-reduce pays: none while the buffers and
  /// slots of the ranks sharing a core stay well inside its cache, all once they fill half.
  double switchShare(Collective coll, uint64_t bytes, uint64_t slotBytes) const;

  /// Whether predictFolded prices this call.
  bool foldsBeyondPowerOfTwo(Collective coll, Algorithm algo) const;
  /// The machines predictFolded prices its parts on.
  enum class FoldPart : uint8_t {
    kRanksToPowerOfTwo,      ///< a power of two of ranks in hosts like the first
    kHalfHostsToPowerOfTwo,  ///< the same in hosts of half the ranks, as folded hosts work
    kHostsToPowerOfTwo,      ///< a power of two of hosts like the first, NICs at 2/3 the rate
    kPairInHost,             ///< two ranks of one host
  };
  /// The model of one part, made on first use and kept in the memo.
  Result<std::shared_ptr<const CostModel>> foldModel(FoldPart part) const;

  /// Simulations of long messages, shared by copies of the model.
  struct Memo {
    /// predictFolded's models, by FoldPart; a mutex of their own, as their predictions lock
    /// their own memos.
    std::mutex foldMutex;
    std::array<std::shared_ptr<const CostModel>, 4> foldModels;
    std::mutex mutex;
    std::map<std::tuple<Collective, Algorithm, uint64_t, uint32_t, int, int>, double> times;
    std::map<std::tuple<Collective, Algorithm, uint64_t, uint32_t, int>, uint64_t> slots;
    /// The plans built last, newest first: a long message's two spans (a few at most, for they
    /// can be large).
    std::vector<std::pair<std::tuple<Collective, Algorithm, uint64_t, uint32_t, int>,
                          std::shared_ptr<const CallPlans>>>
        recentPlans;
  };

  ModelConstants constants_;
  SimMachine machine_;  ///< byte costs left at zero; machineWith() fills them
  std::vector<int> ring_;
  std::vector<int> coresOfHost_;
  int maxRanksPerHost_ = 1;
  std::vector<int> ranksOnHost_;
  /// Ranks per host where the machine repeats host by host (hosts contiguous in rank order and
  /// alike, rings in rank order), else 0: then a call's plans are priced from one host's.
  int period_ = 0;
  std::vector<RankPlacement> firstHost_;  ///< where period_ > 0: the first host's ranks
  std::string key_;
  std::shared_ptr<Memo> memo_ = std::make_shared<Memo>();
};

}  // namespace braid
