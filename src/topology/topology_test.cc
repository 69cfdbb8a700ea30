#include "topology/topology.h"

#include <gtest/gtest.h>

#include <cmath>

namespace braid {
namespace {

constexpr double kGen5 = 63.015385;
constexpr double kGen4 = 31.507692;
constexpr double kGen3x8 = 7.876923;

// Two sockets, each with one NUMA node and two single-PU cores. Socket 0: host bridge > PCIe
// switch > GPU a, GPU b (NVLink between them) and NIC 0. Socket 1: host bridge > root port >
// GPU c, and a second host bridge > NIC 1 on a narrow link. Built by hand, as discovery would.
struct Machine {
  Topology topo;
  int machine, pkg[2], numa[2], core[4], pu[4], hostBridge[3], sw, rootPort, gpuA, gpuB, gpuC, nic0,
      nic1;
};

int pciNode(Topology& t, NodeKind kind, int parent, int bus, double linkGBps) {
  const int id = t.addNode(kind, parent);
  TopoNode& n = t.mutableNode(id);
  n.pciBusId = packPciBusId(0, bus, 0, 0);
  n.pcieLinkGBps = linkGBps;
  return id;
}

Machine buildMachine() {
  Machine m;
  Topology& t = m.topo;
  m.machine = t.addNode(NodeKind::kMachine, -1);
  for (int p = 0; p < 2; ++p) {
    m.pkg[p] = t.addNode(NodeKind::kPackage, m.machine);
    t.mutableNode(m.pkg[p]).osIndex = p;
    m.numa[p] = t.addNode(NodeKind::kNuma, m.pkg[p]);
    t.mutableNode(m.numa[p]).osIndex = p;
    t.mutableNode(m.numa[p]).cpuset = CpuSet::range(2 * p, 2 * p + 1);
    for (int c = 2 * p; c < 2 * p + 2; ++c) {
      m.core[c] = t.addNode(NodeKind::kCore, m.pkg[p]);
      t.mutableNode(m.core[c]).osIndex = c;
      m.pu[c] = t.addNode(NodeKind::kPu, m.core[c]);
      t.mutableNode(m.pu[c]).osIndex = c;
    }
  }
  m.hostBridge[0] = t.addNode(NodeKind::kPciHostBridge, m.pkg[0]);
  m.sw = pciNode(t, NodeKind::kPciSwitch, m.hostBridge[0], 0x18, kGen5);
  m.gpuA = pciNode(t, NodeKind::kGpu, m.sw, 0x1a, kGen5);
  m.gpuB = pciNode(t, NodeKind::kGpu, m.sw, 0x1b, kGen5);
  m.nic0 = pciNode(t, NodeKind::kNic, m.sw, 0x1c, kGen4);
  t.mutableNode(m.nic0).netSpeedGbps = 200;
  m.hostBridge[1] = t.addNode(NodeKind::kPciHostBridge, m.pkg[1]);
  m.rootPort = pciNode(t, NodeKind::kPciBridge, m.hostBridge[1], 0x98, 0);
  m.gpuC = pciNode(t, NodeKind::kGpu, m.rootPort, 0x99, kGen4);
  m.hostBridge[2] = t.addNode(NodeKind::kPciHostBridge, m.pkg[1]);
  m.nic1 = pciNode(t, NodeKind::kNic, m.hostBridge[2], 0xb1, kGen3x8);
  t.mutableNode(m.nic1).netSpeedGbps = 200;
  t.addLink(LinkKind::kNvlink, m.gpuA, m.gpuB, 100.0,
            defaultLinkModel(LinkKind::kNvlink).latencyUs);
  return m;
}

Machine finalizedMachine() {
  Machine m = buildMachine();
  Status s = m.topo.finalize();
  EXPECT_TRUE(s.ok()) << s.message();
  return m;
}

const TopoLink* linkBetween(const Topology& t, int a, int b) {
  for (int lid : t.node(a).links) {
    const TopoLink& l = t.link(lid);
    if ((l.a == a && l.b == b) || (l.a == b && l.b == a)) return &l;
  }
  return nullptr;
}

TEST(PciBusId, PacksFormatsAndParses) {
  const int64_t id = packPciBusId(0, 0x1a, 0x1f, 7);
  EXPECT_EQ(formatPciBusId(id), "0000:1a:1f.7");
  EXPECT_EQ(formatPciBusId(-1), "none");
  EXPECT_EQ(parsePciBusId("0000:1a:1f.7").value(), id);
  // CUDA prints an 8-digit domain in upper case; lspci omits the domain.
  EXPECT_EQ(parsePciBusId("00000000:1A:1F.7").value(), id);
  EXPECT_EQ(parsePciBusId("1a:1f.7").value(), id);
  EXPECT_EQ(parsePciBusId("0001:00:00.0").value(), packPciBusId(1, 0, 0, 0));
  for (const char* bad :
       {"", "1a:00", "zz:00.0", "0000:1a:20.0", "0000:1a:00.8", "0000:100:00.0"}) {
    EXPECT_FALSE(parsePciBusId(bad).ok()) << bad;
  }
}

TEST(Topology, FinalizeLinksTheTreeWithKindsAndSpeeds) {
  Machine m = finalizedMachine();
  const Topology& t = m.topo;
  const TopoLink* memory = linkBetween(t, m.pkg[0], m.numa[0]);
  ASSERT_NE(memory, nullptr);
  EXPECT_EQ(memory->kind, LinkKind::kMemory);
  EXPECT_DOUBLE_EQ(memory->bandwidthGBps, defaultLinkModel(LinkKind::kMemory).bandwidthGBps);

  const TopoLink* socket = linkBetween(t, m.machine, m.pkg[1]);
  ASSERT_NE(socket, nullptr);
  EXPECT_EQ(socket->kind, LinkKind::kInterSocket);

  const TopoLink* gpu = linkBetween(t, m.sw, m.gpuA);
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->kind, LinkKind::kPcie);
  EXPECT_DOUBLE_EQ(gpu->bandwidthGBps, kGen5);
  // No link speed reported: the documented PCIe default.
  const TopoLink* rootPort = linkBetween(t, m.hostBridge[1], m.rootPort);
  ASSERT_NE(rootPort, nullptr);
  EXPECT_DOUBLE_EQ(rootPort->bandwidthGBps, defaultLinkModel(LinkKind::kPcie).bandwidthGBps);

