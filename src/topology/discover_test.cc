#include "topology/discover.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "topology/topology_test_data.h"

namespace braid {
namespace {

constexpr double kGen5 = 63.015385;
constexpr double kGen4 = 31.507692;
// First bus of each PCIe switch in tests/data/gpu8_host_*.xml (see make_gpu_servers.py).
constexpr int kSwitchBus[4] = {0x18, 0x38, 0x98, 0xb8};

std::string dataFile(const std::string& name) {
  return std::string(BRAID_TEST_DATA_DIR) + "/" + name;
}

int64_t gpuBus(int gpu) { return packPciBusId(0, kSwitchBus[gpu / 2] + 2 + gpu % 2, 0, 0); }
int64_t nicBus(int sw) { return packPciBusId(0, kSwitchBus[sw] + 4, 0, 0); }
int64_t switchBus(int sw) { return packPciBusId(0, kSwitchBus[sw], 0, 0); }

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("braid_topo_test_" + std::to_string(getpid()) + "_" + std::to_string(counter_++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

Topology load(const std::string& file, const std::string& dump = "") {
  TopologyOptions options;
  options.xmlFile = file;
  options.dumpFile = dump;
  Result<Topology> t = discoverTopology(options);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? std::move(t).value() : Topology();
}

class DiscoverXml : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!hwlocAvailable()) GTEST_SKIP() << "built without hwloc";
  }
};

TEST_F(DiscoverXml, TwoSocketCpuServer) {
  const Topology t = load(dataFile("cpu_2socket.xml"));
  ASSERT_TRUE(t.finalized());
  EXPECT_EQ(t.numPackages(), 2);
  EXPECT_EQ(t.numNumaNodes(), 2);
  EXPECT_EQ(t.numCores(), 32);
  EXPECT_EQ(t.numPus(), 64);
  EXPECT_EQ(t.count(NodeKind::kCache), 2);
  EXPECT_TRUE(t.gpus().empty());
  EXPECT_TRUE(t.nics().empty());
  EXPECT_TRUE(t.pciSwitches().empty());
  EXPECT_EQ(t.fabric(), -1);
  EXPECT_EQ(t.allPus(), CpuSet::range(0, 63));

  EXPECT_EQ(t.numaNodeOf(CpuSet::range(32, 63)), 1);
  EXPECT_EQ(t.numaNodeOf(CpuSet::range(30, 33)), -1);
  EXPECT_EQ(t.packageOf(CpuSet::range(0, 31)), 0);
  EXPECT_EQ(t.nearestGpu(CpuSet::of({0})), -1);
  // Two hyperthreads of one core anchor at the core.
  EXPECT_EQ(t.node(t.anchorOf(CpuSet::of({0, 1}))).kind, NodeKind::kCore);

  const std::vector<int> pus = t.nodesOf(NodeKind::kPu);
  std::optional<TopoPath> across = t.path(pus.front(), pus.back());
  ASSERT_TRUE(across.has_value());
  EXPECT_EQ(across->count(LinkKind::kInterSocket), 2);
  EXPECT_DOUBLE_EQ(across->bandwidthGBps, defaultLinkModel(LinkKind::kInterSocket).bandwidthGBps);
  std::optional<TopoPath> memory = t.path(pus.front(), t.findNuma(0));
  ASSERT_TRUE(memory.has_value());
  EXPECT_EQ(memory->count(LinkKind::kMemory), 1);
  EXPECT_EQ(memory->count(LinkKind::kInterSocket), 0);
  EXPECT_DOUBLE_EQ(memory->bandwidthGBps, defaultLinkModel(LinkKind::kMemory).bandwidthGBps);
}

TEST_F(DiscoverXml, EightGpuServerCountsAndDevices) {
  const Topology t = load(dataFile("gpu8_host_a.xml"));
  ASSERT_TRUE(t.finalized());
  EXPECT_EQ(t.summary(),
            "2 packages, 2 NUMA nodes, 16 cores, 16 PUs, 8 GPUs, 4 NICs, 4 PCI switches");
  EXPECT_EQ(t.count(NodeKind::kPciHostBridge), 4);
  EXPECT_EQ(t.count(NodeKind::kPciBridge), 0);

  for (int g = 0; g < 8; ++g) {
    const int id = t.findByPciBusId(gpuBus(g));
    ASSERT_GE(id, 0) << g;
    const TopoNode& gpu = t.node(id);
    EXPECT_EQ(gpu.kind, NodeKind::kGpu);
    EXPECT_EQ(gpu.vendorId, 0x10de);
    EXPECT_EQ(gpu.name, "nvml" + std::to_string(g));
    EXPECT_NEAR(gpu.pcieLinkGBps, kGen5, 1e-4);
    EXPECT_EQ(gpu.package, g / 4);
    EXPECT_EQ(gpu.numaNode, g / 4);
    EXPECT_EQ(t.node(t.pciGroupOf(id)).pciBusId, switchBus(g / 2));
  }
  for (int s = 0; s < 4; ++s) {
    const int sw = t.findByPciBusId(switchBus(s));
    ASSERT_GE(sw, 0);
    EXPECT_EQ(t.node(sw).kind, NodeKind::kPciSwitch);
    EXPECT_EQ(t.node(sw).bridgeCount, 4);  // upstream port + 3 downstream ports
    EXPECT_EQ(t.node(sw).vendorId, 0x1000);
    const int nic = t.findByPciBusId(nicBus(s));
    ASSERT_GE(nic, 0);
    EXPECT_EQ(t.node(nic).kind, NodeKind::kNic);
    EXPECT_EQ(t.node(nic).name, "mlx5_" + std::to_string(s));
    EXPECT_EQ(t.node(nic).osDevices.size(), 2u);
    EXPECT_DOUBLE_EQ(t.node(nic).netSpeedGbps, 200.0);
    EXPECT_EQ(t.node(nic).classId, 0x0207);
  }
}

TEST_F(DiscoverXml, EightGpuServerAffinitiesAndPaths) {
  const Topology t = load(dataFile("gpu8_host_a.xml"));
  ASSERT_TRUE(t.finalized());
  // Every GPU's nearest NIC is the one on its own switch.
  for (int g = 0; g < 8; ++g) {
    const int nic = t.nearest(t.findByPciBusId(gpuBus(g)), NodeKind::kNic);
    ASSERT_GE(nic, 0);
    EXPECT_EQ(t.node(nic).pciBusId, nicBus(g / 2)) << "GPU " << g;
  }
  EXPECT_EQ(t.node(t.nearestGpuToNuma(1)).pciBusId, gpuBus(4));
  EXPECT_EQ(t.node(t.nearestNic(CpuSet::range(8, 15))).pciBusId, nicBus(2));
  EXPECT_EQ(t.node(t.nearestNicToNuma(0)).pciBusId, nicBus(0));

  const int gpu0 = t.findByPciBusId(gpuBus(0));
  // Paired GPUs: one NVLink, 300 GB/s from the NVLinkBandwidth matrix.
  std::optional<TopoPath> pair = t.path(gpu0, t.findByPciBusId(gpuBus(1)));
  ASSERT_TRUE(pair.has_value());
  EXPECT_EQ(pair->hops(), 1);
  EXPECT_EQ(pair->linkKinds, std::vector<LinkKind>{LinkKind::kNvlink});
  EXPECT_DOUBLE_EQ(pair->bandwidthGBps, 300.0);
  EXPECT_EQ(t.count(NodeKind::kGpu), 8);
  int nvlinks = 0;
  for (const TopoLink& l : t.links()) nvlinks += l.kind == LinkKind::kNvlink;
  EXPECT_EQ(nvlinks, 4);

  // Same socket, other switch: up through both switches and host bridges, all Gen5.
  std::optional<TopoPath> sameSocket = t.path(gpu0, t.findByPciBusId(gpuBus(2)));
  ASSERT_TRUE(sameSocket.has_value());
  EXPECT_EQ(sameSocket->count(LinkKind::kPcie), 4);
  EXPECT_EQ(sameSocket->count(LinkKind::kInterSocket), 0);
  EXPECT_NEAR(sameSocket->bandwidthGBps, kGen5, 1e-4);
  const std::vector<int> switches = t.switchesBetween(gpu0, t.findByPciBusId(gpuBus(2)));
  ASSERT_EQ(switches.size(), 2u);
  EXPECT_EQ(t.node(switches[0]).pciBusId, switchBus(0));
  EXPECT_EQ(t.node(switches[1]).pciBusId, switchBus(1));

  // Other socket: the socket link is the bottleneck.
  std::optional<TopoPath> otherSocket = t.path(gpu0, t.findByPciBusId(gpuBus(6)));
  ASSERT_TRUE(otherSocket.has_value());
  EXPECT_EQ(otherSocket->count(LinkKind::kInterSocket), 2);
  EXPECT_DOUBLE_EQ(otherSocket->bandwidthGBps,
                   defaultLinkModel(LinkKind::kInterSocket).bandwidthGBps);

  // GPU to its NIC: two PCIe links through one switch, limited by the NIC's Gen4 link.
  std::optional<TopoPath> toNic = t.path(gpu0, t.findByPciBusId(nicBus(0)));
  ASSERT_TRUE(toNic.has_value());
  EXPECT_EQ(toNic->linkKinds, (std::vector<LinkKind>{LinkKind::kPcie, LinkKind::kPcie}));
  EXPECT_NEAR(toNic->bandwidthGBps, kGen4, 1e-4);
  EXPECT_EQ(t.switchesBetween(gpu0, t.findByPciBusId(nicBus(0))).size(), 1u);

  // Out to the network: the NIC's 200 Gbit/s port.
  std::optional<TopoPath> out = t.path(gpu0, t.fabric());
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->nodes[out->nodes.size() - 2], t.findByPciBusId(nicBus(0)));
  EXPECT_DOUBLE_EQ(out->bandwidthGBps, 25.0);
}

