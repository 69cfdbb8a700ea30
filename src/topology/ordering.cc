#include "topology/ordering.h"

#include <algorithm>
#include <tuple>
#include <unordered_map>

namespace braid {

std::vector<int> orderRanks(const std::vector<RankPlacement>& placements) {
  const int n = static_cast<int>(placements.size());
  // Host position = order of first appearance, i.e. of the host's lowest rank.
  std::unordered_map<uint64_t, int> hostPosition;
  for (const RankPlacement& p : placements)
    hostPosition.emplace(p.hostHash, static_cast<int>(hostPosition.size()));

  std::vector<int> order(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) order[static_cast<size_t>(r)] = r;
  auto key = [&](int r) {
    const RankPlacement& p = placements[static_cast<size_t>(r)];
    const Locality& l = p.locality;
    return std::make_tuple(hostPosition.at(p.hostHash), l.package, l.numaNode, l.pciSwitch,
                           l.nearestGpu, r);
  };
  std::sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b); });
  return order;
}

RingCrossings countRingCrossings(const std::vector<int>& order,
                                 const std::vector<RankPlacement>& placements) {
  RingCrossings c;
  const size_t n = order.size();
  if (n < 2) return c;
  for (size_t i = 0; i < n; ++i) {
    const RankPlacement& a = placements[static_cast<size_t>(order[i])];
    const RankPlacement& b = placements[static_cast<size_t>(order[(i + 1) % n])];
    if (a.hostHash != b.hostHash) {
      ++c.hosts;
      continue;
    }
    if (a.locality.package != b.locality.package) ++c.packages;
    if (a.locality.numaNode != b.locality.numaNode) ++c.numaNodes;
    if (a.locality.pciSwitch != b.locality.pciSwitch) ++c.pciSwitches;
  }
  return c;
}

}  // namespace braid
