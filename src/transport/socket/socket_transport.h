// TCP transport between ranks on different hosts (or any ranks, with BRAID_TRANSPORT=socket).
//
// Each linked pair of ranks shares BRAID_SOCKET_NSTREAMS authenticated TCP streams
// (socket_connect.h); one proxy thread per communicator moves FIFO slots between local memory and
// those streams (socket_proxy.h), so the executor sees the same FIFOs as over shared memory. A
// pair is linked when either rank asks for it at set-up, so both ends always agree.
//
// Streams are opened on first use, not at set-up: the first time this rank sends to a linked
// peer that it has no streams with, it opens them to the peer's listener, where an acceptor thread
// takes them in (in either direction, whoever sends first); the pair then uses them both ways. A
// rank thus holds streams, staging buffers and FIFO pages only for the peers its plans and sends
// use: O(1) per channel for rings and trees, O(log n) for halving and doubling. Set-up exchanges
// O(1) bytes per rank, in one round with the RDMA transport's (network_links.h) (an address, a
// stream count and the rare peers a rank links against its host's rule), so nothing in it grows as
// n^2.
//
// Failure: a peer whose streams close, or whose host stops answering for BRAID_PEER_TIMEOUT (TCP
// keepalive and user timeout on every stream), is reported by peerAlive(), a malformed frame by
// failure(), a peer's failure notice by peerFailure(); these, notifyFailure() and the flush at
// destruction are NetworkTransport's (network_transport.h).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "transport/link_wishes.h"
#include "transport/network_transport.h"
#include "transport/socket/socket_connect.h"

namespace braid {

class SocketTransport final : public NetworkTransport {
 public:
  /// Collective over ctx.bootstrap: every rank calls it, with wanted[p] set for the peers it
  /// wants to reach over TCP (possibly none). Needs ctx.rankWaker. The same as prepare(),
  /// exchangeLinkWishes() alone, then link().
  static Result<std::unique_ptr<SocketTransport>> create(const TransportContext& ctx,
                                                         const std::vector<bool>& wanted);
  /// The steps of create() for an exchange shared with other transports (network_links.h).
  /// prepare() opens the listener (exchanging nothing); wishes() is this rank's part of the
  /// exchange (wanted, where it listens, streams per peer); link() takes what the exchange
  /// agreed, once, leaving out the peers another transport links (linkedElsewhere[p], the same on
  /// both ends of a pair).
  static std::unique_ptr<SocketTransport> prepare(const TransportContext& ctx,
                                                  const std::vector<bool>& wanted);
  WishSet wishes() const;
  Status link(const TransportContext& ctx, const LinkWishes& wishes,
              const std::vector<bool>& linkedElsewhere);

  std::string_view name() const override { return "socket"; }
  /// "ip:port" this rank listened on, for logs.
  const std::string& address() const { return address_; }
  /// Streams per linked peer.
  int streamsPerPeer() const { return streamsPerPeer_; }
  /// Peers that streams link this rank with so far.
  int connectedPeers() const;
  /// Opens the streams to every linked peer now, for a user whose slots reach the proxy without a
  /// send connector (the staged device path, which the kernel posts to directly).
  Status connectAll();

 private:
  /// What each rank tells the others besides its wishes (link_wishes.h): where it listens and
  /// how many streams it opens per peer.
  struct Card {
    uint8_t address[SocketAddress::kWireBytes] = {};
    uint32_t nstreams = 0;
    uint32_t listening = 0;  ///< 0 when this rank could not open a listener
  };

  explicit SocketTransport(const TransportContext& ctx) : NetworkTransport(ctx, "TCP") {}

  /// Opens the streams to `peer` unless some already link the pair.
  Status connectForSend(int peer) override;
  /// Hands a stream opened by either side to the proxy, with the peer timeout set on it.
  void adopt(PeerStream stream);

  std::vector<bool> wanted_;
  Card card_;
  Socket listener_;              ///< from prepare() until link() hands it to the acceptor
  SocketAddress listenAddress_;  ///< where listener_ listens, when it does
  Status listenStatus_;          ///< why this rank has no listener
  int streamsPerPeer_ = 0;
  std::string address_;
  class SocketProxy* proxy_ = nullptr;  ///< owned by NetworkTransport
  MeshPlan plan_;                       ///< every rank's listener, streams per linked peer
  Secret key_{};
  double timeoutSeconds_ = 0;
  double peerTimeoutSeconds_ = 0;  ///< BRAID_PEER_TIMEOUT, set on every stream
  const std::atomic<bool>* abort_ = nullptr;
  /// Per peer: whether streams link the pair (opened by either side).
  std::unique_ptr<std::atomic<bool>[]> connected_;
  /// Last member: stops (and stops handing streams to the proxy) before the rest goes.
  std::unique_ptr<StreamAcceptor> acceptor_;
};

}  // namespace braid