TEST_F(DiscoverXml, SecondHostHasNoNvlink) {
  const Topology a = load(dataFile("gpu8_host_a.xml"));
  const Topology b = load(dataFile("gpu8_host_b.xml"));
  ASSERT_TRUE(a.finalized() && b.finalized());
  EXPECT_EQ(b.summary(), a.summary());
  for (const TopoLink& l : b.links()) EXPECT_NE(l.kind, LinkKind::kNvlink);
  std::optional<TopoPath> pair = b.path(b.findByPciBusId(gpuBus(0)), b.findByPciBusId(gpuBus(1)));
  ASSERT_TRUE(pair.has_value());
  EXPECT_EQ(pair->count(LinkKind::kPcie), 2);
  EXPECT_EQ(b.switchesBetween(b.findByPciBusId(gpuBus(0)), b.findByPciBusId(gpuBus(1))).size(), 1u);
  EXPECT_NEAR(pair->bandwidthGBps, kGen5, 1e-4);
  EXPECT_FALSE(a == b);
}

TEST_F(DiscoverXml, DumpThenLoadGivesTheSameGraph) {
  TempDir dir;
  for (const char* name : {"cpu_2socket.xml", "gpu8_host_a.xml", "gpu8_host_b.xml"}) {
    const std::string dump = dir.file(std::string("dump_") + name);
    const Topology first = load(dataFile(name), dump);
    ASSERT_TRUE(std::filesystem::exists(dump)) << name;
    const Topology second = load(dump);
    EXPECT_TRUE(first == second) << name << "\n"
                                 << first.describe() << "---\n"
                                 << second.describe();
  }
}

