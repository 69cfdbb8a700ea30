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

}  // namespace

Result<std::unique_ptr<SocketTransport>> SocketTransport::create(const TransportContext& ctx,
                                                                 const std::vector<bool>& wanted) {
  std::unique_ptr<SocketTransport> t = prepare(ctx, wanted);
  ASSIGN_OR_RETURN(std::vector<LinkWishes> wishes,
                   exchangeLinkWishes(ctx, {t->wishes()}, "socket transport"));
  RETURN_IF_ERROR(t->link(ctx, wishes.front(), {}));
  return t;
}

std::unique_ptr<SocketTransport> SocketTransport::prepare(const TransportContext& ctx,
                                                          const std::vector<bool>& wanted) {
  std::unique_ptr<SocketTransport> t(new SocketTransport(ctx));
  t->wanted_ = wanted;
  t->wanted_.resize(size_t(ctx.nranks), false);
  // Listen first (the address goes into the exchange); a failure here only matters if some pair
  // needs this rank, which is known after the exchange, so every rank still takes part in it.
  Result<Socket> l = listenOnTransportInterface(ctx.config->socketIfname);
  Result<SocketAddress> a = l.ok() ? l->localAddress() : Result<SocketAddress>(l.status());
  if (a.ok() && a->valid()) {
    t->listener_ = std::move(l).value();
    t->listenAddress_ = a.value();
    a->toWire(t->card_.address);
    t->card_.listening = 1;
  } else {
    t->listenStatus_ = a.ok() ? systemError("no address to listen on") : a.status();
  }
  t->card_.nstreams = static_cast<uint32_t>(ctx.config->socketNstreams);
  return t;
}

WishSet SocketTransport::wishes() const { return WishSet{wanted_, &card_, sizeof(card_)}; }

Status SocketTransport::link(const TransportContext& ctx, const LinkWishes& wishes,
                             const std::vector<bool>& linkedElsewhere) {
  const int n = ctx.nranks;
  const int me = ctx.rank;
  const double timeout = ctx.config->timeoutSeconds;
  if (proxy_ != nullptr) return internalError("socket transport: link() called twice");
  auto cardOf = [&](int p) {
    Card c;
    std::memcpy(&c, wishes.card(p, sizeof(Card)), sizeof(c));
    return c;
  };

  MeshPlan& plan = plan_;
  plan.rank = me;
  plan.addresses.resize(n);
  plan.streams.assign(n, 0);
  std::vector<bool> linked(n, false);
  int linkedPeers = 0;
  for (int p = 0; p < n; ++p) {
    if (!wishes.linked[p]) continue;
    if (p < int(linkedElsewhere.size()) && linkedElsewhere[p]) continue;
    const Card h = cardOf(p);
    if (!h.listening) {
      return systemError("socket transport: rank " + std::to_string(p) +
                         " could not open a TCP listener");
    }
    if (!listenStatus_.ok()) return listenStatus_.withContext("socket transport: listening");
    ASSIGN_OR_RETURN(plan.addresses[p], SocketAddress::fromWire(h.address));
    // Both ends must agree on the count: the smaller wish wins.
    plan.streams[p] =
        static_cast<int>(std::clamp<uint32_t>(std::min(card_.nstreams, h.nstreams), 1, 16));
    linked[p] = true;
    ++linkedPeers;
    streamsPerPeer_ = std::max(streamsPerPeer_, plan.streams[p]);
  }
  address_ = listenAddress_.valid() ? listenAddress_.toString() : "none";
  setLinkedPeers(linkedPeers);
  timeoutSeconds_ = timeout;
  abort_ = ctx.abort;
  connected_ = std::make_unique<std::atomic<bool>[]>(n);
  peerTimeoutSeconds_ = ctx.config->peerTimeoutSeconds;

  ASSIGN_OR_RETURN(std::unique_ptr<SocketProxy> proxy,
                   SocketProxy::start(proxyOptions(ctx), linked));
  proxy_ = proxy.get();
  setProxy(std::move(proxy));
  if (linkedPeers > 0) {
    ASSIGN_OR_RETURN(key_, ctx.bootstrap->deriveKey(kKeyLabel));
    SocketTransport* raw = this;
    ASSIGN_OR_RETURN(acceptor_,
                     StreamAcceptor::start(std::move(listener_), key_, plan,
                                           /*handshakeSeconds=*/5, [raw](PeerStream stream) {
                                             raw->connected_[stream.peer].store(true);
                                             raw->adopt(std::move(stream));
                                           }));
    if (ctx.logger != nullptr) {
      BRAID_LOG(*ctx.logger, kInfo, kNet,
                "socket transport on %s: %d peers linked, %d streams each, opened on first use",
                address_.c_str(), linkedPeers, streamsPerPeer_);
    }
  }
  listener_ = Socket();  // unused: nobody will connect
  return okStatus();
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
