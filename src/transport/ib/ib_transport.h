// RDMA transport (InfiniBand or RoCE) between ranks on different hosts, on libibverbs loaded at
// run time (verbs_api.h), so the library runs where rdma-core is absent.
//
// Every rank opens the first active port of the first device BRAID_IB_HCA allows (ib_device.h),
// allocates a protection domain, one completion queue and, per linked peer, one reliable-connected
// queue pair; the pair's numbers, LID, GID and the addresses and keys of the FIFOs it writes into
// are exchanged through the bootstrap and the queue pairs are brought to RTS.
//
// Data path, driven by one proxy thread per communicator (ib_proxy.h): both FIFOs of a (peer,
// channel) live in registered local memory. When the rank posts a slot the proxy RDMA-writes its
// data, then its header with immediate data, straight into the same slot of the peer's receive
// FIFO; the receiving proxy polls the completion, sees the immediate (channel and sequence) and
// posts the slot. When the rank frees a receive slot the proxy writes the new tail into the
// sender's credit word (a write with immediate too, so the sender learns without polling memory).
// Every write is signalled and a send slot is freed when its completions arrive.
//
// A rank without a usable device (no libibverbs, no device, no active port) links nobody and says
// why in unavailableReason(); the communicator then uses the socket transport for those peers.
// Failure, notices, liveness and the flush at destruction are NetworkTransport's
// (network_transport.h): a queue pair that fails marks its peer gone, a completion error is the
// transport's failure().
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/network_transport.h"

namespace braid {

struct VerbsApi;

class IbTransport final : public NetworkTransport {
 public:
  /// Collective over ctx.bootstrap: every rank calls it, with wanted[p] set for the peers it
  /// would reach over RDMA (possibly none). A pair is linked when both ranks have a usable port
  /// and either wants it. verbs: the function table to use; nullptr loads libibverbs.
  static Result<std::unique_ptr<IbTransport>> create(const TransportContext& ctx,
                                                     const std::vector<bool>& wanted,
                                                     const VerbsApi* verbs = nullptr);

  std::string_view name() const override { return "ib"; }
  /// Why this rank has no usable RDMA port ("" when it has one).
  const std::string& unavailableReason() const { return unavailable_; }
  /// "mlx5_0:1 (RoCE, GID 3)" and the like, for logs.
  const std::string& deviceDescription() const { return device_; }
  /// Why this rank's RDMA stack cannot register device memory exported as a dma-buf ("" if it
  /// can), for GPUDirect RDMA (gdr_policy.h).
  const std::string& dmabufWhyNot() const { return dmabufWhyNot_; }

 private:
  explicit IbTransport(const TransportContext& ctx) : NetworkTransport(ctx, "RDMA") {}

  std::string unavailable_;
  std::string device_;
  std::string dmabufWhyNot_ = "no RDMA device";
};

}  // namespace braid
