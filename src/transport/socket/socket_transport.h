// TCP transport between ranks on different hosts (or any ranks, with BRAID_TRANSPORT=socket).
//
// Each linked pair of ranks shares BRAID_SOCKET_NSTREAMS authenticated TCP streams
// (socket_connect.h); one proxy thread per communicator moves FIFO slots between local memory and
// those streams (socket_proxy.h), so the executor sees the same FIFOs as over shared memory. A
// pair is linked when either rank asks for it at create(), so both ends always agree.
//
// Failure: a peer whose streams close is reported by peerAlive(), a malformed frame by failure(),
// a peer's failure notice by peerFailure(); notifyFailure() tells every linked peer this rank failed.
// Destruction first flushes what the rank posted (unless the communicator was aborted or failed),
// so a collective that returned has really delivered its last slots.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "transport/socket/socket_proxy.h"
#include "transport/transport.h"

namespace braid {

class SocketTransport final : public Transport {
 public:
  /// Collective over ctx.bootstrap: every rank calls it, with wanted[p] set for the peers it
  /// wants to reach over TCP (possibly none). Needs ctx.rankWaker.
  static Result<std::unique_ptr<SocketTransport>> create(const TransportContext& ctx,
                                                         const std::vector<bool>& wanted);
  ~SocketTransport() override;

  std::string_view name() const override { return "socket"; }
  bool canConnect(int peer) const override;
  Result<SendConnector> sendConnector(int peer, int channel) override;
  Result<RecvConnector> recvConnector(int peer, int channel) override;

  /// False once the connection to `peer` has closed.
  bool peerAlive(int peer) const override;
  /// A protocol error on some stream.
  std::optional<Status> failure() const override;
  /// The failure `peer` reported, if any (kAnyPeer: any peer's).
  std::optional<PeerFailure> peerFailure(int peer) const override;
  /// Tells every linked peer that failedRank failed (first call only).
  void notifyFailure(int failedRank, const PeerFailure& failure) override;
  /// Peers linked over TCP.
  int linkedPeers() const { return linkedPeers_; }
  /// "ip:port" this rank listened on, for logs.
  const std::string& address() const { return address_; }
  /// Streams per linked peer.
  int streamsPerPeer() const { return streamsPerPeer_; }

 private:
  SocketTransport() = default;

  int rank_ = 0;
  int nranks_ = 0;
  int maxChannels_ = 1;
  int linkedPeers_ = 0;
  int streamsPerPeer_ = 0;
  double flushSeconds_ = 30;
  const std::atomic<bool>* abort_ = nullptr;
  std::string address_;
  std::unique_ptr<SocketProxy> proxy_;
};

}  // namespace braid
