#include "topology/discover.h"

#include <sched.h>

#include <cerrno>
#include <vector>

#include "braid_build_config.h"
#include "topology/discover_internal.h"

namespace braid {

bool hwlocAvailable() { return BRAID_HAVE_HWLOC != 0; }

CpuSet processAffinity() {
  CpuSet out;
  // Start at the glibc default and grow: machines with more than 1024 CPUs exist.
  for (int ncpus = CPU_SETSIZE; ncpus <= (1 << 20); ncpus *= 2) {
    cpu_set_t* set = CPU_ALLOC(ncpus);
    if (set == nullptr) return out;
    const size_t size = CPU_ALLOC_SIZE(ncpus);
    CPU_ZERO_S(size, set);
    if (sched_getaffinity(0, size, set) == 0) {
      for (int c = 0; c < ncpus; ++c) {
        if (CPU_ISSET_S(c, size, set)) out.set(c);
      }
      CPU_FREE(set);
      return out;
    }
    CPU_FREE(set);
    if (errno != EINVAL) return out;
  }
  return out;
}

Result<Topology> discoverTopology(const TopologyOptions& options, DiscoveryMethod method) {
  const bool useHwloc =
      method == DiscoveryMethod::kHwloc || (method == DiscoveryMethod::kAuto && hwlocAvailable());
  if (useHwloc) {
    if (!hwlocAvailable()) return invalidUsage("topology: this build has no hwloc");
    return discoverWithHwloc(options);
  }
  if (!options.xmlFile.empty()) {
    return invalidUsage("topology: loading '" + options.xmlFile +
                        "' (BRAID_TOPO_FILE) needs a build with hwloc");
  }
  if (!options.dumpFile.empty()) {
    return invalidUsage("topology: dumping to '" + options.dumpFile +
                        "' (BRAID_TOPO_DUMP_FILE) needs a build with hwloc");
  }
  return discoverFromSysfs(options);
}

}  // namespace braid
