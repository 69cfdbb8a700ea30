#include "topology/ordering.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "topology/discover.h"
#include "topology/host_id.h"
#include "topology/topology_test_data.h"

namespace braid {
namespace {

constexpr int kSwitchBus[4] = {0x18, 0x38, 0x98, 0xb8};
int64_t gpuBus(int gpu) { return packPciBusId(0, kSwitchBus[gpu / 2] + 2 + gpu % 2, 0, 0); }
int64_t switchBus(int sw) { return packPciBusId(0, kSwitchBus[sw], 0, 0); }
// Local ranks drive GPUs in an order that alternates sockets, as CUDA_VISIBLE_DEVICES may.
constexpr int kGpuOfLocalRank[8] = {0, 4, 1, 5, 2, 6, 3, 7};

bool isPermutation(std::vector<int> order, int n) {
  std::sort(order.begin(), order.end());
  for (int i = 0; i < n; ++i) {
    if (order.size() != static_cast<size_t>(n) || order[static_cast<size_t>(i)] != i) return false;
  }
  return true;
}

// Checks that within each host, ranks with the same value of `field` are contiguous in `order`.
template <typename Field>
void expectGrouped(const std::vector<int>& order, const std::vector<RankPlacement>& p,
                   Field field) {
  std::set<std::pair<uint64_t, int64_t>> closed;
  for (size_t i = 0; i < order.size(); ++i) {
    const RankPlacement& here = p[static_cast<size_t>(order[i])];
    const auto group = std::make_pair(here.hostHash, static_cast<int64_t>(field(here.locality)));
    EXPECT_EQ(closed.count(group), 0u) << "group reopened at position " << i;
    if (i + 1 == order.size()) break;
    const RankPlacement& next = p[static_cast<size_t>(order[i + 1])];
    if (next.hostHash != here.hostHash || field(next.locality) != field(here.locality))
      closed.insert(group);
  }
}

// Two 8-GPU hosts, ranks alternating between them.
std::vector<RankPlacement> twoGpuHosts() {
  std::vector<RankPlacement> p(16);
  for (int r = 0; r < 16; ++r) {
    const int g = kGpuOfLocalRank[r / 2];
    p[static_cast<size_t>(r)].hostHash = r % 2 == 0 ? 0xA : 0xB;
    Locality& l = p[static_cast<size_t>(r)].locality;
    l.package = g / 4;
    l.numaNode = g / 4;
    l.nearestGpu = gpuBus(g);
    l.pciSwitch = switchBus(g / 2);
  }
  return p;
}

TEST(Ordering, KeepsHostsContiguousAndGroupsSocketsThenSwitches) {
  const std::vector<RankPlacement> p = twoGpuHosts();
  const std::vector<int> order = orderRanks(p);
  ASSERT_TRUE(isPermutation(order, 16));
  EXPECT_EQ(order.front(), 0);  // rank 0's host first
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(p[static_cast<size_t>(order[static_cast<size_t>(i)])].hostHash, 0xAu);
  expectGrouped(order, p, [](const Locality& l) { return l.package; });
  expectGrouped(order, p, [](const Locality& l) { return l.pciSwitch; });

  const RingCrossings ordered = countRingCrossings(order, p);
  EXPECT_EQ(ordered.hosts, 2);
  EXPECT_EQ(ordered.packages, 2);
  EXPECT_EQ(ordered.numaNodes, 2);
  EXPECT_EQ(ordered.pciSwitches, 6);  // 4 switches per host: 3 boundaries inside each

  std::vector<int> identity(16);
  for (int i = 0; i < 16; ++i) identity[static_cast<size_t>(i)] = i;
  EXPECT_EQ(countRingCrossings(identity, p).hosts, 16);
}

TEST(Ordering, UnknownPlacementsAndSmallWorlds) {
  EXPECT_TRUE(orderRanks({}).empty());
  std::vector<RankPlacement> one(1);
  EXPECT_EQ(orderRanks(one), std::vector<int>{0});
  EXPECT_EQ(countRingCrossings({0}, one).hosts, 0);

  // Ranks that do not know their package sort before those that do, each group by rank.
  std::vector<RankPlacement> p(4);
  p[0].locality.package = 1;
  p[1].locality.package = -1;
  p[2].locality.package = 0;
  p[3].locality.package = -1;
  EXPECT_EQ(orderRanks(p), (std::vector<int>{1, 3, 2, 0}));
}

TEST(Ordering, SameInputSameOrder) {
  const std::vector<RankPlacement> p = twoGpuHosts();
  EXPECT_EQ(orderRanks(p), orderRanks(p));
}

class OrderingOnDescribedMachines : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!hwlocAvailable()) GTEST_SKIP() << "built without hwloc";
  }
  static Topology load(const std::string& name) {
    TopologyOptions options;
    options.xmlFile = std::string(BRAID_TEST_DATA_DIR) + "/" + name;
    Result<Topology> t = discoverTopology(options);
    EXPECT_TRUE(t.ok()) << t.status().message();
    return t.ok() ? std::move(t).value() : Topology();
  }
};