  EXPECT_EQ(linkBetween(t, m.core[0], m.pu[0])->kind, LinkKind::kInternal);
  EXPECT_EQ(linkBetween(t, m.pkg[0], m.hostBridge[0])->kind, LinkKind::kInternal);

  ASSERT_GE(t.fabric(), 0);
  const TopoLink* net = linkBetween(t, m.nic0, t.fabric());
  ASSERT_NE(net, nullptr);
  EXPECT_EQ(net->kind, LinkKind::kNetwork);
  EXPECT_DOUBLE_EQ(net->bandwidthGBps, 25.0);  // 200 Gbit/s
}

TEST(Topology, FinalizeDerivesCpuSetsNumaAndPackages) {
  Machine m = finalizedMachine();
  const Topology& t = m.topo;
  EXPECT_EQ(t.allPus(), CpuSet::range(0, 3));
  EXPECT_EQ(t.node(m.pkg[1]).cpuset, CpuSet::range(2, 3));
  EXPECT_EQ(t.node(m.gpuA).numaNode, 0);
  EXPECT_EQ(t.node(m.gpuA).package, 0);
  EXPECT_EQ(t.node(m.gpuC).numaNode, 1);
  EXPECT_EQ(t.node(m.gpuC).package, 1);
  EXPECT_EQ(t.node(m.machine).numaNode, -1);
  EXPECT_EQ(t.node(m.core[3]).numaNode, 1);
  EXPECT_EQ(t.node(m.gpuC).logicalIndex, 2);
  EXPECT_EQ(t.node(m.core[2]).logicalIndex, 2);
  EXPECT_EQ(t.summary(),
            "2 packages, 2 NUMA nodes, 4 cores, 4 PUs, 3 GPUs, 2 NICs, 1 PCI switches");
  EXPECT_NE(t.describe().find("GPU 0000:1a:00.0"), std::string::npos) << t.describe();
  EXPECT_NE(t.describe().find("NVLink GPU 0000:1a:00.0 <-> GPU 0000:1b:00.0"), std::string::npos);
}

TEST(Topology, CpuSetQueries) {
  Machine m = finalizedMachine();
  const Topology& t = m.topo;
  EXPECT_EQ(t.numaNodeOf(CpuSet::of({2, 3})), 1);
  EXPECT_EQ(t.numaNodeOf(CpuSet::of({3})), 1);
  EXPECT_EQ(t.numaNodeOf(CpuSet::of({1, 2})), -1);
  EXPECT_EQ(t.numaNodeOf(CpuSet::of({40})), -1);  // not a PU of this machine
  EXPECT_EQ(t.packageOf(CpuSet::of({0, 1})), 0);
  EXPECT_EQ(t.packageOf(CpuSet::of({1, 2})), -1);
  EXPECT_EQ(t.anchorOf(CpuSet::of({0})), m.pu[0]);
  EXPECT_EQ(t.anchorOf(CpuSet::of({0, 1})), m.pkg[0]);
  EXPECT_EQ(t.anchorOf(CpuSet::of({1, 2})), m.machine);
  EXPECT_EQ(t.anchorOf(CpuSet()), m.machine);

  const CpuBinding b = t.bindingOf(CpuSet::of({1, 2, 9}));
  EXPECT_EQ(b.pus, CpuSet::of({1, 2}));
  EXPECT_EQ(b.cores, (std::vector<int>{1, 2}));
  EXPECT_EQ(b.numaNodes, (std::vector<int>{0, 1}));
  EXPECT_EQ(b.packages, (std::vector<int>{0, 1}));
  EXPECT_EQ(t.processBinding().pus, t.allPus());  // unknown binding: every PU
}

TEST(Topology, PathsPreferWideLinksAndReportWhatTheyCross) {
  Machine m = finalizedMachine();
  const Topology& t = m.topo;

  std::optional<TopoPath> ab = t.path(m.gpuA, m.gpuB);
  ASSERT_TRUE(ab.has_value());
  EXPECT_EQ(ab->hops(), 1);
  EXPECT_EQ(ab->count(LinkKind::kNvlink), 1);
  EXPECT_DOUBLE_EQ(ab->bandwidthGBps, 100.0);

  std::optional<TopoPath> ac = t.path(m.gpuA, m.gpuC);
  ASSERT_TRUE(ac.has_value());
  EXPECT_EQ(ac->nodes.front(), m.gpuA);
  EXPECT_EQ(ac->nodes.back(), m.gpuC);
  EXPECT_EQ(ac->count(LinkKind::kInterSocket), 2);
  EXPECT_EQ(ac->count(LinkKind::kPcie), 4);
  EXPECT_EQ(ac->count(LinkKind::kNetwork), 0);
  // The root port reports no link speed: the PCIe default (Gen3 x16) is narrower than the
  // socket link.
  EXPECT_DOUBLE_EQ(ac->bandwidthGBps, defaultLinkModel(LinkKind::kPcie).bandwidthGBps);
  EXPECT_LT(defaultLinkModel(LinkKind::kPcie).bandwidthGBps,
            defaultLinkModel(LinkKind::kInterSocket).bandwidthGBps);
  const double expectedLatency = 4 * defaultLinkModel(LinkKind::kPcie).latencyUs +
                                 2 * defaultLinkModel(LinkKind::kInterSocket).latencyUs;
  EXPECT_NEAR(ac->latencyUs, expectedLatency, 1e-9);
  EXPECT_EQ(t.switchesBetween(m.gpuA, m.gpuC), std::vector<int>{m.sw});

  std::optional<TopoPath> an = t.path(m.gpuA, m.nic0);
  ASSERT_TRUE(an.has_value());
  EXPECT_EQ(an->hops(), 2);
  EXPECT_DOUBLE_EQ(an->bandwidthGBps, kGen4);

  // NIC to NIC through the fabric would be wider than the narrow PCIe link of NIC 1, but the
  // fabric is never a way through.
  std::optional<TopoPath> nn = t.path(m.nic0, m.nic1);
  ASSERT_TRUE(nn.has_value());
  EXPECT_EQ(nn->count(LinkKind::kNetwork), 0);
  EXPECT_DOUBLE_EQ(nn->bandwidthGBps, kGen3x8);
  std::optional<TopoPath> out = t.path(m.gpuC, t.fabric());
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->count(LinkKind::kNetwork), 1);

