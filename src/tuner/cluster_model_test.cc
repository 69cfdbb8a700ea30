#include "tuner/cluster_model.h"

#include <gtest/gtest.h>

#include "algorithms/algorithms.h"

namespace braid {
namespace {

// 8 GPUs per host, 8 NICs, the constants of a described H100 server.
ClusterShape cluster(int hosts) {
  ClusterShape c;
  c.hosts = hosts;
  c.ranksPerHost = 8;
  c.nicsPerHost = 8;
  c.nvlinkGBps = 450;
  c.netGBps = 50;
  c.netLatencyUs = 5.65;
  c.hopUs = 1;
  c.stepUs = 0.5;
  c.reduceGBps = 1000;
  c.nslots = 8;
  return c;
}

PlanRequest allReduce(const ClusterShape& c, Algorithm algo, uint64_t count) {
  PlanRequest q;
  q.algo = algo;
  q.nranks = c.nranks();
  q.count = count;
  q.chunkBytes = 64 << 10;
  q.nchannels = 2;
  if (algorithmUsesHosts(algo)) {
    for (int r = 0; r < q.nranks; ++r) q.hosts.push_back(r / c.ranksPerHost);
  }
  return q;
}

std::vector<Plan> plansOf(PlanRequest q, int ranks) {
  std::vector<Plan> plans;
  for (int r = 0; r < ranks; ++r) {
    q.rank = r;
    Result<Plan> p = buildPlan(q);
    EXPECT_TRUE(p.ok()) << p.status().message();
    plans.push_back(*p);
  }
  return plans;
}

// One host's plans priced as the whole machine give the time of every rank's plans, to the bit.
TEST(ClusterModel, OnePeriodPricesAsEveryRank) {
  const ClusterShape c = cluster(8);
  const SimMachine machine = clusterMachine(c);
  for (Algorithm algo : {Algorithm::kRing, Algorithm::kHier}) {
    for (uint64_t count : {uint64_t{128}, uint64_t{64} << 10, uint64_t{1} << 20}) {
      const PlanRequest q = allReduce(c, algo, count);
      ASSERT_EQ(planSymmetry(q, c.ranksPerHost), RankSymmetry::kShift)
          << algorithmName(algo) << " " << count;
      Result<double> all = simulatePlans(plansOf(q, c.nranks()), machine);
      Result<double> period = simulatePeriodicPlans(plansOf(q, c.ranksPerHost), machine);
      ASSERT_TRUE(all.ok()) << all.status().message();
      ASSERT_TRUE(period.ok()) << period.status().message();
      EXPECT_DOUBLE_EQ(*all, *period) << algorithmName(algo) << " " << count;
    }
  }
}

// Halving-doubling and recursive doubling pair ranks by XOR: one host's plans, their peers XORed
// with a multiple of a host, price the whole machine as every rank's plans do, but for the order
// in which the full simulation runs partners' tasks that fall at the same moment.
TEST(ClusterModel, OnePeriodPricesXorPartnersAsEveryRank) {
  const ClusterShape c = cluster(8);
  const SimMachine machine = clusterMachine(c);
  for (Algorithm algo : {Algorithm::kRhd, Algorithm::kRd, Algorithm::kHierRhd}) {
    for (uint64_t count : {uint64_t{128}, uint64_t{64} << 10, uint64_t{1} << 20}) {
      const PlanRequest q = allReduce(c, algo, count);
      ASSERT_EQ(planSymmetry(q, c.ranksPerHost), RankSymmetry::kXor)
          << algorithmName(algo) << " " << count;
      Result<double> all = simulatePlans(plansOf(q, c.nranks()), machine);
      Result<double> period =
          simulatePeriodicPlans(plansOf(q, c.ranksPerHost), machine, RankSymmetry::kXor);
      ASSERT_TRUE(all.ok()) << all.status().message();
      ASSERT_TRUE(period.ok()) << period.status().message();
      EXPECT_NEAR(*all, *period, 0.02 * *all) << algorithmName(algo) << " " << count;
    }
  }
}

// Plans that neither shift nor XOR host by host are told apart: a count that leaves some ranks'
// blocks empty, and XOR partners over a host count that is no power of two.
TEST(ClusterModel, PlansThatDoNotRepeatAreToldApart) {
  const ClusterShape c = cluster(8);
  EXPECT_EQ(planSymmetry(allReduce(c, Algorithm::kRing, 3), c.ranksPerHost), std::nullopt);
  EXPECT_EQ(planSymmetry(allReduce(c, Algorithm::kRing, 128 * 5), c.ranksPerHost),
            RankSymmetry::kShift);
  const ClusterShape six = cluster(6);
  EXPECT_EQ(planSymmetry(allReduce(six, Algorithm::kRhd, 1 << 16), six.ranksPerHost), std::nullopt);
  EXPECT_EQ(planSymmetry(allReduce(six, Algorithm::kRing, 48 << 10), six.ranksPerHost),
            RankSymmetry::kShift);
}

// A rank's plan at 16k ranks is O(n) steps, built in well under a second, and the priced
// machine holds no n x n table.
TEST(ClusterModel, PlansAtSixteenThousandRanksStayLinear) {
  const ClusterShape c = cluster(2048);
  PlanRequest q = allReduce(c, Algorithm::kRing, uint64_t{1} << 24);
  q.rank = 5;
  Result<Plan> ring = buildPlan(q);
  ASSERT_TRUE(ring.ok());
  EXPECT_LE(ring->stepCount(), size_t(2 * 2 * c.nranks()));
  const SimMachine machine = clusterMachine(c);
  EXPECT_TRUE(machine.links.empty());
  EXPECT_EQ(machine.linkOf(7, 8).wire, 7);
  EXPECT_EQ(machine.linkOf(8, 7).wire, 8);
  EXPECT_EQ(machine.linkOf(1, 2).wire, -1);
}

// The simulation agrees with the alpha-beta figures at 1k ranks: ring in its latency and its
// bandwidth regime, hier_rhd on small and large messages, rhd on small ones.
TEST(ClusterModel, SimulationMatchesAlphaBetaAtAThousandRanks) {
  const ClusterShape c = cluster(128);
  for (auto [algo, bytes] : {std::pair{Algorithm::kRing, uint64_t{8} << 10},
                             std::pair{Algorithm::kRing, uint64_t{64} << 20},
                             std::pair{Algorithm::kHierRhd, uint64_t{8} << 10},
                             std::pair{Algorithm::kHierRhd, uint64_t{64} << 20},
                             std::pair{Algorithm::kRhd, uint64_t{8} << 10}}) {
    Result<Price> p = priceAllReduce(c, algo, bytes, 512 << 10, 2, 2'000'000);
    ASSERT_TRUE(p.ok()) << p.status().message();
    const double f = alphaBetaAllReduceUs(c, algo, bytes, 512 << 10, 2);
    EXPECT_NEAR(p->us / f, 1.0, 0.10) << algorithmName(algo) << " " << bytes << ": simulated "
                                      << p->us << " us, alpha-beta " << f << " us";
  }
}

// Every algorithm's formula follows its simulation within 10% at 256 ranks in hosts of 8, from a
// latency-bound 8 B to a bandwidth-bound 128 MiB: a formula that drifts from what its plan does
// shows here. (16 MiB is left out: the tree's pipeline there is 0.88-0.90 of its formula, whose
// fill and per-chunk NIC time add where they partly overlap; docs/scale.md.)
TEST(ClusterModel, EveryFormulaFollowsItsSimulation) {
  const ClusterShape c = cluster(32);
  for (Algorithm algo : {Algorithm::kRing, Algorithm::kTree, Algorithm::kRhd, Algorithm::kRd,
                         Algorithm::kHier, Algorithm::kHierRhd}) {
    for (uint64_t bytes : {uint64_t{8}, uint64_t{4} << 10, uint64_t{256} << 10, uint64_t{2} << 20,
                           uint64_t{128} << 20}) {
      Result<Price> p = priceAllReduce(c, algo, bytes, 512 << 10, 2, 2'000'000);
      ASSERT_TRUE(p.ok()) << p.status().message();
      const double f = alphaBetaAllReduceUs(c, algo, p->bytes, 512 << 10, 2);
      EXPECT_NEAR(p->us / f, 1.0, 0.10) << algorithmName(algo) << " " << bytes << ": simulated "
                                        << p->us << " us, alpha-beta " << f << " us";
    }
  }
}

}  // namespace
}  // namespace braid
