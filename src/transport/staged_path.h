// The device path's staged FIFOs: how a device call reaches a peer that no GPU path reaches
// (another host, or BRAID_TRANSPORT without p2p). Network transports of the device path's own -
// RDMA where both ranks have a usable port, else TCP - link this rank with those peers; their
// proxies' FIFOs lie in host memory mapped into the device's address space (cudaHostRegister,
// before the NIC registers it), where the device executor posts and reads them as it does the
// FIFOs of a p2p inbox - they have the same layout, [head | tail | slot headers | slot data] -
// and the proxies move their slots over the network. A kernel cannot ring a proxy, so each launch
// arms them first: the slots each (peer, channel) will post and free (countDeviceSlots), which a
// proxy polls for while they are outstanding.
//
// The device path keeps these FIFOs apart from the communicator's own network transports: each
// end of a FIFO counts its slots where it runs (the kernel in the device's FIFO table, the host
// executor in its connector), so the two executors cannot share one.
#pragma once

#include <atomic>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "fifo/fifo.h"
#include "kernels/cuda/device_abi.h"
#include "kernels/executor_protocol.h"
#include "transport/gdr_policy.h"
#include "transport/ib/ib_transport.h"
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

/// Which networks the staged FIFOs may use (BRAID_TRANSPORT).
struct StagedMedia {
  bool rdma = true;
  bool tcp = true;
};

class StagedPath {
 public:
  /// Collective over ctx.bootstrap, as every transport factory: links this rank with the peers
  /// `wanted` names (and those that name it), over RDMA where both have a port, else over TCP.
  /// ctx.rankWaker and ctx.abort are ignored: nobody sleeps on these FIFOs, and abort() stands
  /// for the communicator's flag.
  static Result<std::unique_ptr<StagedPath>> create(const TransportContext& ctx,
                                                    const std::vector<bool>& wanted,
                                                    StagedMedia media,
                                                    std::unique_ptr<HostMemoryMapper> mapper);
  /// As above; `gpuGdrWhyNot` says why the GPU cannot export its memory to the NIC ("" if it
  /// can), for BRAID_GDR (gdr_policy.h): its decision is logged once, and BRAID_GDR=1 fails here
  /// where GPUDirect RDMA cannot work for a peer reached over RDMA.
  static Result<std::unique_ptr<StagedPath>> create(const TransportContext& ctx,
                                                    const std::vector<bool>& wanted,
                                                    StagedMedia media,
                                                    std::unique_ptr<HostMemoryMapper> mapper,
                                                    const std::string& gpuGdrWhyNot);
  /// Unmaps the FIFOs, then closes the transports: flushing what was posted unless aborted.
  ~StagedPath();
  StagedPath(const StagedPath&) = delete;
  StagedPath& operator=(const StagedPath&) = delete;

  /// Whether the staged FIFOs link this rank with `peer`.
  bool reaches(int peer) const { return transportOf(peer) != nullptr; }
  /// "RDMA" or "TCP": what carries the staged FIFOs of `peer`, or why nothing does.
  std::string describe(int peer) const;
  /// The device's view of the FIFO this rank fills for `peer` on `channel`, mapped at first use.
  Result<gpu::DeviceFifo> sendFifo(int peer, int channel);
  /// The device's view of the FIFO `peer` fills for this rank on `channel`.
  Result<gpu::DeviceFifo> recvFifo(int peer, int channel);

  /// Tells the proxies what one run of a plan will post and free (countDeviceSlots); entries of
  /// peers these FIFOs do not link are left to the other paths.
  void arm(const std::vector<gpu::FifoSlotCount>& counts);
  /// The kernels were stopped: the proxies stop waiting for their slots, and close without a
  /// flush.
  void abort();
  /// The first failure of a transport underneath (a malformed frame, a completion error), if any.
  std::optional<Status> failure() const;
  /// ok while the staged FIFOs work: else a transport's failure, a peer's failure notice, or the
  /// first linked peer that is gone. The device path watches it while it waits for kernels.
  Status health() const;

  /// Whether the FIFOs to RDMA peers lie in device memory (GPUDirect RDMA); never yet.
  bool gdr() const { return gdr_; }
  /// The proxy that moves `peer`'s FIFOs (for tests: whether it sleeps), or nullptr.
  NetworkProxy* proxyOf(int peer) const;

 private:
  StagedPath() = default;
  /// The transports made (RDMA, then TCP).
  std::vector<NetworkTransport*> transports() const;
  NetworkTransport* transportOf(int peer) const;
  Result<gpu::DeviceFifo> deviceFifo(int peer, int channel, bool send);

  // The transports read these until they are gone; the mapper goes first.
  std::atomic<bool> aborted_{false};
  Waker waker_;
  StagedMedia media_;
  std::unique_ptr<IbTransport> rdma_;
  std::unique_ptr<SocketTransport> tcp_;
  std::unique_ptr<HostMemoryMapper> mapper_;
  int rank_ = 0;
  int nranks_ = 1;
  int maxChannels_ = 1;
  bool gdr_ = false;
  std::map<std::pair<size_t, bool>, char*> mapped_;  ///< (FIFO index, send): device address
};

}  // namespace braid