  std::optional<TopoPath> self = t.path(m.gpuA, m.gpuA);
  ASSERT_TRUE(self.has_value());
  EXPECT_EQ(self->hops(), 0);
  EXPECT_FALSE(t.path(m.gpuA, 10000).has_value());
  EXPECT_TRUE(std::isinf(t.path(m.pu[0], m.pkg[0])->bandwidthGBps));
}

TEST(Topology, NearestDevices) {
  Machine m = finalizedMachine();
  const Topology& t = m.topo;
  EXPECT_EQ(t.nearestGpu(CpuSet::of({0})), m.gpuA);  // A and B tie; the lower id wins
  EXPECT_EQ(t.nearestGpu(CpuSet::of({3})), m.gpuC);
  EXPECT_EQ(t.nearestGpuToNuma(1), m.gpuC);
  EXPECT_EQ(t.nearestGpuToNuma(7), -1);
  EXPECT_EQ(t.nearestNicToNuma(0), m.nic0);
  EXPECT_EQ(t.nearestNic(CpuSet::of({2, 3})), m.nic1);
  EXPECT_EQ(t.nearest(m.gpuB, NodeKind::kNic), m.nic0);
  EXPECT_EQ(t.nearest(m.gpuC, NodeKind::kNic), m.nic1);
  EXPECT_EQ(t.nearest(m.gpuA, NodeKind::kPciSwitch), m.sw);
  EXPECT_EQ(t.pciGroupOf(m.gpuA), m.sw);
  EXPECT_EQ(t.pciGroupOf(m.gpuC), m.rootPort);
  EXPECT_EQ(t.pciGroupOf(m.nic1), -1);
  EXPECT_EQ(t.pciGroupOf(m.core[0]), -1);
  EXPECT_EQ(t.findByPciBusId(packPciBusId(0, 0x99, 0, 0)), m.gpuC);
  EXPECT_EQ(t.findByPciBusId(packPciBusId(0, 0x77, 0, 0)), -1);
  EXPECT_EQ(t.findNuma(1), m.numa[1]);
  EXPECT_EQ(t.findPackage(2), -1);
}

TEST(Topology, FinalizeRejectsBrokenGraphs) {
  Topology empty;
  EXPECT_FALSE(empty.finalize().ok());

  Topology noMachine;
  noMachine.addNode(NodeKind::kPackage, -1);
  EXPECT_FALSE(noMachine.finalize().ok());

  Topology badLink;
  const int root = badLink.addNode(NodeKind::kMachine, -1);
  badLink.addLink(LinkKind::kNvlink, root, 5, 1.0, 1.0);
  EXPECT_FALSE(badLink.finalize().ok());

  Machine twice = finalizedMachine();
  EXPECT_FALSE(twice.topo.finalize().ok());
}

TEST(Topology, EqualityComparesTheGraph) {
  Machine a = finalizedMachine();
  Machine b = finalizedMachine();
  EXPECT_TRUE(a.topo == b.topo);
  Machine c = buildMachine();
  c.topo.mutableNode(c.gpuC).pcieLinkGBps = kGen5;
  ASSERT_TRUE(c.topo.finalize().ok());
  EXPECT_FALSE(a.topo == c.topo);
}

}  // namespace
}  // namespace braid
