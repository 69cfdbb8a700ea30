#include "transport/network_transport.h"

#include <algorithm>
#include <string>

#include "base/config.h"

namespace braid {
namespace {

// How long destruction may wait, at most, for the peers to take this rank's last slots.
constexpr double kMaxFlushSeconds = 60;

}  // namespace

NetworkTransport::NetworkTransport(const TransportContext& ctx, std::string_view medium)
    : medium_(medium), maxChannels_(ctx.maxChannels), abort_(ctx.abort) {
  const double timeout = ctx.config->timeoutSeconds;
  flushSeconds_ = timeout > 0 ? std::min(timeout, kMaxFlushSeconds) : kMaxFlushSeconds;
}

NetworkTransport::~NetworkTransport() {
  if (proxy_) {
    const bool aborted = abort_ != nullptr && abort_->load(std::memory_order_acquire);
    proxy_->close(/*flush=*/!aborted, flushSeconds_);
  }
}

bool NetworkTransport::canConnect(int peer) const { return proxy_ && proxy_->linked(peer); }

Result<SendConnector> NetworkTransport::sendConnector(int peer, int channel) {
  if (!canConnect(peer) || channel < 0 || channel >= maxChannels_) {
    return internalError("no " + std::string(medium_) + " FIFO to rank " + std::to_string(peer) +
                         " channel " + std::to_string(channel));
  }
  RETURN_IF_ERROR(connectForSend(peer));
  return SendConnector(proxy_->sendFifo(peer, channel), proxy_->waker());
}

Result<RecvConnector> NetworkTransport::recvConnector(int peer, int channel) {
  if (!canConnect(peer) || channel < 0 || channel >= maxChannels_) {
    return internalError("no " + std::string(medium_) + " FIFO from rank " + std::to_string(peer) +
                         " channel " + std::to_string(channel));
  }
  RETURN_IF_ERROR(connectForRecv(peer));
  return RecvConnector(proxy_->recvFifo(peer, channel), proxy_->waker());
}

std::optional<Status> NetworkTransport::failure() const {
  return proxy_ ? proxy_->failure() : std::nullopt;
}

std::optional<PeerFailure> NetworkTransport::peerFailure(int peer) const {
  return proxy_ ? proxy_->peerFailure(peer) : std::nullopt;
}

bool NetworkTransport::peerAlive(int peer) const { return !proxy_ || proxy_->peerAlive(peer); }

void NetworkTransport::notifyFailure(int failedRank, const PeerFailure& failure) {
  if (proxy_) proxy_->notifyFailure(failedRank, failure);
}

}  // namespace braid
