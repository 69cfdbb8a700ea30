// The topology of the machine this process runs on, discovered once per process: hwloc probing
// takes milliseconds and the hardware does not change while the process lives. Each distinct
// (BRAID_TOPO_FILE, BRAID_TOPO_DUMP_FILE) pair is discovered on its own.
#pragma once

#include <memory>

#include "base/status.h"
#include "topology/discover.h"
#include "topology/topology.h"

namespace braid {

/// This machine's topology for `options`, discovered on the first call and shared after it.
Result<std::shared_ptr<const Topology>> processTopology(const TopologyOptions& options);

}  // namespace braid
