#include "transport/socket/socket_transport.h"

#include <algorithm>
#include <cstring>

#include "base/config.h"
#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "transport/socket/socket_proxy.h"

namespace braid {
namespace {

constexpr std::string_view kKeyLabel = "braid socket transport v1";

/// What each rank tells the others: where it listens, how many streams it opens per peer, and
/// (after this fixed part) one bit per rank it wants to reach over TCP.
struct Hello {
  uint8_t address[SocketAddress::kWireBytes];
  uint32_t nstreams;
  uint32_t listening;  ///< 0 when this rank could not open a listener
};

size_t roundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

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
    Result<std::vector<InterfaceAddress>> interfaces = listInterfaces();
    Result<InterfaceAddress> chosen =
        interfaces.ok() ? chooseTransportInterface(interfaces.value(), ctx.config->socketIfname)
                        : Result<InterfaceAddress>(interfaces.status());
    if (chosen.ok()) {
      Result<Socket> l = Socket::listenOn(chosen->address);
      if (l.ok()) {
        listener = std::move(l).value();
        Result<SocketAddress> a = listener.localAddress();
        if (a.ok())
          address = a.value();
        else
          listenStatus = a.status();
      } else {
        listenStatus = l.status();
      }
    } else {
      listenStatus = chosen.status();
    }
  }

  const size_t maskBytes = (size_t(n) + 7) / 8;
  const size_t block = roundUp(sizeof(Hello) + maskBytes, 8);
  std::vector<uint8_t> table(block * size_t(n), 0);
  {
    uint8_t* mine = table.data() + block * size_t(me);
    Hello hello{};
    if (listenStatus.ok() && address.valid()) {
      address.toWire(hello.address);
      hello.listening = 1;
    }
    hello.nstreams = static_cast<uint32_t>(ctx.config->socketNstreams);
    std::memcpy(mine, &hello, sizeof(hello));
    for (int p = 0; p < n && p < static_cast<int>(wanted.size()); ++p) {
      if (wanted[p] && p != me) mine[sizeof(Hello) + p / 8] |= uint8_t(1u << (p % 8));
    }
  }
  RETURN_IF_ERROR(ctx.bootstrap->allGather(table.data(), block)
                      .withContext("socket transport: exchanging addresses"));

  auto hello = [&](int r) {
    Hello h;
    std::memcpy(&h, table.data() + block * size_t(r), sizeof(h));
    return h;
  };
  auto wants = [&](int a, int b) {
    return (table[block * size_t(a) + sizeof(Hello) + b / 8] >> (b % 8)) & 1u;
  };
  MeshPlan plan;
  plan.rank = me;
  plan.addresses.resize(n);
  plan.streams.assign(n, 0);
  const uint32_t mineStreams = hello(me).nstreams;
  int linkedPeers = 0;
  for (int p = 0; p < n; ++p) {
    if (p == me || !(wants(me, p) || wants(p, me))) continue;
    const Hello h = hello(p);
    if (!h.listening) {
      return systemError("socket transport: rank " + std::to_string(p) +
                         " could not open a TCP listener");
    }
    if (!listenStatus.ok()) return listenStatus.withContext("socket transport: listening");
    ASSIGN_OR_RETURN(plan.addresses[p], SocketAddress::fromWire(h.address));
    // Both ends must agree on the count: the smaller wish wins.
    plan.streams[p] =
        static_cast<int>(std::clamp<uint32_t>(std::min(mineStreams, h.nstreams), 1, 16));
    ++linkedPeers;
    t->streamsPerPeer_ = std::max(t->streamsPerPeer_, plan.streams[p]);
  }
  t->address_ = address.valid() ? address.toString() : "none";
  t->setLinkedPeers(linkedPeers);

  std::vector<PeerStream> streams;
  if (linkedPeers > 0) {
    ASSIGN_OR_RETURN(const Secret key, ctx.bootstrap->deriveKey(kKeyLabel));
    ASSIGN_OR_RETURN(streams, buildMesh(listener, key, plan, timeout));
  }
  // A peer whose host goes down or is cut off resets nothing: the kernel ends its streams once it
  // stops answering, and the proxy then finds them broken as it would after a reset.
  for (PeerStream& stream : streams) stream.socket.setPeerTimeout(ctx.config->peerTimeoutSeconds);
  listener.close();

  ASSIGN_OR_RETURN(std::unique_ptr<SocketProxy> proxy,
                   SocketProxy::start(proxyOptions(ctx), std::move(streams)));
  t->setProxy(std::move(proxy));
  if (linkedPeers > 0 && ctx.logger != nullptr) {
    BRAID_LOG(*ctx.logger, kInfo, kNet, "socket transport on %s: %d peers, %d streams each",
              t->address_.c_str(), linkedPeers, t->streamsPerPeer_);
  }
  return t;
}

}  // namespace braid