TEST_F(DiscoverXml, ThisMachineDumpsAndLoadsBack) {
  TempDir dir;
  TopologyOptions options;
  options.dumpFile = dir.file("this_machine.xml");
  Result<Topology> live = discoverTopology(options);
  ASSERT_TRUE(live.ok()) << live.status().message();
  EXPECT_GE(live->numPackages(), 1);
  EXPECT_GE(live->numNumaNodes(), 1);
  EXPECT_GE(live->numCores(), 1);
  EXPECT_GE(live->numPus(), live->numCores());
  EXPECT_FALSE(live->processBinding().pus.empty());
  EXPECT_TRUE(live->processBinding().pus.isSubsetOf(live->allPus()));
  EXPECT_FALSE(live->processBinding().cores.empty());

  const Topology back = load(options.dumpFile);
  EXPECT_TRUE(live.value() == back) << live->describe() << "---\n" << back.describe();
}

// With a cache directory the first process probes this machine and leaves hwloc's XML there; the
// next loads it: the same graph, and whatever the entry holds is what it gets. An entry that is
// not XML is probed over and rewritten.
TEST_F(DiscoverXml, ThisMachineIsProbedOnceThenLoadedFromTheCache) {
  TempDir dir;
  TopologyOptions options;
  options.cacheDir = dir.file("cache");
  Result<Topology> probed = discoverTopology(options);
  ASSERT_TRUE(probed.ok()) << probed.status().message();
  std::vector<std::string> entries;
  for (const auto& e : std::filesystem::directory_iterator(options.cacheDir)) {
    if (e.path().extension() == ".xml") entries.push_back(e.path().string());
  }
  ASSERT_EQ(entries.size(), 1u);
  Result<Topology> loaded = discoverTopology(options);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_TRUE(probed.value() == loaded.value()) << probed->describe() << "---\n"
                                                << loaded->describe();
  EXPECT_FALSE(loaded->processBinding().pus.empty());

  std::filesystem::copy_file(dataFile("gpu8_host_a.xml"), entries[0],
                             std::filesystem::copy_options::overwrite_existing);
  Result<Topology> fromEntry = discoverTopology(options);
  ASSERT_TRUE(fromEntry.ok()) << fromEntry.status().message();
  EXPECT_EQ(fromEntry->gpus().size(), 8u);

  std::ofstream(entries[0], std::ios::trunc) << "not a topology";
  Result<Topology> reprobed = discoverTopology(options);
  ASSERT_TRUE(reprobed.ok()) << reprobed.status().message();
  EXPECT_TRUE(probed.value() == reprobed.value());
  EXPECT_TRUE(discoverTopology(options).value() == probed.value());  // rewritten
}