TEST_F(OrderingOnDescribedMachines, TwoEightGpuHosts) {
  const Topology hosts[2] = {load("gpu8_host_a.xml"), load("gpu8_host_b.xml")};
  const uint64_t hash[2] = {hostHash(hostIdentity("gpu8-a")), hostHash(hostIdentity("gpu8-b"))};
  ASSERT_NE(hash[0], hash[1]);
  std::vector<RankPlacement> p(16);
  for (int r = 0; r < 16; ++r) {
    const int h = r % 2;
    const Topology& t = hosts[h];
    ASSERT_TRUE(t.finalized());
    p[static_cast<size_t>(r)].hostHash = hash[h];
    p[static_cast<size_t>(r)].locality =
        computeLocality(t, t.allPus(), gpuBus(kGpuOfLocalRank[r / 2]));
  }
  const std::vector<int> order = orderRanks(p);
  ASSERT_TRUE(isPermutation(order, 16));
  expectGrouped(order, p, [](const Locality& l) { return l.package; });
  expectGrouped(order, p, [](const Locality& l) { return l.pciSwitch; });
  const RingCrossings c = countRingCrossings(order, p);
  EXPECT_EQ(c.hosts, 2);
  EXPECT_EQ(c.packages, 2);
  EXPECT_EQ(c.pciSwitches, 6);
  // Neighbours on one switch are the GPU pairs: on host a, NVLink-connected.
  const Topology& a = hosts[0];
  for (size_t i = 0; i + 1 < 8; i += 2) {
    const Locality& x = p[static_cast<size_t>(order[i])].locality;
    const Locality& y = p[static_cast<size_t>(order[i + 1])].locality;
    EXPECT_EQ(x.pciSwitch, y.pciSwitch);
    std::optional<TopoPath> link =
        a.path(a.findByPciBusId(x.nearestGpu), a.findByPciBusId(y.nearestGpu));
    ASSERT_TRUE(link.has_value());
    EXPECT_EQ(link->count(LinkKind::kNvlink), 1);
  }
}

TEST_F(OrderingOnDescribedMachines, TwoSocketCpuServerOneRankPerCore) {
  const Topology t = load("cpu_2socket.xml");
  ASSERT_TRUE(t.finalized());
  const std::vector<int> cores = t.nodesOf(NodeKind::kCore);
  ASSERT_EQ(cores.size(), 32u);
  // Ranks alternate sockets: rank r on core (r % 2) * 16 + r / 2.
  std::vector<RankPlacement> p(32);
  for (int r = 0; r < 32; ++r) {
    const int core = cores[static_cast<size_t>((r % 2) * 16 + r / 2)];
    p[static_cast<size_t>(r)].locality = computeLocality(t, t.node(core).cpuset);
    EXPECT_EQ(p[static_cast<size_t>(r)].locality.package, r % 2);
    EXPECT_EQ(p[static_cast<size_t>(r)].locality.cores, 1);
    EXPECT_EQ(p[static_cast<size_t>(r)].locality.core, t.node(core).logicalIndex);
  }
  std::vector<int> identity(32);
  for (int i = 0; i < 32; ++i) identity[static_cast<size_t>(i)] = i;
  EXPECT_EQ(countRingCrossings(identity, p).packages, 32);
  const std::vector<int> order = orderRanks(p);
  ASSERT_TRUE(isPermutation(order, 32));
  const RingCrossings c = countRingCrossings(order, p);
  EXPECT_EQ(c.hosts, 0);
  EXPECT_EQ(c.packages, 2);
  EXPECT_EQ(c.numaNodes, 2);
}

}  // namespace
}  // namespace braid
