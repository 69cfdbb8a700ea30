#include "algorithms/plan_peers.h"

#include <algorithm>

namespace braid {

std::vector<PlanConnection> planConnections(const Plan& plan) {
  std::vector<PlanConnection> out;
  for (const Lane& lane : plan.lanes) {
    for (const Step& step : lane.steps) {
      for (int i = 0; i < step.nrecv; ++i) {
        out.push_back(PlanConnection{step.recvPeers[i], lane.channel, false});
      }
      for (int i = 0; i < step.nsend; ++i) {
        out.push_back(PlanConnection{step.sendPeers[i], lane.channel, true});
      }
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<int> planPeers(const Plan& plan) {
  std::vector<int> peers;
  for (const PlanConnection& c : planConnections(plan)) peers.push_back(c.peer);
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  return peers;
}

}  // namespace braid
