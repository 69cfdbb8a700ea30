// How the device path reaches each peer of a communicator: through GPU memory (the p2p
// transport), staged through pinned host memory over RDMA or TCP (transport/staged_path.h) where
// no GPU path does, or not at all - and why. Decided when the device side of a communicator is set
// up, consulted for every plan. Plain C++ (every build), so that its messages are unit-tested.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "algorithms/plan.h"
#include "base/status.h"
#include "kernels/executor_protocol.h"

namespace braid {

enum class DevicePeerPath : uint8_t {
  kNone,       ///< no path: a device call exchanging with the peer fails
  kGpuMemory,  ///< FIFOs in device memory (p2p)
  kStaged,     ///< FIFOs in pinned host memory that a network proxy (ib, socket) moves
};

/// What the p2p transport and the staged FIFOs say of one peer.
struct PeerReach {
  bool gpuSend = false;            ///< p2p carries this rank's data to the peer
  bool gpuRecv = false;            ///< p2p carries the peer's data to this rank
  std::string gpuHow;              ///< P2pTransport::describe: how, or why not
  bool staged = false;             ///< the staged FIFOs link the pair (both directions)
  std::string stagedWhyNot;        ///< when not staged: why (BRAID_TRANSPORT excludes socket, ...)
  std::string stagedOver = "TCP";  ///< when staged: the network that carries it (TCP, RDMA)
};

/// The GPU island of every one of `nranks` ranks: ranks whose GPUs reach each other's memory both
/// ways (linked(a, b): a's data reaches b through GPU memory), directly or through other ranks of
/// the island, share one. Numbered 0.. in order of each island's first rank.
std::vector<int> gpuIslands(int nranks, const std::function<bool(int, int)>& linked);
/// The same, asking only about pairs inside one of `groups` (GPUs reach each other within a host
/// only, so the hosts' ranks: O(n x ranks per host) questions, not O(n^2)); a rank in no group is
/// an island of its own.
std::vector<int> gpuIslands(int nranks, const std::function<bool(int, int)>& linked,
                            const std::vector<std::vector<int>>& groups);

class DevicePeerPaths {
 public:
  DevicePeerPaths() = default;
  /// reach[peer] for every rank (this rank's own entry is ignored).
  DevicePeerPaths(int rank, const std::vector<PeerReach>& reach);

  /// The path of this rank's data to `peer`, and of `peer`'s data to this rank.
  DevicePeerPath send(int peer) const { return valid(peer) ? send_[peer] : DevicePeerPath::kNone; }
  DevicePeerPath recv(int peer) const { return valid(peer) ? recv_[peer] : DevicePeerPath::kNone; }
  /// "same GPU (CUDA IPC)", "staged through pinned host memory over RDMA (another host)", or why
  /// none.
  std::string describe(int peer) const;
  /// Whether some peer is reached through staged FIFOs.
  bool anyStaged() const;

  /// ok, or an error naming the first peer `plan` exchanges with that no path reaches, and why.
  Status check(const Plan& plan) const;
  /// The slots one run of `plan` posts and frees on staged FIFOs (what their proxy is armed with).
  std::vector<gpu::FifoSlotCount> stagedSlots(const Plan& plan) const;

 private:
  bool valid(int peer) const { return peer >= 0 && peer < static_cast<int>(send_.size()); }

  int rank_ = 0;
  std::vector<DevicePeerPath> send_;
  std::vector<DevicePeerPath> recv_;
  std::vector<PeerReach> reach_;
};

}  // namespace braid
