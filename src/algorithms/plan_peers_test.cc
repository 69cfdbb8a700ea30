#include "algorithms/plan_peers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "algorithms/algorithms.h"

namespace braid {
namespace {

constexpr int kRanks = 1024;
constexpr int kChannels = 4;

PlanRequest allReduce(Algorithm algo, int rank) {
  PlanRequest r;
  r.coll = Collective::kAllReduce;
  r.algo = algo;
  r.nranks = kRanks;
  r.rank = rank;
  r.count = uint64_t{1} << 20;  // enough for every channel and step
  r.elemSize = 4;
  r.chunkBytes = 128 << 10;
  r.nchannels = kChannels;
  return r;
}

// What each rank connects to on first use is what its plans name: at 1024 ranks a ring names its
// two neighbours on every channel, whatever the rank.
TEST(PlanPeers, RingAt1024RanksConnectsTwoPeersPerChannel) {
  for (int rank : {0, 1, 511, 1023}) {
    Result<Plan> plan = buildPlan(allReduce(Algorithm::kRing, rank));
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    const std::vector<PlanConnection> connections = planConnections(*plan);
    EXPECT_EQ(connections.size(), size_t{2} * kChannels) << "rank " << rank;
    const std::vector<int> peers = planPeers(*plan);
    const int next = (rank + 1) % kRanks, prev = (rank + kRanks - 1) % kRanks;
    EXPECT_EQ(peers, (std::vector<int>{std::min(next, prev), std::max(next, prev)}));
    // Each channel sends to one neighbour and receives from the other (odd channels turn the
    // ring around).
    for (int channel = 0; channel < kChannels; ++channel) {
      int sendTo = -1, recvFrom = -1;
      for (const PlanConnection& c : connections) {
        if (c.channel == channel) (c.send ? sendTo : recvFrom) = c.peer;
      }
      EXPECT_TRUE((sendTo == next && recvFrom == prev) || (sendTo == prev && recvFrom == next))
          << "rank " << rank << " channel " << channel;
    }
  }
}

TEST(PlanPeers, TreeAndHalvingDoublingStayFarBelowEveryPeer) {
  const size_t logN = static_cast<size_t>(std::log2(kRanks));
  for (int rank : {0, 5, 1000}) {
    Result<Plan> tree = buildPlan(allReduce(Algorithm::kTree, rank));
    ASSERT_TRUE(tree.ok()) << tree.status().message();
    // Two binary trees: a parent and two children in each.
    EXPECT_LE(planPeers(*tree).size(), 6u) << "rank " << rank;
    Result<Plan> rhd = buildPlan(allReduce(Algorithm::kRhd, rank));
    ASSERT_TRUE(rhd.ok()) << rhd.status().message();
    EXPECT_LE(planPeers(*rhd).size(), logN) << "rank " << rank;
    EXPECT_GE(planPeers(*rhd).size(), 1u);
  }
}

// All-to-all by Bruck's algorithm and rd's reduce-scatter at 1000 ranks (no power of two): every
// rank sends to the ranks 1, 2, 4, ... 512 after it and receives from those as far before it,
// where pairwise exchange names all 999 others.
TEST(PlanPeers, BruckAllToAllAndReduceScatterNameLog2NPeersEachWay) {
  constexpr int n = 1000;
  for (int rank : {0, 7, 999}) {
    PlanRequest r = allReduce(Algorithm::kRd, rank);
    r.nranks = n;
    r.count = 16;
    r.nchannels = 1;
    r.coll = Collective::kReduceScatter;
    Result<Plan> reduceScatter = buildPlan(r);
    ASSERT_TRUE(reduceScatter.ok()) << reduceScatter.status().message();
    r.coll = Collective::kAllToAll;
    Result<Plan> plan = buildPlan(r);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    std::vector<PlanConnection> expected;
    for (int d = 1; d < n; d <<= 1) {
      expected.push_back({(rank + d) % n, 0, true});
      expected.push_back({(rank - d + n) % n, 0, false});
    }
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(planConnections(*plan), expected) << "rank " << rank;
    EXPECT_EQ(planConnections(*reduceScatter), expected) << "reduce-scatter, rank " << rank;
    r.algo = Algorithm::kPairwise;
    Result<Plan> pairwise = buildPlan(r);
    ASSERT_TRUE(pairwise.ok()) << pairwise.status().message();
    EXPECT_EQ(planPeers(*pairwise).size(), size_t{n - 1});
  }
}

}  // namespace
}  // namespace braid