// The cache keeps the 64 entries used last: a probe that writes an entry removes the oldest
// others with their lock files, and an entry read counts as used.
TEST_F(DiscoverXml, TheCacheKeepsTheEntriesUsedLast) {
  namespace fs = std::filesystem;
  TempDir dir;
  TopologyOptions options;
  options.cacheDir = dir.file("cache");
  fs::create_directories(options.cacheDir);
  const auto now = fs::file_time_type::clock::now();
  for (int i = 0; i < 70; ++i) {
    const std::string entry = options.cacheDir + "/topology-old" + std::to_string(i) + ".xml";
    std::ofstream(entry) << "an entry of another boot";
    std::ofstream(entry + ".lock");
    fs::last_write_time(entry, now - std::chrono::hours(100 - i));
  }
  std::ofstream(options.cacheDir + "/grid-x.bin") << "not the topology's";
  ASSERT_TRUE(discoverTopology(options).ok());
  auto count = [&](const std::string& extension) {
    int n = 0;
    for (const auto& e : fs::directory_iterator(options.cacheDir)) {
      n += e.path().filename().string().starts_with("topology-") &&
           e.path().extension() == extension;
    }
    return n;
  };
  EXPECT_EQ(count(".xml"), 64);
  EXPECT_EQ(count(".lock"), 64);  // the new entry's and those of the 63 newest others
  EXPECT_FALSE(fs::exists(options.cacheDir + "/topology-old6.xml"));
  EXPECT_FALSE(fs::exists(options.cacheDir + "/topology-old6.xml.lock"));
  EXPECT_TRUE(fs::exists(options.cacheDir + "/topology-old7.xml"));
  EXPECT_TRUE(fs::exists(options.cacheDir + "/grid-x.bin"));

  // Read, this machine's entry is marked as used.
  std::string mine;
  for (const auto& e : fs::directory_iterator(options.cacheDir)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() == ".xml" && !name.starts_with("topology-old")) mine = e.path();
  }
  ASSERT_FALSE(mine.empty());
  fs::last_write_time(mine, now - std::chrono::hours(200));
  ASSERT_TRUE(discoverTopology(options).ok());
  EXPECT_GT(fs::last_write_time(mine), now - std::chrono::hours(1));
}

