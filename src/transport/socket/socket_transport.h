// TCP transport between ranks on different hosts (or any ranks, with BRAID_TRANSPORT=socket).
//
// Each linked pair of ranks shares BRAID_SOCKET_NSTREAMS authenticated TCP streams
// (socket_connect.h); one proxy thread per communicator moves FIFO slots between local memory and
// those streams (socket_proxy.h), so the executor sees the same FIFOs as over shared memory. A
// pair is linked when either rank asks for it at create(), so both ends always agree.
//
// Failure: a peer whose streams close, or whose host stops answering for BRAID_PEER_TIMEOUT (TCP
// keepalive and user timeout on every stream), is reported by peerAlive(), a malformed frame by
// failure(), a peer's failure notice by peerFailure(); these, notifyFailure() and the flush at
// destruction are NetworkTransport's (network_transport.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/network_transport.h"

namespace braid {

class SocketTransport final : public NetworkTransport {
 public:
  /// Collective over ctx.bootstrap: every rank calls it, with wanted[p] set for the peers it
  /// wants to reach over TCP (possibly none). Needs ctx.rankWaker.
  static Result<std::unique_ptr<SocketTransport>> create(const TransportContext& ctx,
                                                         const std::vector<bool>& wanted);

  std::string_view name() const override { return "socket"; }
  /// "ip:port" this rank listened on, for logs.
  const std::string& address() const { return address_; }
  /// Streams per linked peer.
  int streamsPerPeer() const { return streamsPerPeer_; }

 private:
  explicit SocketTransport(const TransportContext& ctx) : NetworkTransport(ctx, "TCP") {}

  int streamsPerPeer_ = 0;
  std::string address_;
};

}  // namespace braid
