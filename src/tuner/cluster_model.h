// A described cluster of GPU servers, priced with no processes: thousands of ranks (hosts of 8
// GPUs joined by NVLink, a NIC per GPU into a fat-tree) run every rank's plan of one all-reduce on
// the plan simulator (plan_cost.h), next to the alpha-beta figures of each algorithm on the same
// constants. braid-scale-table prints both (docs/scale.md).
//
// Simulating every rank of a ring at 16k ranks would hold 16k plans of 2(n-1) steps each (10^9
// steps), so each price takes the cheapest exact route there is:
//   periodic  - the plans repeat host by host, shifted or XORed (checked on sampled hosts): one
//               host's plans are simulated for the whole machine (simulatePeriodicPlans);
//   full      - every rank's plan, when their steps fit the step budget;
//   rounded   - a count rounded up to whole elements per rank, which makes the plans periodic
//               (for latency-bound sizes below one element per rank the bytes change nothing);
//   linear    - beyond the budget, time grows linearly with bytes: the two largest sizes that fit
//               are simulated and the line through them is read at the size asked.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/plan.h"
#include "base/status.h"
#include "topology/topology.h"
#include "tuner/plan_cost.h"

namespace braid {

/// The cluster: `hosts` copies of one server, every NIC on a non-blocking fat-tree.
struct ClusterShape {
  int hosts = 1;
  int ranksPerHost = 8;     ///< one rank per GPU of the server
  int nicsPerHost = 8;      ///< a rank sends across hosts on NIC (its place in the host) mod this
  double nvlinkGBps = 0;    ///< one GPU to another inside the host, one direction
  double netGBps = 0;       ///< one NIC, one direction
  double netLatencyUs = 0;  ///< added to a hand-off between hosts: NICs, switches, the proxy
  double hopUs = 0;         ///< a hand-off inside the host: a slot posted until its peer sees it
  double stepUs = 0;        ///< the device executor's work per step beyond moving bytes
  double reduceGBps = 0;    ///< a GPU's reduction rate (operands in its memory)
  int nslots = 8;           ///< FIFO depth of every connector, in chunks

  int nranks() const { return hosts * ranksPerHost; }
  /// One line: hosts, GPUs, links and constants.
  std::string describe() const;
};

/// The cluster of `hosts` servers like the one `server` describes (its GPUs, NICs, NVLink and
/// network speeds); the constants a topology does not hold (hand-offs, steps, reductions) are the
/// documented defaults of cluster_model.cc. Fails for a server without GPUs.
Result<ClusterShape> clusterOf(const Topology& server, int hosts);

/// The plan simulator's machine for the cluster: ranks host by host, links computed per pair.
SimMachine clusterMachine(const ClusterShape& cluster);

/// How a price was found (see above).
enum class PriceRoute : uint8_t { kPeriodic, kFull, kRounded, kLinear };
std::string_view priceRouteName(PriceRoute route);

struct Price {
  double us = 0;
  PriceRoute route = PriceRoute::kFull;
  /// Bytes per rank whose time this is: those asked, but rounded up on the kRounded route.
  uint64_t bytes = 0;
};

/// The simulated time of one all-reduce of `bytes` per rank with `algo` on the cluster, with the
/// chunk and channels given; simulations hold at most about `stepBudget` steps.
Result<Price> priceAllReduce(const ClusterShape& cluster, Algorithm algo, uint64_t bytes,
                             uint32_t chunkBytes, int nchannels, uint64_t stepBudget);

/// The alpha-beta time of the same call on the same constants (docs/scale.md spells each
/// formula), or a negative number for an algorithm without one (direct).
double alphaBetaAllReduceUs(const ClusterShape& cluster, Algorithm algo, uint64_t bytes,
                            uint32_t chunkBytes, int nchannels);

/// How the plans of `request` repeat with period `period` ranks, if they do: shifted (checked on
/// the first period against the second, then on its first, middle and last rank against a
/// middle and the last period) or XORed (every rank against the next bit above the period's,
/// the three against each further bit and all of them together): same steps and bytes, peers
/// mapped along.
std::optional<RankSymmetry> planSymmetry(const PlanRequest& request, int period);
/// planSymmetry with the plans of ranks 0..period-1 built already (period = their count).
std::optional<RankSymmetry> planSymmetry(const PlanRequest& request,
                                         const std::vector<Plan>& firstPeriod);

}  // namespace braid
