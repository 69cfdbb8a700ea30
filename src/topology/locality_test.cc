#include "topology/locality.h"

#include <gtest/gtest.h>

#include <array>

#include "topology/discover.h"
#include "topology/topology_test_data.h"

namespace braid {
namespace {

// Bus numbers of tests/data/gpu8_host_a.xml: switch s starts at kSwitchBus[s]; its GPUs sit at
// +2 and +3, its NIC at +4.
constexpr int kSwitchBus[4] = {0x18, 0x38, 0x98, 0xb8};
int64_t gpuBus(int gpu) { return packPciBusId(0, kSwitchBus[gpu / 2] + 2 + gpu % 2, 0, 0); }
int64_t nicBus(int sw) { return packPciBusId(0, kSwitchBus[sw] + 4, 0, 0); }
int64_t switchBus(int sw) { return packPciBusId(0, kSwitchBus[sw], 0, 0); }

TEST(Locality, WireFormatRoundTripsAndIsLittleEndian) {
  Locality l;
  l.package = 1;
  l.numaNode = -1;
  l.cores = 12;
  l.pus = 24;
  l.nearestGpu = packPciBusId(0, 0x9b, 0, 0);
  l.nearestNic = -1;
  l.pciSwitch = packPciBusId(0x10, 0x98, 0, 0);
  l.core = 7;
  std::array<uint8_t, kLocalityWireBytes> wire{};
  encodeLocality(l, wire.data());
  EXPECT_EQ(wire[0], 1);
  EXPECT_EQ(wire[1], 0);
  EXPECT_EQ(wire[4], 0xff);  // -1
  EXPECT_EQ(wire[8], 12);
  EXPECT_EQ(wire[17], 0x9b);  // bus byte of the GPU's id
  EXPECT_EQ(wire[40], 7);
  EXPECT_EQ(decodeLocality(wire.data()), l);
  EXPECT_EQ(decodeLocality(wire.data()).pciSwitch, l.pciSwitch);
}

class LocalityOnGpuServer : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!hwlocAvailable()) GTEST_SKIP() << "built without hwloc";
    TopologyOptions options;
    options.xmlFile = std::string(BRAID_TEST_DATA_DIR) + "/gpu8_host_a.xml";
    Result<Topology> t = discoverTopology(options);
    ASSERT_TRUE(t.ok()) << t.status().message();
    topo_ = std::move(t).value();
  }
  Topology topo_;
};

TEST_F(LocalityOnGpuServer, CpuOnlyRankBoundToOneSocket) {
  const Locality l = computeLocality(topo_, CpuSet::range(8, 11));
  EXPECT_EQ(l.package, 1);
  EXPECT_EQ(l.numaNode, 1);
  EXPECT_EQ(l.cores, 4);
  EXPECT_EQ(l.pus, 4);
  EXPECT_EQ(l.core, -1);  // several cores: none of them is the rank's
  // Both switches of socket 1 are equally near; the lower bus wins.
  EXPECT_EQ(l.nearestGpu, gpuBus(4));
  EXPECT_EQ(l.nearestNic, nicBus(2));
  EXPECT_EQ(l.pciSwitch, switchBus(2));
}

TEST_F(LocalityOnGpuServer, ARankBoundToOneCoreNamesIt) {
  const std::vector<int> cores = topo_.nodesOf(NodeKind::kCore);
  ASSERT_GT(cores.size(), 9u);
  const int core = cores[9];
  const Locality l = computeLocality(topo_, topo_.node(core).cpuset);
  EXPECT_EQ(l.cores, 1);
  EXPECT_EQ(l.core, topo_.node(core).logicalIndex);
  EXPECT_EQ(l.package, 1);
}

TEST_F(LocalityOnGpuServer, GpuRankTakesItsGpusSocketWhenUnbound) {
  const Locality l = computeLocality(topo_, topo_.allPus(), gpuBus(7));
  EXPECT_EQ(l.package, 1);
  EXPECT_EQ(l.numaNode, 1);
  EXPECT_EQ(l.cores, 16);
  EXPECT_EQ(l.nearestGpu, gpuBus(7));
  EXPECT_EQ(l.nearestNic, nicBus(3));
  EXPECT_EQ(l.pciSwitch, switchBus(3));
}

TEST_F(LocalityOnGpuServer, BindingWinsOverTheGpuForCpuPlacement) {
  // Bound to socket 0 but driving a GPU of socket 1: CPUs say socket 0, the NIC follows the GPU.
  const Locality l = computeLocality(topo_, CpuSet::range(0, 1), gpuBus(5));
  EXPECT_EQ(l.package, 0);
  EXPECT_EQ(l.numaNode, 0);
  EXPECT_EQ(l.nearestGpu, gpuBus(5));
  EXPECT_EQ(l.nearestNic, nicBus(2));
  EXPECT_EQ(l.pciSwitch, switchBus(2));
}

TEST_F(LocalityOnGpuServer, UnknownGpuAndForeignCpusFallBack) {
  // A bus id that is not a GPU here counts as no GPU; CPUs outside the machine count as all.
  const Locality l = computeLocality(topo_, CpuSet::of({200}), packPciBusId(0, 0x77, 0, 0));
  EXPECT_EQ(l.package, -1);
  EXPECT_EQ(l.numaNode, -1);
  EXPECT_EQ(l.pus, 16);
  EXPECT_EQ(l.nearestGpu, gpuBus(0));
  const Locality viaProcess = localLocality(topo_);
  EXPECT_GE(viaProcess.pus, 1);
}

}  // namespace
}  // namespace braid
