// The sysfs fallback, forced (DiscoveryMethod::kSysfs) so it runs in builds with hwloc too, over a
// fabricated sysfs tree: 2 packages x 4 cores x 2 hyperthreads, one NUMA node per package, a
// CPU-less NUMA node (a memory expander) and one offline CPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "topology/discover.h"

namespace braid {
namespace {

class FakeSysfs {
 public:
  FakeSysfs() {
    root_ =
        std::filesystem::temp_directory_path() / ("braid_fake_sysfs_" + std::to_string(getpid()));
    std::filesystem::remove_all(root_);
  }
  ~FakeSysfs() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  void write(const std::string& relative, const std::string& text) {
    const std::filesystem::path p = root_ / relative;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::string root() const { return root_.string(); }

 private:
  std::filesystem::path root_;
};

// Linux numbers hyperthreads like this on most x86 servers: cpu N and N+8 share a core.
void writeTwoSocketMachine(FakeSysfs& fs) {
  fs.write("devices/system/cpu/online", "0-15\n");
  for (int cpu = 0; cpu < 17; ++cpu) {  // cpu16 exists but is offline
    const std::string dir = "devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    const int package = (cpu % 8) / 4;
    fs.write(dir + "physical_package_id", std::to_string(package) + "\n");
    fs.write(dir + "core_id", std::to_string(cpu % 4) + "\n");  // core ids repeat per package
  }
  fs.write("devices/system/cpu/cpufreq/boost", "1\n");  // not a CPU directory
  fs.write("devices/system/node/node0/cpulist", "0-3,8-11\n");
  fs.write("devices/system/node/node1/cpulist", "4-7,12-15\n");
  fs.write("devices/system/node/node2/cpulist", "\n");
  fs.write("devices/system/node/online", "0-2\n");
}

TEST(DiscoverSysfs, ReadsPackagesNumaNodesCoresAndPus) {
  FakeSysfs fs;
  writeTwoSocketMachine(fs);
  TopologyOptions options;
  options.sysfsRoot = fs.root();
  Result<Topology> r = discoverTopology(options, DiscoveryMethod::kSysfs);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Topology& t = r.value();
  EXPECT_EQ(t.numPackages(), 2);
  EXPECT_EQ(t.numNumaNodes(), 3);
  EXPECT_EQ(t.numCores(), 8);
  EXPECT_EQ(t.numPus(), 16);
  EXPECT_TRUE(t.gpus().empty());
  EXPECT_TRUE(t.nics().empty());
  EXPECT_EQ(t.allPus(), CpuSet::range(0, 15));

  EXPECT_EQ(t.numaNodeOf(CpuSet::of({4, 12})), 1);
  EXPECT_EQ(t.packageOf(CpuSet::of({3, 11})), 0);
  // cpu 1 and cpu 9 are hyperthreads of one core.
  const int anchor = t.anchorOf(CpuSet::of({1, 9}));
  EXPECT_EQ(t.node(anchor).kind, NodeKind::kCore);
  EXPECT_EQ(t.node(anchor).cpuset, CpuSet::of({1, 9}));

  // The CPU-less NUMA node hangs off the machine; the others sit in their package.
  const TopoNode& expander = t.node(t.findNuma(2));
  EXPECT_EQ(expander.parent, 0);
  EXPECT_TRUE(expander.cpuset.empty());
  EXPECT_EQ(t.node(t.findNuma(1)).parent, t.findPackage(1));
  EXPECT_EQ(t.node(t.findNuma(1)).package, 1);

  std::optional<TopoPath> across =
      t.path(t.anchorOf(CpuSet::of({0})), t.anchorOf(CpuSet::of({15})));
  ASSERT_TRUE(across.has_value());
  EXPECT_EQ(across->count(LinkKind::kInterSocket), 2);

  // The binding is this process's affinity limited to the described CPUs.
  EXPECT_FALSE(t.processBinding().pus.empty());
  EXPECT_TRUE(t.processBinding().pus.isSubsetOf(t.allPus()));
}

TEST(DiscoverSysfs, WithoutNumaOrTopologyFilesStillOneMachine) {
  FakeSysfs fs;
  fs.write("devices/system/cpu/cpu0/uevent", "");
  fs.write("devices/system/cpu/cpu1/uevent", "");
  fs.write("devices/system/cpu/cpu2/uevent", "");
  TopologyOptions options;
  options.sysfsRoot = fs.root();
  Result<Topology> r = discoverTopology(options, DiscoveryMethod::kSysfs);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->numPackages(), 1);
  EXPECT_EQ(r->numNumaNodes(), 1);
  EXPECT_EQ(r->numCores(), 3);
  EXPECT_EQ(r->numPus(), 3);
  EXPECT_EQ(r->numaNodeOf(CpuSet::range(0, 2)), 0);
}

TEST(DiscoverSysfs, FailsWithoutCpus) {
  FakeSysfs fs;
  fs.write("devices/system/node/node0/cpulist", "0\n");
  TopologyOptions options;
  options.sysfsRoot = fs.root();
  EXPECT_FALSE(discoverTopology(options, DiscoveryMethod::kSysfs).ok());

  fs.write("devices/system/cpu/online", "0-x\n");
  EXPECT_FALSE(discoverTopology(options, DiscoveryMethod::kSysfs).ok());
}

TEST(DiscoverSysfs, ThisMachine) {
  Result<Topology> r = discoverTopology({}, DiscoveryMethod::kSysfs);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_GE(r->numPackages(), 1);
  EXPECT_GE(r->numNumaNodes(), 1);
  EXPECT_GE(r->numCores(), 1);
  EXPECT_GE(r->numPus(), r->numCores());
  EXPECT_FALSE(r->processBinding().cores.empty());
}

}  // namespace
}  // namespace braid