// Discovery leaves hwloc's plugins for GPUs, displays and libxml2 closed through the variable
// hwloc reads, and the process's environment as it found it: unset again, or the user's value.
// Where the environment sets it already (the sanitizer stage of .ci/run leaves hwloc's PCI plugin
// out, whose library leaks when unloaded), only the user's case runs.
TEST_F(DiscoverXml, LeavesThePluginVariableAsItFoundIt) {
  constexpr const char* kVariable = "HWLOC_PLUGINS_BLACKLIST";
  const char* before = std::getenv(kVariable);
  const std::string userValue = before != nullptr ? before : "hwloc_pci";
  TempDir dir;
  TopologyOptions options;
  options.cacheDir = dir.file("cache");
  if (before == nullptr) {
    Result<Topology> probed = discoverTopology(options);
    ASSERT_TRUE(probed.ok()) << probed.status().message();
    EXPECT_EQ(std::getenv(kVariable), nullptr);
    Result<Topology> cached = discoverTopology(options);
    ASSERT_TRUE(cached.ok()) << cached.status().message();
    EXPECT_TRUE(probed.value() == cached.value());
    EXPECT_EQ(std::getenv(kVariable), nullptr);
    EXPECT_EQ(load(dataFile("gpu8_host_a.xml")).gpus().size(), 8u);
    EXPECT_EQ(std::getenv(kVariable), nullptr);
  }

  setenv(kVariable, userValue.c_str(), 1);
  Result<Topology> userChose = discoverTopology(options);
  const char* after = std::getenv(kVariable);
  const std::string kept = after != nullptr ? after : "(unset)";
  if (before == nullptr) unsetenv(kVariable);
  ASSERT_TRUE(userChose.ok()) << userChose.status().message();
  EXPECT_EQ(kept, userValue);
}

TEST_F(DiscoverXml, SysfsFallbackAgreesWithHwlocHere) {
  Result<Topology> hw = discoverTopology({}, DiscoveryMethod::kHwloc);
  Result<Topology> fs = discoverTopology({}, DiscoveryMethod::kSysfs);
  ASSERT_TRUE(hw.ok()) << hw.status().message();
  ASSERT_TRUE(fs.ok()) << fs.status().message();
  EXPECT_EQ(fs->count(NodeKind::kGpu) + fs->count(NodeKind::kNic), 0);
  // hwloc leaves out CPUs this process may not use (cgroups); sysfs lists every online CPU.
  EXPECT_TRUE(hw->allPus().isSubsetOf(fs->allPus()));
  if (hw->allPus() == fs->allPus()) {
    EXPECT_EQ(fs->numPackages(), hw->numPackages());
    EXPECT_EQ(fs->numNumaNodes(), hw->numNumaNodes());
    EXPECT_EQ(fs->numCores(), hw->numCores());
    EXPECT_EQ(fs->numPus(), hw->numPus());
    EXPECT_EQ(fs->processBinding().pus, hw->processBinding().pus);
  }
}

TEST_F(DiscoverXml, ReportsUnusableFiles) {
  TempDir dir;
  TopologyOptions missing;
  missing.xmlFile = dir.file("no_such_topology.xml");
  EXPECT_FALSE(discoverTopology(missing).ok());

  TopologyOptions notXml;
  notXml.xmlFile = dataFile("README.md");
  EXPECT_FALSE(discoverTopology(notXml).ok());

  TopologyOptions badDump;
  badDump.xmlFile = dataFile("cpu_2socket.xml");
  badDump.dumpFile = dir.file("no_such_dir/dump.xml");
  Result<Topology> r = discoverTopology(badDump);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("BRAID_TOPO_DUMP_FILE"), std::string::npos);
}

TEST(Discover, FallbackRefusesXmlFiles) {
  TopologyOptions load;
  load.xmlFile = dataFile("cpu_2socket.xml");
  Result<Topology> r = discoverTopology(load, DiscoveryMethod::kSysfs);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), braidInvalidUsage);

  TempDir dir;
  TopologyOptions dump;
  dump.dumpFile = dir.file("unused.xml");
  EXPECT_FALSE(discoverTopology(dump, DiscoveryMethod::kSysfs).ok());
  EXPECT_FALSE(std::filesystem::exists(dump.dumpFile));

  if (!hwlocAvailable()) {
    EXPECT_FALSE(discoverTopology({}, DiscoveryMethod::kHwloc).ok());
  }
  Result<Topology> automatic = discoverTopology({});
  ASSERT_TRUE(automatic.ok()) << automatic.status().message();
  EXPECT_GE(automatic->numPus(), 1);
}

}  // namespace
}  // namespace braid
