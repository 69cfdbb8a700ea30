#include "topology/topology_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace braid {
namespace {

// A fabricated sysfs tree: the key follows the devices it lists.
TEST(TopologyCache, KeyChangesWithTheDevicesPresent) {
  const std::filesystem::path root = std::filesystem::temp_directory_path() /
                                     ("braid_topo_cache_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(root / "bus/pci/devices/0000:00:01.0");
  std::filesystem::create_directories(root / "class/net/eth0");
  const std::string before = topologyCacheKey(root.string(), "hwloc 1");
  EXPECT_EQ(before.size(), 16u);
  EXPECT_EQ(topologyCacheKey(root.string(), "hwloc 1"), before);
  EXPECT_NE(topologyCacheKey(root.string(), "hwloc 2"), before);

  std::filesystem::create_directories(root / "class/net/eth1");
  const std::string moreNet = topologyCacheKey(root.string(), "hwloc 1");
  EXPECT_NE(moreNet, before);
  std::filesystem::create_directories(root / "bus/pci/devices/0000:3b:00.0");
  EXPECT_NE(topologyCacheKey(root.string(), "hwloc 1"), moreNet);
  std::filesystem::remove_all(root);
}

// The lock excludes every other open of the lock file (flock locks belong to the open file, so
// this holds within one process too), until its holder goes.
TEST(TopologyCache, LockIsHeldUntilItsHolderGoes) {
  const std::string entry = std::filesystem::temp_directory_path() /
                            ("braid_topo_lock_test_" + std::to_string(getpid()) + ".xml");
  auto othersMayTake = [&] {
    const int fd = ::open((entry + ".lock").c_str(), O_RDWR | O_CLOEXEC);
    const bool took = fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (fd >= 0) ::close(fd);
    return took;
  };
  {
    TopologyCacheLock held(entry);
    EXPECT_FALSE(othersMayTake());
  }
  EXPECT_TRUE(othersMayTake());
  std::filesystem::remove(entry + ".lock");
}

}  // namespace
}  // namespace braid
