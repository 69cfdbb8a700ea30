// A symbolic simulator: runs every rank's plan of one collective together and proves the result.
//
// Each rank's buffers hold symbolic elements instead of numbers. For reductions an element is a
// partial sum: the set of ranks whose contributions it holds, the index it belongs to, whether it
// was finalized (the Avg division), and a fingerprint of the order in which it was combined. For
// data movement an element is a token (origin, index). The combine rules catch what numbers could
// hide: adding two partials of different indices, counting a rank twice, reducing after finalize,
// finalizing twice or finalizing a partial that is still missing ranks, reading memory nobody
// wrote. The reduction is treated as commutative but not associative, so all-reduce outputs must
// carry the same fingerprint on every rank: the bitwise-identical results the API promises.
//
// Connectors are FIFOs of `nslots` slots keyed by (sender, receiver, channel). Lanes progress in a
// seeded random interleaving (the two halves of a SendRecv step independently, in either order); a
// dependent step fires when all its inputs have arrived and every FIFO it sends to has room, as
// the executors run it (they reduce from the received slot straight into the slot they send). A
// transfer of 0 bytes posts and takes no slot, except in a call check (kStepCallCheck), whose
// empty slot stands for the descriptor the executors compare. When nothing can fire before every
// lane is done the plans deadlock, and the simulator says where each lane is stuck. Every received
// slot must have the size the step expects, no slot may be left over, in-place calls alias Input
// and Output exactly as the API defines, and after the run every output element must hold exactly
// its expected value while Input (out of place) is unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/plan.h"
#include "base/status.h"

namespace braid {

struct SimulationOptions {
  int nslots = 1;          ///< FIFO capacity of every connector
  uint64_t seed = 1;       ///< picks the interleaving
  uint32_t slotBytes = 0;  ///< slot size plans are validated against; 0: the request's chunkBytes
  /// buildAndSimulate: append the call check lane (addCallCheckLane) on this channel, as the
  /// communicator does; -1: none.
  int callCheckChannel = -1;
};

/// One call a rank makes: its request (request.rank is the rank making it) and its plan.
struct SimCall {
  PlanRequest request;
  Plan plan;
};

/// Runs calls together and proves their results. The calls are either every rank's call of one
/// collective (calls[r] made by rank r), or any set of Send and Recv calls, where the k-th Send
/// from a to b is matched with the k-th Recv at b from a.
Status simulate(const std::vector<SimCall>& calls, const SimulationOptions& options);

/// Builds the plan of every rank for `request` (request.rank is ignored) with buildPlan and
/// simulates them. For a Send request (rank a, peer b) it builds a's Send and b's Recv.
Status buildAndSimulate(const PlanRequest& request, const SimulationOptions& options);

/// "allreduce/ring n=5 rank=0 count=273 es=4 chunk=64 ch=2 inplace root=1 ring=[...]": for test
/// failure messages.
std::string describeRequest(const PlanRequest& request);

}  // namespace braid
