// Topology discovery: hwloc when the build has it (probing this machine, or loading an hwloc XML
// description), else a small reader of Linux sysfs that finds packages, NUMA nodes, cores and PUs
// but no PCI devices.
#pragma once

#include <string>

#include "base/status.h"
#include "topology/topology.h"

namespace braid {

/// Where the topology comes from, and where to write it.
struct TopologyOptions {
  /// BRAID_TOPO_FILE: an hwloc XML file to load instead of probing this machine.
  std::string xmlFile;
  /// BRAID_TOPO_DUMP_FILE: where to write what was found, as hwloc XML.
  std::string dumpFile;
  /// Root of the sysfs tree the fallback reads (tests point it at a fabricated tree).
  std::string sysfsRoot = "/sys";
  /// Where hwloc's probe of this machine is kept for the next process (topology_cache.h); empty:
  /// probe every time.
  std::string cacheDir;
};

/// Which discovery runs.
enum class DiscoveryMethod {
  kAuto,   ///< hwloc when built with it, else sysfs
  kHwloc,  ///< hwloc only (an error in a build without it)
  kSysfs,  ///< the fallback, even when hwloc is available
};

/// Discovers (or loads) the topology and this process's CPU binding (Topology::processBinding;
/// for a loaded XML file, the binding is this process's affinity limited to the described PUs,
/// or every PU when they do not meet). The sysfs fallback cannot load or dump XML files and
/// returns an error when asked to.
Result<Topology> discoverTopology(const TopologyOptions& options,
                                  DiscoveryMethod method = DiscoveryMethod::kAuto);

/// Whether this build can use hwloc.
bool hwlocAvailable();

}  // namespace braid
