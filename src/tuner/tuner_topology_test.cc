// The tuner on described machines (tests/data): the ring orders and tree shapes a communicator
// ends up with, the model's choices there, and this machine's topology dumped and loaded back.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <set>

#include "algorithms/algorithms.h"
#include "algorithms/builder.h"
#include "topology/discover.h"
#include "topology/host_id.h"
#include "topology/locality.h"
#include "topology/ordering.h"
#include "topology/topology_test_data.h"
#include "tuner/tuner.h"

namespace braid {
namespace {

constexpr int kSwitchBus[4] = {0x18, 0x38, 0x98, 0xb8};
int64_t gpuBus(int gpu) { return packPciBusId(0, kSwitchBus[gpu / 2] + 2 + gpu % 2, 0, 0); }
// Local ranks drive GPUs in an order that alternates sockets, as CUDA_VISIBLE_DEVICES may.
constexpr int kGpuOfLocalRank[8] = {0, 4, 1, 5, 2, 6, 3, 7};

Calibration calibration() {
  Calibration c;
  c.stepUs = 0.02;
  c.hopUs = 0.4;
  c.crowdedHopUs = 5.0;
  c.copyCacheGBps = 20;
  c.copyDramGBps = 10;
  c.reduceCacheGBps = 16;
  c.reduceDramGBps = 9;
  c.transferGBps = 25;
  c.cacheMiB = 1e6;  // measured no smaller than the topology's
  c.cpus = 8;
  return c;
}

Tuner tunerFor(const Topology& host0, const std::vector<RankPlacement>& p,
               const std::vector<int>& ring) {
  ModelConstants mc;
  mc.calibration = calibration();
  mc.host = hostShapeOf(host0);
  Result<CostModel> model = CostModel::create(mc, p, ring, 4);
  EXPECT_TRUE(model.ok()) << model.status().message();
  TunerOptions o;
  o.nranks = static_cast<int>(p.size());
  o.maxChannels = 4;
  o.slotBytes = 512 << 10;
  Result<Tuner> t = Tuner::create(o, model.value(), nullptr);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? std::move(t).value() : Tuner();
}

// The ranks of tree `variant` of the double binary tree over `order`: each tree edge as
// (parent rank, child rank).
std::vector<std::pair<int, int>> treeEdges(const std::vector<int>& order, int variant) {
  const int members = static_cast<int>(order.size());
  std::vector<std::pair<int, int>> edges;
  for (int m = 0; m < members; ++m) {
    const int parent = binaryTreeLinks(members, variant, m).parent;
    if (parent >= 0) edges.emplace_back(order[size_t(parent)], order[size_t(m)]);
  }
  return edges;
}

template <typename Group>
int crossings(const std::vector<std::pair<int, int>>& edges, Group group) {
  int n = 0;
  for (auto [a, b] : edges) n += group(a) != group(b) ? 1 : 0;
  return n;
}

// The parent and children of `rank` in the tree plans a communicator with this ring builds
// (all-reduce, two channels: tree 0 on channel 0), read from the plan's steps.
std::pair<int, std::set<int>> seatInPlan(const std::vector<int>& ring, int rank) {
  PlanRequest req;
  req.coll = Collective::kAllReduce;
  req.algo = Algorithm::kTree;
  req.nranks = static_cast<int>(ring.size());
  req.rank = rank;
  req.count = 4096;
  req.chunkBytes = 1 << 20;
  req.nchannels = 2;
  req.ring = ring;
  Result<Plan> plan = buildPlan(req);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  int parent = -1;
  std::set<int> children;
  for (const Lane& lane : plan.value().lanes) {
    if (lane.channel != 0) continue;
    for (const Step& s : lane.steps) {
      // Reduce-up steps receive from children and send to the parent.
      if (s.op == StepOp::kRecvReduceSend || s.op == StepOp::kSend) {
        parent = s.sendPeers[0];
        for (int i = 0; i < s.nrecv; ++i) children.insert(s.recvPeers[i]);
      }
      if (s.op == StepOp::kRecvReduceCopySend || s.op == StepOp::kRecvReduceCopy ||
          s.op == StepOp::kCopySend) {
        for (int i = 0; i < s.nrecv; ++i) children.insert(s.recvPeers[i]);
      }
    }
  }
  return {parent, children};
}

class TunerOnDescribedMachines : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!hwlocAvailable()) GTEST_SKIP() << "built without hwloc";
  }
  static Topology load(const std::string& path) {
    TopologyOptions options;
    options.xmlFile = path;
    Result<Topology> t = discoverTopology(options);
    EXPECT_TRUE(t.ok()) << t.status().message();
    return t.ok() ? std::move(t).value() : Topology();
  }
  static Topology data(const std::string& name) {
    return load(std::string(BRAID_TEST_DATA_DIR) + "/" + name);
  }
};

