#include "device/device_peer_paths.h"

#include <algorithm>
#include <numeric>

namespace braid {

std::vector<int> gpuIslands(int nranks, const std::function<bool(int, int)>& linked) {
  std::vector<std::vector<int>> everyone(1, std::vector<int>(size_t(std::max(0, nranks))));
  std::iota(everyone[0].begin(), everyone[0].end(), 0);
  return gpuIslands(nranks, linked, everyone);
}

std::vector<int> gpuIslands(int nranks, const std::function<bool(int, int)>& linked,
                            const std::vector<std::vector<int>>& groups) {
  // Union-find over the pairs linked both ways; each root keeps the island's lowest rank.
  std::vector<int> root(size_t(std::max(0, nranks)));
  std::iota(root.begin(), root.end(), 0);
  auto find = [&](int r) {
    while (root[size_t(r)] != r) r = root[size_t(r)] = root[size_t(root[size_t(r)])];
    return r;
  };
  for (const std::vector<int>& group : groups) {
    for (size_t i = 0; i < group.size(); ++i) {
      for (size_t j = i + 1; j < group.size(); ++j) {
        const int a = group[i], b = group[j];
        if (a < 0 || b < 0 || a >= nranks || b >= nranks) continue;
        if (!linked(a, b) || !linked(b, a)) continue;
        const int ra = find(a), rb = find(b);
        if (ra != rb) root[size_t(std::max(ra, rb))] = std::min(ra, rb);
      }
    }
  }
  std::vector<int> island(root.size(), -1);
  std::vector<int> numberOfRoot(root.size(), -1);
  int next = 0;
  for (int r = 0; r < nranks; ++r) {
    int& number = numberOfRoot[size_t(find(r))];
    if (number < 0) number = next++;
    island[size_t(r)] = number;
  }
  return island;
}

DevicePeerPaths::DevicePeerPaths(int rank, const std::vector<PeerReach>& reach)
    : rank_(rank), reach_(reach) {
  const int n = static_cast<int>(reach.size());
  send_.assign(n, DevicePeerPath::kNone);
  recv_.assign(n, DevicePeerPath::kNone);
  for (int p = 0; p < n; ++p) {
    if (p == rank) continue;
    const PeerReach& r = reach[p];
    auto pathOf = [&](bool gpu) {
      if (gpu) return DevicePeerPath::kGpuMemory;
      return r.staged ? DevicePeerPath::kStaged : DevicePeerPath::kNone;
    };
    send_[p] = pathOf(r.gpuSend);
    recv_[p] = pathOf(r.gpuRecv);
  }
}

std::string DevicePeerPaths::describe(int peer) const {
  if (!valid(peer)) return "no such rank";
  if (peer == rank_) return "this rank";
  const PeerReach& r = reach_[peer];
  const bool staged =
      send_[peer] == DevicePeerPath::kStaged || recv_[peer] == DevicePeerPath::kStaged;
  const bool none = send_[peer] == DevicePeerPath::kNone || recv_[peer] == DevicePeerPath::kNone;
  if (none) {
    return "no GPU path (" + r.gpuHow + ") and no path through host memory (" +
           (r.stagedWhyNot.empty() ? std::string("not linked") : r.stagedWhyNot) + ")";
  }
  if (staged)
    return "staged through pinned host memory over " + r.stagedOver + " (" + r.gpuHow + ")";
  return r.gpuHow;
}

bool DevicePeerPaths::anyStaged() const {
  for (size_t p = 0; p < send_.size(); ++p) {
    if (send_[p] == DevicePeerPath::kStaged || recv_[p] == DevicePeerPath::kStaged) return true;
  }
  return false;
}

Status DevicePeerPaths::check(const Plan& plan) const {
  auto unreachable = [&](int peer) {
    return invalidUsage("device buffers: rank " + std::to_string(rank_) + " cannot reach rank " +
                        std::to_string(peer) + ": " + describe(peer) +
                        "; a device call exchanges with ranks of this host through GPU memory "
                        "and with others through host memory over RDMA or TCP, which "
                        "BRAID_TRANSPORT must then allow (ib or socket)");
  };
  for (const Lane& lane : plan.lanes) {
    for (const Step& step : lane.steps) {
      const StepShape shape = stepShape(step.op);
      for (int i = 0; shape.recvs && i < step.nrecv; ++i) {
        if (recv(step.recvPeers[i]) == DevicePeerPath::kNone) return unreachable(step.recvPeers[i]);
      }
      for (int i = 0; shape.sends && i < step.nsend; ++i) {
        if (send(step.sendPeers[i]) == DevicePeerPath::kNone) return unreachable(step.sendPeers[i]);
      }
    }
  }
  return okStatus();
}

std::vector<gpu::FifoSlotCount> DevicePeerPaths::stagedSlots(const Plan& plan) const {
  std::vector<gpu::FifoSlotCount> staged;
  for (gpu::FifoSlotCount c : gpu::countDeviceSlots(plan)) {
    if (send(c.peer) != DevicePeerPath::kStaged) c.posts = 0;
    if (recv(c.peer) != DevicePeerPath::kStaged) c.releases = 0;
    if (c.posts != 0 || c.releases != 0) staged.push_back(c);
  }
  return staged;
}

}  // namespace braid
