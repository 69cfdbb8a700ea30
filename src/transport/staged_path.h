// The device path's staged FIFOs: how a device call reaches a peer that no GPU path reaches
// (another host, or BRAID_TRANSPORT without p2p). A socket transport of the device path's own links
// this rank with those peers; its proxy's FIFOs lie in host memory mapped into the device's address
// space (cudaHostRegister), where the device executor posts and reads them as it does the FIFOs of
// a p2p inbox - they have the same layout, [head | tail | slot headers | slot data] - and the
// proxy moves their slots over TCP. A kernel cannot ring the proxy, so each launch arms it first:
// the slots each (peer, channel) will post and free (countDeviceSlots), which the proxy polls for
// while they are outstanding.
//
// The device path keeps these FIFOs apart from the communicator's own network transport: each end
// of a FIFO counts its slots where it runs (the kernel in the device's FIFO table, the host
// executor in its connector), so the two executors cannot share one.
#pragma once

#include <atomic>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "fifo/fifo.h"
#include "kernels/cuda/device_abi.h"
#include "kernels/executor_protocol.h"
#include "transport/socket/socket_transport.h"
#include "transport/transport.h"

namespace braid {

/// Makes host memory reachable by the device: cudaHostRegister in the device layer; the address
/// as it is where host threads stand in for the kernel (tests).
class HostMemoryMapper {
 public:
  virtual ~HostMemoryMapper() = default;
  /// The device's address of [host, host + bytes) (page-aligned), valid while the mapper lives.
  virtual Result<char*> map(char* host, size_t bytes) = 0;
};

class StagedPath {
 public:
  /// Collective over ctx.bootstrap, as every transport factory: links this rank over TCP with
  /// the peers `wanted` names (and those that name it). ctx.rankWaker and ctx.abort are ignored:
  /// nobody sleeps on these FIFOs, and abort() stands for the communicator's flag.
  static Result<std::unique_ptr<StagedPath>> create(const TransportContext& ctx,
                                                    const std::vector<bool>& wanted,
                                                    std::unique_ptr<HostMemoryMapper> mapper);
  /// Unmaps the FIFOs, then closes the transport: flushing what was posted unless aborted.
  ~StagedPath();
  StagedPath(const StagedPath&) = delete;
  StagedPath& operator=(const StagedPath&) = delete;

  /// Whether the staged FIFOs link this rank with `peer`.
  bool reaches(int peer) const { return transport_->canConnect(peer); }
  /// The device's view of the FIFO this rank fills for `peer` on `channel`, mapped at first use.
  Result<gpu::DeviceFifo> sendFifo(int peer, int channel);
  /// The device's view of the FIFO `peer` fills for this rank on `channel`.
  Result<gpu::DeviceFifo> recvFifo(int peer, int channel);

  /// Tells the proxy what one run of a plan will post and free (countDeviceSlots); entries of
  /// peers these FIFOs do not link are left to the other paths.
  void arm(const std::vector<gpu::FifoSlotCount>& counts);
  /// The kernels were stopped: the proxy stops waiting for their slots, and closes without a
  /// flush.
  void abort();

  /// ok while the staged FIFOs work: else the transport's failure, a peer's failure notice, or
  /// the first linked peer that is gone. The device path watches it while it waits for kernels.
  Status health() const;

  /// The transport underneath: its failure, its peers' notices, their liveness.
  const Transport& transport() const { return *transport_; }
  /// The proxy (for tests: whether it sleeps), or nullptr when no peer is linked.
  NetworkProxy* proxy() { return transport_->proxy(); }

 private:
  StagedPath() = default;
  Result<gpu::DeviceFifo> deviceFifo(int peer, int channel, bool send);

  // The transport reads these until it is gone; the mapper goes first.
  std::atomic<bool> aborted_{false};
  Waker waker_;
  std::unique_ptr<SocketTransport> transport_;
  std::unique_ptr<HostMemoryMapper> mapper_;
  int rank_ = 0;
  int nranks_ = 1;
  int maxChannels_ = 1;
  std::map<std::pair<size_t, bool>, char*> mapped_;  ///< (FIFO index, send): device address
};

}  // namespace braid
