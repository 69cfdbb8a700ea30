// A transport that reaches its peers over a network through a proxy thread (network_proxy.h):
// socket (TCP) and ib (RDMA) are network transports. Its connectors are the proxy's FIFOs; its
// failure, its peers' notices and their liveness are the proxy's; notifyFailure() tells every
// linked peer this rank failed. Destruction first flushes what the rank posted, unless the
// communicator was aborted (or failed: its destructor then raises the abort flag), so a collective
// that returned has really delivered its last slots.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string_view>

#include "transport/network_proxy.h"
#include "transport/transport.h"

namespace braid {

class NetworkTransport : public Transport {
 public:
  ~NetworkTransport() override;

  bool canConnect(int peer) const final;
  Result<SendConnector> sendConnector(int peer, int channel) final;
  Result<RecvConnector> recvConnector(int peer, int channel) final;

  std::optional<Status> failure() const final;
  std::optional<PeerFailure> peerFailure(int peer) const final;
  bool peerAlive(int peer) const final;
  void notifyFailure(int failedRank, const PeerFailure& failure) final;

  /// Peers this transport links.
  int linkedPeers() const { return linkedPeers_; }
  /// The proxy (none: the transport links nobody), for the device path's staged FIFOs.
  NetworkProxy* proxy() { return proxy_.get(); }

 protected:
  /// `medium` ("TCP", "RDMA") names the FIFOs in errors.
  NetworkTransport(const TransportContext& ctx, std::string_view medium);

  /// Takes the proxy (none: the transport links nobody).
  void setProxy(std::unique_ptr<NetworkProxy> proxy) { proxy_ = std::move(proxy); }
  /// Called before the first send FIFO to a linked `peer` is handed out: a transport that links
  /// peers on first use connects here (the default links everyone at creation).
  virtual Status connectForSend(int /*peer*/) { return okStatus(); }
  /// The same before the first receive FIFO from a linked `peer` is handed out.
  virtual Status connectForRecv(int /*peer*/) { return okStatus(); }
  void setLinkedPeers(int peers) { linkedPeers_ = peers; }

 private:
  std::string_view medium_;
  int maxChannels_ = 1;
  int linkedPeers_ = 0;
  double flushSeconds_ = 30;  ///< how long destruction may wait for the peers to take the rest
  const std::atomic<bool>* abort_ = nullptr;
  std::unique_ptr<NetworkProxy> proxy_;
};

}  // namespace braid
