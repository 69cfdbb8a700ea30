#include "kernels/executor_protocol.h"

#include <algorithm>
#include <map>
#include <utility>

namespace braid::gpu {

std::vector<FifoSlotCount> countDeviceSlots(const Plan& plan) {
  std::map<std::pair<int, int>, FifoSlotCount> counts;
  auto at = [&](int peer, int channel) -> FifoSlotCount& {
    FifoSlotCount& c = counts[{peer, channel}];
    c.peer = peer;
    c.channel = channel;
    return c;
  };
  for (const Lane& lane : plan.lanes) {
    for (const Step& step : lane.steps) {
      const StepShape shape = deviceStepShape(step.op);
      // As runIndependent and runDependent move slots: each half of an independent step on its
      // own, a dependent step only when it moves bytes.
      if (shape.independent) {
        if (step.sendBytes > 0) ++at(step.sendPeers[0], lane.channel).posts;
        if (step.bytes > 0) ++at(step.recvPeers[0], lane.channel).releases;
        continue;
      }
      if (step.bytes == 0) continue;
      for (int i = 0; shape.sends && i < step.nsend; ++i)
        ++at(step.sendPeers[i], lane.channel).posts;
      for (int r = 0; shape.recvs && r < step.nrecv; ++r) {
        ++at(step.recvPeers[r], lane.channel).releases;
      }
    }
  }
  std::vector<FifoSlotCount> result;
  result.reserve(counts.size());
  for (const auto& [key, count] : counts) result.push_back(count);
  return result;
}

FlatPlan flattenPlan(const Plan& plan) {
  FlatPlan flat;
  flat.steps.reserve(plan.stepCount());
  for (const Lane& lane : plan.lanes) {
    DeviceLane l;
    l.firstStep = static_cast<uint32_t>(flat.steps.size());
    l.nsteps = static_cast<uint32_t>(lane.steps.size());
    l.channel = lane.channel;
    flat.lanes.push_back(l);
    flat.steps.insert(flat.steps.end(), lane.steps.begin(), lane.steps.end());
  }
  return flat;
}

}  // namespace braid::gpu
