// RDMA transport (InfiniBand or RoCE) between ranks on different hosts, on libibverbs loaded at
// run time (verbs_api.h), so the library runs where rdma-core is absent.
//
// Every rank that some pair may need opens the first active port of the first device BRAID_IB_HCA
// allows (ib_device.h) and allocates a protection domain. Set-up exchanges O(1) bytes per rank,
// in one round with the socket transport's (network_links.h): which peers it links, as a rule
// and its exceptions (link_wishes.h), then whether it has a usable port and the address of the
// TCP listener it takes queue pair requests on. Queue pairs are made on
// first use: the first send or receive FIFO to a peer makes the pair's reliable-connected queue
// pair, completion queue and control block and trades the halves (numbers, LID, GID, where the
// control block is) with that peer alone (qp_connector.h), so a rank holds verbs resources only for
// the peers its plans and sends use, and nothing after the exchange is collective.
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

#include "bootstrap/socket.h"
#include "transport/link_wishes.h"
#include "transport/network_transport.h"

namespace braid {

struct VerbsApi;
class QpConnector;

class IbTransport final : public NetworkTransport {
 public:
  /// Set-up in three steps around an exchange shared with the socket transport
  /// (createNetworkTransports, network_links.h, collective over ctx.bootstrap). prepare() opens
  /// the device where this rank wants some peer over RDMA (wanted[p]; possibly none), exchanging
  /// nothing; verbs: the function table to use, nullptr loads libibverbs. wishes() is its part of
  /// the exchange (wanted, whether it has a usable port, where it takes queue pair requests).
  /// link() takes what the exchange agreed, once: a pair is linked when both ranks have a usable
  /// port and either wants it; its queue pair comes on first use.
  static std::unique_ptr<IbTransport> prepare(const TransportContext& ctx,
                                              const std::vector<bool>& wanted,
                                              const VerbsApi* verbs = nullptr);
  WishSet wishes() const;
  Status link(const TransportContext& ctx, const LinkWishes& wishes);
  ~IbTransport() override;

  std::string_view name() const override { return "ib"; }
  /// Why this rank has no usable RDMA port ("" when it has one).
  const std::string& unavailableReason() const { return unavailable_; }
  /// Connects the queue pair with every linked peer now, for a user whose slots reach the proxy
  /// without a FIFO handed out first (the staged device path, which the kernel posts to directly).
  Status connectAll();
  /// Peers whose queue pairs are connected so far.
  int connectedPeers() const;
  /// "mlx5_0:1 (RoCE, GID 3)" and the like, for logs.
  const std::string& deviceDescription() const { return deviceName_; }
  /// Why this rank's RDMA stack cannot register device memory exported as a dma-buf ("" if it
  /// can), for GPUDirect RDMA (gdr_policy.h).
  const std::string& dmabufWhyNot() const { return dmabufWhyNot_; }

 private:
  /// What each rank tells the others with its wishes: whether it opened a usable port, and where
  /// it takes queue pair requests.
  struct Card {
    uint8_t ready = 0;  ///< 1: a usable port and a listener
    uint8_t address[SocketAddress::kWireBytes] = {};
  };
  struct Opened;

  explicit IbTransport(const TransportContext& ctx);

  Status connectForSend(int peer) override;
  Status connectForRecv(int peer) override;

  int nranks_ = 0;
  std::vector<bool> wanted_;
  Card card_;
  std::unique_ptr<Opened> opened_;  ///< from prepare() until link()
  std::string unavailable_;
  std::string deviceName_;
  std::string dmabufWhyNot_ = "no RDMA device";
  /// Last member: stops accepting queue pair requests before the rest goes.
  std::unique_ptr<QpConnector> connector_;
};

}  // namespace braid