TEST_F(TunerOnDescribedMachines, TwoSocketServerRingAndTreesStayInSockets) {
  const Topology t = data("cpu_2socket.xml");
  const std::vector<int> cores = t.nodesOf(NodeKind::kCore);
  ASSERT_EQ(cores.size(), 32u);
  // Rank r on core (r % 2) * 16 + r / 2: ranks alternate sockets.
  std::vector<RankPlacement> p(32);
  for (int r = 0; r < 32; ++r) {
    p[size_t(r)].hostHash = 1;
    p[size_t(r)].locality = computeLocality(t, t.node(cores[size_t((r % 2) * 16 + r / 2)]).cpuset);
  }
  const std::vector<int> ring = orderRanks(p);
  // Socket 0's ranks (the even ones) first, in rank order, then socket 1's.
  for (int i = 0; i < 32; ++i) EXPECT_EQ(ring[size_t(i)], i < 16 ? 2 * i : 2 * (i - 16) + 1);
  auto socket = [&](int rank) { return p[size_t(rank)].locality.package; };
  std::vector<int> identity(32);
  for (int i = 0; i < 32; ++i) identity[size_t(i)] = i;
  for (int variant : {0, 1}) {
    const auto edges = treeEdges(ring, variant);
    ASSERT_EQ(edges.size(), 31u);
    // Over the topology's order each tree crosses between the sockets a few times; over rank
    // order (ranks alternating sockets) half its edges would.
    EXPECT_LE(crossings(edges, socket), 4) << "tree " << variant;
    EXPECT_GE(crossings(treeEdges(identity, variant), socket), 12) << "tree " << variant;
  }
  // Tree 0: labels are positions + 1, rooted at label 32 (position 31, rank 31) whose one child
  // is label 16 (position 15: rank 30); that node's children are labels 8 and 24.
  const auto [rootParent, rootKids] = seatInPlan(ring, 31);
  EXPECT_EQ(rootParent, -1);
  EXPECT_EQ(rootKids, (std::set<int>{30}));
  const auto [parent30, kids30] = seatInPlan(ring, 30);
  EXPECT_EQ(parent30, 31);
  EXPECT_EQ(kids30, (std::set<int>{ring[7], ring[23]}));

  // 32 ranks on 32 cores: nobody is crowded; the model's small messages go to a latency
  // algorithm, its largest to one that moves 2(n-1)/n N.
  const Tuner tuner = tunerFor(t, p, ring);
  const Algorithm small = tuner.choose(Collective::kAllReduce, 8).algo;
  EXPECT_TRUE(small == Algorithm::kRd || small == Algorithm::kDirect || small == Algorithm::kTree)
      << algorithmName(small);
  const Algorithm large = tuner.choose(Collective::kAllReduce, 1ull << 30).algo;
  EXPECT_TRUE(large == Algorithm::kRing || large == Algorithm::kRhd || large == Algorithm::kHier)
      << algorithmName(large);
}

