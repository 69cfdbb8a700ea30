// The hierarchical all-reduce proven by the plan simulator over many (hosts x ranks per host)
// shapes, even and uneven, with hosts contiguous or interleaved in rank numbering and ring order,
// and its traffic checked against the narrative: exactly 2(h-1)N bytes leave hosts in total and
// 2(m-1)N move inside each host of m ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <sstream>

#include "algorithms/algorithms.h"
#include "algorithms/plan_simulator.h"

namespace braid {
namespace {

/// Host number per rank for hosts of the given sizes: contiguous ranks, or dealt out round-robin
/// (so that ranks of one host are not neighbours in rank order).
std::vector<int> hostList(const std::vector<int>& sizes, bool interleaved) {
  std::vector<int> hosts;
  if (!interleaved) {
    for (size_t h = 0; h < sizes.size(); ++h) {
      hosts.insert(hosts.end(), sizes[h], static_cast<int>(h));
    }
    return hosts;
  }
  std::vector<int> left = sizes;
  for (bool any = true; any;) {
    any = false;
    for (size_t h = 0; h < sizes.size(); ++h) {
      if (left[h] > 0) {
        --left[h];
        // Host numbers need not follow rank order: number them backwards.
        const int n = std::accumulate(sizes.begin(), sizes.end(), 0);
        hosts.push_back(n - 1 - static_cast<int>(h));
        any = true;
      }
    }
  }
  return hosts;
}

std::string describe(const PlanRequest& q) {
  std::ostringstream os;
  os << describeRequest(q) << " hosts=[";
  for (size_t i = 0; i < q.hosts.size(); ++i) os << (i ? "," : "") << q.hosts[i];
  os << "]";
  return os.str();
}

const std::vector<std::vector<int>> kShapes = {
    {2},          {3},       {1, 1},          {1, 1, 1}, {2, 2},       {3, 3}, {4, 4},
    {2, 2, 2},    {3, 1},    {1, 3},          {2, 3, 1}, {4, 2, 3},    {1, 4}, {5, 2},
    {2, 2, 2, 2}, {3, 3, 3}, {1, 2, 1, 2, 1}, {6, 1},    {4, 4, 4, 4},
};

class HierShapes : public ::testing::TestWithParam<size_t> {};

TEST_P(HierShapes, SimulatesCorrectly) {
  const std::vector<int>& sizes = kShapes[GetParam()];
  const int n = std::accumulate(sizes.begin(), sizes.end(), 0);
  std::mt19937_64 rng(GetParam() * 7919 + 1);
  int sample = 0;
  for (Algorithm algo : {Algorithm::kHier, Algorithm::kHierRhd}) {
    for (bool interleaved : {false, true}) {
      for (uint64_t count :
           {uint64_t{0}, uint64_t{1}, uint64_t{7}, uint64_t{273}, uint64_t{1000}}) {
        for (int nchannels : {1, 2, 3}) {
          for (bool inPlace : {false, true}) {
            PlanRequest q;
            q.coll = Collective::kAllReduce;
            q.algo = algo;
            q.nranks = n;
            q.count = count;
            q.elemSize = (sample % 3 == 0) ? 8 : 4;
            q.chunkBytes = (sample % 2 == 0) ? 16 : 64;
            q.nchannels = nchannels;
            q.inPlace = inPlace;
            q.hosts = hostList(sizes, interleaved);
            if (sample % 4 == 3) {
              q.ring.resize(n);
              std::iota(q.ring.begin(), q.ring.end(), 0);
              std::shuffle(q.ring.begin(), q.ring.end(), rng);
            }
            SimulationOptions options;
            options.nslots = minSlotsFor(algo, Collective::kAllReduce);
            options.seed = rng();
            const Status s = buildAndSimulate(q, options);
            EXPECT_TRUE(s.ok()) << describe(q) << ": " << s.message();
            ++sample;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, HierShapes, ::testing::Range<size_t>(0, kShapes.size()),
                         [](const auto& info) {
                           std::string name = "h";
                           for (int m : kShapes[info.param]) name += "_" + std::to_string(m);
                           return name;
                         });

// Halving and doubling among h hosts (folded to p = 2^k, r = h - p) sends 2(p-1) + 2r = 2(h-1)
// shards across hosts, as many as the ring.
TEST(Hier, TrafficStaysInsideHostsExceptOneAllReducePerShard) {
  for (const std::vector<int>& sizes : kShapes) {
    for (auto [interleaved, algo] :
         {std::pair{false, Algorithm::kHier}, std::pair{true, Algorithm::kHier},
          std::pair{false, Algorithm::kHierRhd}, std::pair{true, Algorithm::kHierRhd}}) {
      const int n = std::accumulate(sizes.begin(), sizes.end(), 0);
      PlanRequest q;
      q.coll = Collective::kAllReduce;
      q.algo = algo;
      q.nranks = n;
      q.count = 4096;
      q.elemSize = 4;
      q.chunkBytes = 256;
      q.hosts = hostList(sizes, interleaved);
      uint64_t across = 0;
      uint64_t inside = 0;
      for (int r = 0; r < n; ++r) {
        q.rank = r;
        Result<Plan> plan = buildPlan(q);
        ASSERT_TRUE(plan.ok()) << plan.status().message();
        for (const Lane& lane : plan->lanes) {
          for (const Step& s : lane.steps) {
            for (int i = 0; i < s.nsend; ++i) {
              const uint64_t bytes = stepShape(s.op).independent ? s.sendBytes : s.bytes;
              (q.hosts[s.sendPeers[i]] == q.hosts[r] ? inside : across) += bytes;
            }
          }
        }
      }
      const uint64_t total = q.count * q.elemSize;
      const uint64_t h = sizes.size();
      uint64_t intra = 0;
      for (int m : sizes) intra += 2 * uint64_t(m - 1) * total;
      EXPECT_EQ(across, 2 * (h - 1) * total) << describe(q);
      EXPECT_EQ(inside, intra) << describe(q);
    }
  }
}

TEST(Hier, OneHostIsAPlainRingAndBadHostListsAreRejected) {
  PlanRequest q;
  q.coll = Collective::kAllReduce;
  q.algo = Algorithm::kHier;
  q.nranks = 4;
  q.count = 100;
  q.chunkBytes = 64;
  for (int r = 0; r < 4; ++r) {
    q.rank = r;
    ASSERT_TRUE(buildPlan(q).ok());
  }
  q.hosts = {0, 0, 1};
  Result<Plan> bad = buildPlan(q);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("host list"), std::string::npos);
  q.hosts = {0, 0, 1, 9};
  EXPECT_FALSE(buildPlan(q).ok());
  EXPECT_EQ(findAlgorithm("hier"), Algorithm::kHier);
  EXPECT_EQ(findAlgorithm("hier_rhd"), Algorithm::kHierRhd);
  const std::vector<Algorithm> rs = algorithmsFor(Collective::kReduceScatter);
  EXPECT_EQ(std::find(rs.begin(), rs.end(), Algorithm::kHier), rs.end());
}

}  // namespace
}  // namespace braid
