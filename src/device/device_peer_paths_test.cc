// The device path's choice per peer: GPU memory where p2p reaches, staged FIFOs over RDMA or TCP
// where only they do, and a plan that names a peer neither reaches fails with the peer and both
// reasons.
#include "device/device_peer_paths.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "algorithms/algorithms.h"

namespace braid {
namespace {

PeerReach gpu(const std::string& how) { return {true, true, how, false, "no need"}; }
PeerReach staged(const std::string& gpuWhyNot, const std::string& over = "TCP") {
  return {false, false, gpuWhyNot, true, "", over};
}
PeerReach unreachable(const std::string& gpuWhyNot, const std::string& stagedWhyNot) {
  return {false, false, gpuWhyNot, false, stagedWhyNot};
}

Plan ringAllReduce(int nranks, int rank) {
  PlanRequest r;
  r.coll = Collective::kAllReduce;
  r.algo = Algorithm::kRing;
  r.nranks = nranks;
  r.rank = rank;
  r.count = 1000;
  r.chunkBytes = 1024;
  r.nchannels = 1;
  Result<Plan> plan = buildPlan(r);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  return plan.ok() ? std::move(plan).value() : Plan{};
}

TEST(DevicePeerPaths, PeersOnAnotherHostAreStaged) {
  // Ranks 0 and 1 share a GPU host; 2 and 3 are another host. Rank 1 receives from 0 over GPU
  // memory and sends to 2 through the staged FIFOs.
  const DevicePeerPaths paths(
      1, {gpu("same GPU (CUDA IPC)"), {}, staged("another host"), staged("another host", "RDMA")});
  EXPECT_EQ(paths.send(0), DevicePeerPath::kGpuMemory);
  EXPECT_EQ(paths.send(2), DevicePeerPath::kStaged);
  EXPECT_TRUE(paths.anyStaged());
  EXPECT_EQ(paths.describe(2), "staged through pinned host memory over TCP (another host)");
  EXPECT_EQ(paths.describe(3), "staged through pinned host memory over RDMA (another host)");
  const Plan plan = ringAllReduce(4, 1);
  EXPECT_TRUE(paths.check(plan).ok());
  // Only the staged peer's slots arm its proxy: rank 1 sends to 2 and receives from 0.
  const std::vector<gpu::FifoSlotCount> slots = paths.stagedSlots(plan);
  ASSERT_EQ(slots.size(), 1u);
  EXPECT_EQ(slots[0].peer, 2);
  EXPECT_GT(slots[0].posts, 0u);
  EXPECT_EQ(slots[0].releases, 0u);
  for (const gpu::FifoSlotCount& c : gpu::countDeviceSlots(plan)) {
    if (c.peer == 2) {
      EXPECT_EQ(c.posts, slots[0].posts);
    }
  }
}

TEST(DevicePeerPaths, OneHostNeedsNoStaging) {
  const DevicePeerPaths paths(0, {{}, gpu("same GPU (CUDA IPC)")});
  EXPECT_FALSE(paths.anyStaged());
  const Plan plan = ringAllReduce(2, 0);
  EXPECT_TRUE(paths.check(plan).ok());
  EXPECT_TRUE(paths.stagedSlots(plan).empty());
}

TEST(DevicePeerPaths, UnreachablePeerIsNamedWithBothReasons) {
  const DevicePeerPaths paths(
      0, {{}, unreachable("another host", "BRAID_TRANSPORT excludes socket"), staged("x")});
  const Status status = paths.check(ringAllReduce(3, 0));
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), braidInvalidUsage);
  EXPECT_NE(status.message().find("rank 0 cannot reach rank 1"), std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("no GPU path (another host)"), std::string::npos);
  EXPECT_NE(status.message().find("BRAID_TRANSPORT excludes socket"), std::string::npos);
}

TEST(DevicePeerPaths, OneWayGpuPathCountsAsNoneForTheOtherWay) {
  // p2p carries rank 0's data to rank 1 but not back, and nothing is staged: a plan that
  // receives from 1 fails, naming it.
  PeerReach half{true, false, "no peer access between GPU 1 and GPU 0", false, "not linked"};
  const DevicePeerPaths paths(0, {{}, half});
  EXPECT_EQ(paths.send(1), DevicePeerPath::kGpuMemory);
  EXPECT_EQ(paths.recv(1), DevicePeerPath::kNone);
  const Status status = paths.check(ringAllReduce(2, 0));
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("rank 1"), std::string::npos) << status.message();
}

TEST(GpuIslands, RanksLinkedBothWaysShareAnIsland) {
  // Two hosts of two GPUs, ranks interleaved: 0 and 2 on one, 1 and 3 on the other.
  auto twoHosts = [](int a, int b) { return a % 2 == b % 2; };
  EXPECT_EQ(gpuIslands(4, twoHosts), (std::vector<int>{0, 1, 0, 1}));
  // Every GPU reaches every other: one island; none does (BRAID_TRANSPORT=socket): one each.
  EXPECT_EQ(gpuIslands(3, [](int, int) { return true; }), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(gpuIslands(3, [](int, int) { return false; }), (std::vector<int>{0, 1, 2}));
  // A link one way only joins nothing; links through a third rank do.
  auto oneWay = [](int a, int b) { return a == 0 && b == 1; };
  EXPECT_EQ(gpuIslands(2, oneWay), (std::vector<int>{0, 1}));
  auto chain = [](int a, int b) { return std::abs(a - b) == 1 && std::max(a, b) != 3; };
  EXPECT_EQ(gpuIslands(4, chain), (std::vector<int>{0, 0, 0, 1}));
  EXPECT_TRUE(gpuIslands(0, twoHosts).empty());
}

TEST(GpuIslands, OnlyPairsInsideAGroupAreAsked) {
  // Hosts {0, 2} and {1, 3}; rank 4 in none. A pair across groups is never asked about.
  int asked = 0;
  auto everyPair = [&](int a, int b) {
    ++asked;
    EXPECT_EQ(a % 2, b % 2) << a << " and " << b << " are on two hosts";
    return true;
  };
  EXPECT_EQ(gpuIslands(5, everyPair, {{0, 2}, {1, 3}}), (std::vector<int>{0, 1, 0, 1, 2}));
  EXPECT_EQ(asked, 4);  // both ways, one pair per group
}

}  // namespace
}  // namespace braid
