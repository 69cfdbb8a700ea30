// A host's discovered topology kept as hwloc XML in a per-user cache, so that the ranks a host
// starts after the first load it (about a millisecond) instead of probing the machine again (tens
// of milliseconds, mostly reading PCI configuration space; far more on servers full of devices).
//
// The entry is named by a key over what discovery reads and processes of one host need not share:
// the kernel's boot, the PCI and network devices present, the online CPUs and NUMA nodes, the
// process's network namespace and cgroup, hwloc's version and HWLOC_* settings. A device that
// comes or goes, a container with other devices, a reboot: another key, a fresh discovery. Ranks
// that start together take the entry's lock in turn, so one discovers and the others load.
#pragma once

#include <string>

namespace braid {

/// The cache key of this process's view of its host, as hex digits: sysfsRoot is where the
/// devices are listed ("/sys"), `discovery` what discovers (its name and version).
std::string topologyCacheKey(const std::string& sysfsRoot, const std::string& discovery);

/// An exclusive lock on a cache entry, held while this process looks for the entry and, missing
/// it, discovers and writes it. Best effort: where the lock file cannot be made the holder goes
/// on unlocked. The kernel drops the lock of a process that dies.
class TopologyCacheLock {
 public:
  explicit TopologyCacheLock(const std::string& entryPath);
  ~TopologyCacheLock();
  TopologyCacheLock(const TopologyCacheLock&) = delete;
  TopologyCacheLock& operator=(const TopologyCacheLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace braid
