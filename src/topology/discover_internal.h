// The two discovery back ends behind discoverTopology().
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "base/status.h"
#include "topology/discover.h"
#include "topology/topology.h"

namespace braid {

/// hwloc: probes this machine or loads options.xmlFile; dumps to options.dumpFile.
Result<Topology> discoverWithHwloc(const TopologyOptions& options);
/// sysfs/procfs under options.sysfsRoot: machine, packages, NUMA nodes, cores, PUs.
Result<Topology> discoverFromSysfs(const TopologyOptions& options);
/// This process's CPU affinity (sched_getaffinity); empty when it cannot be read.
CpuSet processAffinity();
/// A whole (sysfs or procfs) file, or nullopt when it cannot be opened.
std::optional<std::string> readTextFile(const std::filesystem::path& path);

}  // namespace braid
