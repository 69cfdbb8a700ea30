#include "topology/process_topology.h"

#include <map>
#include <mutex>
#include <utility>

namespace braid {

Result<std::shared_ptr<const Topology>> processTopology(const TopologyOptions& options) {
  static std::mutex mutex;
  static auto* cache =
      new std::map<std::pair<std::string, std::string>, std::shared_ptr<const Topology>>();
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(options.xmlFile, options.dumpFile);
  auto it = cache->find(key);
  if (it != cache->end()) return it->second;
  ASSIGN_OR_RETURN(Topology topology, discoverTopology(options));
  auto shared = std::make_shared<const Topology>(std::move(topology));
  cache->emplace(key, shared);
  return shared;
}

}  // namespace braid
