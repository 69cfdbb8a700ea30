#include "transport/socket/socket_transport.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "base/config.h"
#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "transport/link_wishes.h"
#include "transport/socket/socket_proxy.h"

namespace braid {
namespace {

constexpr std::string_view kKeyLabel = "braid socket transport v1";

/// What each rank tells the others besides its wishes (link_wishes.h): where it listens and how
/// many streams it opens per peer.
struct Hello {
  uint8_t address[SocketAddress::kWireBytes];
  uint32_t nstreams;
  uint32_t listening;  ///< 0 when this rank could not open a listener
};

}  // namespace

Result<std::unique_ptr<SocketTransport>> SocketTransport::create(const TransportContext& ctx,
                                                                 const std::vector<bool>& wanted) {
  const int n = ctx.nranks;
  const int me = ctx.rank;
  std::unique_ptr<SocketTransport> t(new SocketTransport(ctx));
  const double timeout = ctx.config->timeoutSeconds;

  // Listen first (the address goes into the exchange); a failure here only matters if some pair
  // needs this rank, which is known after the exchange, so every rank still takes part in it.
  Socket listener;
  Status listenStatus;
  SocketAddress address;
  {
    Result<Socket> l = listenOnTransportInterface(ctx.config->socketIfname);
    Result<SocketAddress> a = l.ok() ? l->localAddress() : Result<SocketAddress>(l.status());
    if (a.ok()) {
      listener = std::move(l).value();
      address = a.value();
    } else {
      listenStatus = a.status();
    }
  }

  Hello mine{};
  if (listenStatus.ok() && address.valid()) {
    address.toWire(mine.address);
    mine.listening = 1;
  }
  mine.nstreams = static_cast<uint32_t>(ctx.config->socketNstreams);
  ASSIGN_OR_RETURN(const LinkWishes wishes,
                   exchangeLinkWishes(ctx, wanted, &mine, sizeof(mine), "socket transport"));
  auto helloOf = [&](int p) {
    Hello h;
    std::memcpy(&h, wishes.card(p, sizeof(Hello)), sizeof(h));
    return h;
  };

  MeshPlan& plan = t->plan_;
  plan.rank = me;
  plan.addresses.resize(n);
  plan.streams.assign(n, 0);
  std::vector<bool> linked(n, false);
  int linkedPeers = 0;
  for (int p = 0; p < n; ++p) {
    if (!wishes.linked[p]) continue;
    const Hello h = helloOf(p);
    if (!h.listening) {
      return systemError("socket transport: rank " + std::to_string(p) +
                         " could not open a TCP listener");
    }
    if (!listenStatus.ok()) return listenStatus.withContext("socket transport: listening");
    ASSIGN_OR_RETURN(plan.addresses[p], SocketAddress::fromWire(h.address));
    // Both ends must agree on the count: the smaller wish wins.
    plan.streams[p] =
        static_cast<int>(std::clamp<uint32_t>(std::min(mine.nstreams, h.nstreams), 1, 16));
    linked[p] = true;
    ++linkedPeers;
    t->streamsPerPeer_ = std::max(t->streamsPerPeer_, plan.streams[p]);
  }
  t->address_ = address.valid() ? address.toString() : "none";
  t->setLinkedPeers(linkedPeers);
  t->timeoutSeconds_ = timeout;
  t->abort_ = ctx.abort;
  t->connected_ = std::make_unique<std::atomic<bool>[]>(n);
  t->peerTimeoutSeconds_ = ctx.config->peerTimeoutSeconds;

  ASSIGN_OR_RETURN(std::unique_ptr<SocketProxy> proxy,
                   SocketProxy::start(proxyOptions(ctx), linked));
  t->proxy_ = proxy.get();
  t->setProxy(std::move(proxy));
  if (linkedPeers > 0) {
    ASSIGN_OR_RETURN(t->key_, ctx.bootstrap->deriveKey(kKeyLabel));
    SocketTransport* raw = t.get();
    ASSIGN_OR_RETURN(t->acceptor_,
                     StreamAcceptor::start(std::move(listener), t->key_, plan,
                                           /*handshakeSeconds=*/5, [raw](PeerStream stream) {
                                             raw->connected_[stream.peer].store(true);
                                             raw->adopt(std::move(stream));
                                           }));
    if (ctx.logger != nullptr) {
      BRAID_LOG(*ctx.logger, kInfo, kNet,
                "socket transport on %s: %d peers linked, %d streams each, opened on first use",
                t->address_.c_str(), linkedPeers, t->streamsPerPeer_);
    }
  }
  return t;
}

Status SocketTransport::connectForSend(int peer) {
  if (connected_[peer].load(std::memory_order_acquire)) return okStatus();
  Result<std::vector<PeerStream>> opened =
      connectPeer(key_, plan_, peer, Deadline::after(timeoutSeconds_, abort_));
  if (!opened.ok()) {
    // A listener that refuses or resets means the peer's process is gone: say so as a lost peer,
    // as a stream that closed would, so every survivor names the rank that left.
    const braidResult_t code = opened.status().code();
    if (code != braidRemoteError && code != braidSystemError) return opened.status();
    return remoteError("rank " + std::to_string(peer) + " (" + plan_.addresses[peer].toString() +
                       ") left before its streams opened: " + opened.status().message());
  }
  std::vector<PeerStream> streams = std::move(opened).value();
  connected_[peer].store(true, std::memory_order_release);
  for (PeerStream& s : streams) adopt(std::move(s));
  // Until the proxy thread has taken them in, a failure notice would pass this peer by.
  const Deadline deadline = Deadline::after(timeoutSeconds_, abort_);
  while (!proxy_->carries(peer)) {
    RETURN_IF_ERROR(deadline.check("socket transport: handing rank " + std::to_string(peer) +
                                   "'s streams to the proxy"));
    std::this_thread::yield();
  }
  return okStatus();
}

void SocketTransport::adopt(PeerStream stream) {
  // A peer whose host goes down or is cut off resets nothing: the kernel ends its streams once it
  // stops answering, and the proxy then finds them broken as it would after a reset.
  stream.socket.setPeerTimeout(peerTimeoutSeconds_);
  proxy_->adopt(std::move(stream));
}

Status SocketTransport::connectAll() {
  for (int p = 0; p < static_cast<int>(plan_.streams.size()); ++p) {
    if (plan_.streams[p] > 0) RETURN_IF_ERROR(connectForSend(p));
  }
  return okStatus();
}

int SocketTransport::connectedPeers() const {
  int count = 0;
  for (size_t p = 0; p < plan_.streams.size(); ++p) count += connected_[p].load() ? 1 : 0;
  return count;
}

}  // namespace braid
