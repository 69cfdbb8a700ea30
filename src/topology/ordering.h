// Rank ordering for rings and trees. Data moving around a ring crosses every boundary between
// neighbours; the order chosen here makes those crossings as cheap as the placement allows:
// each host's ranks are contiguous (one network hop in and one out per host), and inside a host
// ranks are grouped by package, then NUMA node, then PCI switch, so a ring crosses each socket
// and each switch boundary as few times as possible. Pure function of what the ranks shared.
// Ranks bound to the same core are not made neighbours: an order that did so sped up ring and hier
// but slowed tree and misled the cost model
// (docs/performance-notes.md#rings-of-ranks-sharing-a-core).
#pragma once

#include <cstdint>
#include <vector>

#include "topology/locality.h"

namespace braid {

/// What every rank shares about itself at init.
struct RankPlacement {
  uint64_t hostHash = 0;  ///< hostHash(hostIdentity(...)): equal for ranks on one host
  Locality locality;
};

/// A permutation of ranks 0..n-1 (order[i] is the rank at position i). Hosts appear in the order
/// of their lowest rank; inside a host, ranks sort by (package, NUMA node, PCI switch, GPU, rank),
/// unknown (-1) values first. Deterministic: every rank computes the same order.
std::vector<int> orderRanks(const std::vector<RankPlacement>& placements);

/// Boundaries a ring over `order` crosses (each of the n neighbour pairs, the wrap-around
/// included): between hosts, and within a host between packages, NUMA nodes and PCI switches.
struct RingCrossings {
  int hosts = 0;
  int packages = 0;
  int numaNodes = 0;
  int pciSwitches = 0;
};
/// The boundaries a ring over `order` crosses, by kind.
RingCrossings countRingCrossings(const std::vector<int>& order,
                                 const std::vector<RankPlacement>& placements);

}  // namespace braid
