// Plan cost: how long the plans of one collective take on a modelled machine, found by running
// every rank's Plan step by step in simulated time.
//
// The machine: each rank is one thread that executes its lanes' steps one at a time (as the host
// executor does); a step may start once the slots it receives have arrived and the FIFOs it sends
// to have room (nslots messages between hosts; within a host 64 messages and the plan's send window
// of payload above 4 KiB, as the shared-memory FIFOs take them); it then occupies its rank for
// stepUs plus its bytes at the copy or reduce rate, and what it sends arrives its host's hopUs
// (plus the link's latency) after it ends. Where a host's ranks outnumber its cores, each rank
// keeps one of them (the one it is bound to, else the host's k-th rank core k mod cores, as the OS
// scheduler leaves a task where it runs) and a step waits for its core. A rank keeps its core while
// its next step is ready by the time the last one ends, as the executor runs on until it must wait;
// one that waits leaves the core to the other, as ranks that yield while they wait do (the sweeps
// bear this out: docs/performance-notes.md#ranks-keep-their-cores). A step that follows another
// rank's on its core pays its bytes switchFactor times (its data were evicted from the core's
// caches), and, where every core has as many ranks (they then stay put), a slot from a rank on the
// same core is received without the cross-core transfer cost; hand-offs cost what a crowded host's
// cost (the receiver must first get a core back from a rank that spins and yields) - that is what
// makes 4 ranks on 2 cores slow on every hop and halves their bandwidth.
// Transfers between hosts occupy the sending host's network link for bytes / bandwidth, one at a
// time, and arrive a link latency later.
//
// The two halves of a SendRecv step are separate tasks, as the executor progresses them. The
// simulation is deterministic: the same plans and machine give the same time, bit for bit.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "algorithms/plan.h"
#include "base/status.h"

namespace braid {

/// What moving bytes costs a rank's CPU (microseconds per byte); a step pays each per byte it
/// moves.
struct ByteCosts {
  double copy = 0;    ///< for every output beyond the reduction's (all of them without one)
  double reduce = 0;  ///< for every combination of two operands
  /// For every slot it receives: the data sits in another core's cache (not where the sender
  /// stays on the receiver's core, see above).
  double transfer = 0;
  /// For every operand in a caller's buffer or scratch but those the lane's previous step has
  /// just written: what memory adds over the caches when the call's buffers do not fit them.
  double user = 0;
};

/// One direction between two ranks. A transfer occupies `stage` (when it has one), then `wire`,
/// each a serial resource: the device path's copy into pinned host memory then the network, so
/// one slot's copy overlaps the previous slot's time on the wire.
struct PairLink {
  double latencyUs = 0;       ///< added to every transfer (beyond the machine's hopUs)
  int wire = -1;              ///< index of the serial resource (a host's network link) it occupies
  double wireUsPerByte = 0;   ///< how long each byte occupies the wire
  int stage = -1;             ///< serial resource occupied before the wire (-1: none)
  double stageUsPerByte = 0;  ///< how long each byte occupies the stage
};

/// The modelled machine the plans run on (see above).
struct SimMachine {
  int nranks = 1;
  std::vector<int> hostOf;  ///< rank -> host index (0..hosts-1)
  std::vector<int> cores;   ///< per host: cores its ranks share (0: one per rank)
  /// Per rank: the core of its host (0..cores-1) it is bound to, or -1 (unbound: the host's k-th
  /// unbound rank runs on core k mod cores). Empty: all unbound.
  std::vector<int> coreOf;
  std::vector<double> hopUs;   ///< per host: from a post to the slot being visible to its receiver
  std::vector<double> postUs;  ///< per host: CPU per slot posted (waking the peer); empty: 0
  int nslots = 4;              ///< FIFO depth in messages of a connector between hosts
  /// Payload bytes a rank keeps in flight within a host (BRAID_FIFO_BYTES), shared among the
  /// connectors it sends on (sendWindowFor; payloads up to kLinePayloadBytes ride in the FIFO's
  /// lines and take none), up to kHostFifoMessages messages each. 0: nslots messages, as between
  /// hosts.
  uint64_t shmBudgetBytes = 0;
  double stepUs = 0;  ///< CPU cost of executing any step (or one half of a SendRecv)
  /// On a crowded host: what a step's byte costs are multiplied by when its core last ran another
  /// rank's step.
  double switchFactor = 1;
  ByteCosts bytes;
  std::vector<PairLink> links;  ///< nranks x nranks, [from * nranks + to]; empty: linkOf
  /// Where `links` is empty: the link from one rank to another, computed (a cluster of thousands
  /// of ranks has no room for n^2 entries); empty too: all local.
  std::function<PairLink(int from, int to)> linkOf;
  int wires = 0;  ///< number of serial link resources (wires and stages)
};

/// Microseconds from the moment all ranks start until the last one finishes. plans[r] is rank r's
/// plan of the same call. Fails when the plans cannot finish (a deadlock: a bug in the plans).
Result<double> simulatePlans(const std::vector<Plan>& plans, const SimMachine& machine);

/// How the ranks beyond the first P run the first P ranks' plans (simulatePeriodicPlans).
enum class RankSymmetry : uint8_t {
  /// Rank r + kP runs rank r's plan with every peer moved by kP (mod nranks): rings, trees
  /// numbered host by host.
  kShift,
  /// Rank r ^ m (m a multiple of P; P and nranks powers of two) runs rank r's plan with every
  /// peer XORed with m: recursive doubling and halving, whose partners differ in one bit.
  kXor,
};

/// simulatePlans for a machine whose ranks repeat with period P = plans.size() (P divides
/// machine.nranks): every rank outside the first P runs the plan of one inside, its peers mapped
/// by `symmetry` with the same bytes, and its host, links and wires are that rank's mapped the
/// same way. Then every image of rank r does at the same moment what rank r does, so following
/// ranks 0..P-1 alone - a slot rank r takes from rank q is the one q's image in 0..P-1 sent to
/// r's image under the same map - gives the whole machine's time with P plans in memory instead
/// of nranks. A ring over hosts of P ranks at 16k ranks is priced from 8 plans this way.
/// machine.hostOf covers every rank; the caller vouches for the symmetry (cluster_model.h checks
/// it on samples).
Result<double> simulatePeriodicPlans(const std::vector<Plan>& plans, const SimMachine& machine,
                                     RankSymmetry symmetry = RankSymmetry::kShift);

/// Frees the tables this thread's simulations hand on to the next (a ring at hundreds of ranks
/// leaves megabytes in them): for a caller done simulating for a while, as the tuner is after its
/// grid.
void releaseSimulationTables();

/// Messages in flight per connector within a host when SimMachine::shmBudgetBytes is set (the
/// shared-memory FIFO's lines).
constexpr int kHostFifoMessages = 64;

/// Bytes of FIFO slot memory the plans touch: for every connector (sender, receiver, channel),
/// its largest item times the slots it uses, min(nslots, items it carries), or within a host
/// the bytes it carries up to its send window. Slots are reused in turn, so this is what the
/// call's FIFOs keep in the caches next to the caller's buffers.
uint64_t slotFootprint(const std::vector<Plan>& plans, const SimMachine& machine);

/// CPU microseconds one step costs on `machine` (both halves of a SendRecv together).
double stepCpuUs(const Step& step, const SimMachine& machine);

}  // namespace braid