TEST_F(TunerOnDescribedMachines, TwoGpuHostsRingAndTreesCrossBetweenHostsRarely) {
  const Topology hosts[2] = {data("gpu8_host_a.xml"), data("gpu8_host_b.xml")};
  std::vector<RankPlacement> p(16);
  const uint64_t hash[2] = {hostHash(hostIdentity("gpu8-a")), hostHash(hostIdentity("gpu8-b"))};
  for (int r = 0; r < 16; ++r) {
    const Topology& t = hosts[r % 2];
    p[size_t(r)].hostHash = hash[r % 2];
    p[size_t(r)].locality = computeLocality(t, t.allPus(), gpuBus(kGpuOfLocalRank[r / 2]));
  }
  const std::vector<int> ring = orderRanks(p);
  auto host = [&](int rank) { return p[size_t(rank)].hostHash; };
  // Host a's ranks (the even ones) first, grouped by socket then switch: GPU pairs 0-1, 2-3
  // (socket 0) then 4-5, 6-7, which the ranks 0,4,8,12 and 2,6,10,14 drive... as orderRanks
  // sorts them. Positions 0..7 hold host a, 8..15 host b.
  for (int i = 0; i < 16; ++i) EXPECT_EQ(ring[size_t(i)] % 2, i < 8 ? 0 : 1) << i;
  const std::vector<int> expectedA = {0, 4, 8, 12, 2, 6, 10, 14};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(ring[size_t(i)], expectedA[size_t(i)]) << i;
  std::vector<std::pair<int, int>> ringEdges;
  for (int i = 0; i < 16; ++i) ringEdges.emplace_back(ring[size_t(i)], ring[size_t((i + 1) % 16)]);
  EXPECT_EQ(crossings(ringEdges, host), 2);
  std::vector<int> identity(16);
  for (int i = 0; i < 16; ++i) identity[size_t(i)] = i;
  for (int variant : {0, 1}) {
    EXPECT_LE(crossings(treeEdges(ring, variant), host), 4);
    EXPECT_GE(crossings(treeEdges(identity, variant), host), 7);
  }

  const Tuner tuner = tunerFor(hosts[0], p, ring);
  // Between hosts the network's latency makes one round of log2 n exchanges or a tree the small
  // message choice, never the ring's 2(n-1) steps.
  EXPECT_NE(tuner.choose(Collective::kAllReduce, 8).algo, Algorithm::kRing);
  // The model charges the network for the bytes that cross it: its prediction for the large
  // all-reduce is at least 2(n-1)/n N / (2 NICs... ) - at least N over one 25 GB/s link.
  const Choice large = tuner.choose(Collective::kAllReduce, 1ull << 30);
  EXPECT_GE(large.predictedUs, double(1ull << 30) / (25.0 * 1e3));
}

TEST_F(TunerOnDescribedMachines, ThisMachineDumpedAndLoadedBackChoosesTheSame) {
  char pattern[] = "/tmp/braid-topo-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string dump = std::string(pattern) + "/this_machine.xml";
  TopologyOptions options;
  options.dumpFile = dump;
  Result<Topology> live = discoverTopology(options);
  ASSERT_TRUE(live.ok()) << live.status().message();
  const Topology back = load(dump);
  std::filesystem::remove_all(pattern);
  ASSERT_TRUE(back.finalized());
  EXPECT_EQ(hostShapeOf(live.value()), hostShapeOf(back));
  for (int n : {2, 3, 4}) {
    std::vector<RankPlacement> pl(static_cast<size_t>(n));
    std::vector<RankPlacement> pb(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      pl[size_t(r)] = {9, computeLocality(live.value(), live->allPus())};
      pb[size_t(r)] = {9, computeLocality(back, back.allPus())};
      EXPECT_EQ(pl[size_t(r)].locality, pb[size_t(r)].locality);
    }
    const Tuner a = tunerFor(live.value(), pl, orderRanks(pl));
    const Tuner b = tunerFor(back, pb, orderRanks(pb));
    EXPECT_EQ(a.digest(), b.digest()) << n << " ranks";
    for (int k = 0; k <= Tuner::kMaxSizeLog; ++k) {
      const Choice x = a.choose(Collective::kAllReduce, uint64_t{1} << k);
      const Choice y = b.choose(Collective::kAllReduce, uint64_t{1} << k);
      EXPECT_EQ(x.algo, y.algo);
      EXPECT_EQ(x.chunkBytes, y.chunkBytes);
      EXPECT_EQ(x.nchannels, y.nchannels);
    }
  }
}

}  // namespace
}  // namespace braid
