// Which connections a plan uses: the (peer, channel, direction) triples its steps name. A
// communicator makes a connector, and a network transport opens its streams, only when a plan
// first uses it, so this set bounds what a rank holds: a ring names 2 peers per channel, a tree
// at most 3, halving and doubling about 2 log2(n).
#pragma once

#include <vector>

#include "algorithms/plan.h"

namespace braid {

/// One connection a plan uses.
struct PlanConnection {
  int peer = -1;
  int channel = 0;
  bool send = false;  ///< this rank sends to the peer (else receives from it)
  bool operator==(const PlanConnection&) const = default;
  auto operator<=>(const PlanConnection&) const = default;
};

/// The connections `plan` uses, sorted, each once.
std::vector<PlanConnection> planConnections(const Plan& plan);
/// The peers `plan` exchanges data with, sorted, each once.
std::vector<int> planPeers(const Plan& plan);

}  // namespace braid
