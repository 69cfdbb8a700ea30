#include "transport/ib/ib_transport.h"

#include <algorithm>
#include <cstring>

#include "base/config.h"
#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "transport/ib/ib_proxy.h"
#include "transport/ib/qp_connector.h"
#include "transport/ib/verbs_api.h"
#include "transport/link_wishes.h"

namespace braid {
namespace {

#if BRAID_HAVE_IBVERBS
constexpr std::string_view kKeyLabel = "braid ib transport v1";
#endif

}  // namespace

/// What prepare() opened for link(): the device, and the listener queue pairs are traded on.
struct IbTransport::Opened {
#if BRAID_HAVE_IBVERBS
  std::unique_ptr<IbDevice> device;
#endif
  Socket listener;
};

IbTransport::IbTransport(const TransportContext& ctx)
    : NetworkTransport(ctx, "RDMA"), opened_(std::make_unique<Opened>()) {}

IbTransport::~IbTransport() = default;

std::unique_ptr<IbTransport> IbTransport::prepare(const TransportContext& ctx,
                                                  const std::vector<bool>& wanted,
                                                  const VerbsApi* verbs) {
  std::unique_ptr<IbTransport> t(new IbTransport(ctx));
  t->nranks_ = ctx.nranks;
  t->wanted_ = wanted;
  t->wanted_.resize(size_t(ctx.nranks), false);

  // A rank opens its device when it wants some peer over RDMA, and says so with its wishes, in
  // one round: a pair links when either rank wants it and both have a port, so a rank that
  // wants no one leaves its partners to TCP rather than costing every rank a second round.
  const bool needed = std::find(wanted.begin(), wanted.end(), true) != wanted.end();
#if BRAID_HAVE_IBVERBS
  if (needed) {
    const VerbsApi* api = verbs;
    if (api == nullptr) {
      Result<const VerbsApi*> loaded = loadVerbs();
      if (loaded.ok())
        api = loaded.value();
      else
        t->unavailable_ = loaded.status().message();
    }
    if (api != nullptr) {
      Result<std::unique_ptr<IbDevice>> opened =
          IbDevice::open(*api, ctx.config->ibHca, ctx.config->ibGidIndex);
      if (opened.ok())
        t->opened_->device = std::move(opened).value();
      else
        t->unavailable_ = opened.status().message();
    }
  }
  if (t->opened_->device) {
    // Queue pairs are traded over TCP, like the socket transport's streams: the bootstrap is not
    // ours to use after the exchange (its calls must not overlap, and its owner's calls go on).
    Result<Socket> l = listenOnTransportInterface(ctx.config->socketIfname);
    Result<SocketAddress> a = l.ok() ? l->localAddress() : Result<SocketAddress>(l.status());
    if (a.ok()) {
      t->opened_->listener = std::move(l).value();
      a->toWire(t->card_.address);
      t->card_.ready = 1;
    } else {
      t->unavailable_ = "no listener for the queue pair exchange: " + a.status().message();
      t->opened_->device.reset();
    }
  }
#else
  (void)verbs;
  if (needed) t->unavailable_ = "built without the libibverbs headers (Meson option ibverbs)";
#endif
  return t;
}

WishSet IbTransport::wishes() const { return WishSet{wanted_, &card_, sizeof(card_)}; }

Status IbTransport::link(const TransportContext& ctx, const LinkWishes& wishes) {
  const int n = ctx.nranks;
  const int me = ctx.rank;
  if (!opened_) return internalError("RDMA transport: link() called twice");
  std::vector<Card> presence(n);
  std::memcpy(presence.data(), wishes.cards.data(), sizeof(Card) * size_t(n));
  MeshPlan plan;
  plan.rank = me;
  plan.addresses.resize(n);
  plan.streams.assign(n, 0);
  std::vector<bool> linked(n, false);
  int linkedPeers = 0;
  for (int p = 0; p < n; ++p) {
    if (!wishes.linked[p] || !card_.ready || !presence[p].ready) continue;
    ASSIGN_OR_RETURN(plan.addresses[p], SocketAddress::fromWire(presence[p].address));
    plan.streams[p] = 1;
    linked[p] = true;
    ++linkedPeers;
  }
  setLinkedPeers(linkedPeers);

#if BRAID_HAVE_IBVERBS
  std::unique_ptr<IbDevice> device = std::move(opened_->device);
  if (device) {
    deviceName_ = device->description();
    dmabufWhyNot_ =
        device->api().regDmabufMr != nullptr ? "" : "this libibverbs has no ibv_reg_dmabuf_mr";
  }
  if (linkedPeers > 0) {
    ProxyOptions options = proxyOptions(ctx);
    std::vector<std::string> names = options.peerNames;
    Result<std::unique_ptr<IbProxy>> made =
        IbProxy::create(std::move(options), linked, std::move(device));
    if (!made.ok()) return made.status().withContext("RDMA transport");
    IbProxy* raw = made.value().get();
    setProxy(std::move(made).value());
    ASSIGN_OR_RETURN(const Secret key, ctx.bootstrap->deriveKey(kKeyLabel));
    QpConnectorTimes times;
    times.timeoutSeconds = ctx.config->timeoutSeconds;
    times.peerTimeoutSeconds = ctx.config->peerTimeoutSeconds;
    times.abort = ctx.abort;
    ASSIGN_OR_RETURN(connector_, QpConnector::start(raw, std::move(opened_->listener), key,
                                                    std::move(plan), std::move(names), times));
    if (ctx.logger != nullptr) {
      BRAID_LOG(*ctx.logger, kInfo, kNet,
                "RDMA transport on %s: %d peers linked, opened on first use", deviceName_.c_str(),
                linkedPeers);
    }
  }
#endif
  opened_.reset();  // a listener nobody will connect to goes now
  return okStatus();
}

Status IbTransport::connectForSend(int peer) { return connector_->connect(peer); }

Status IbTransport::connectForRecv(int peer) { return connector_->connect(peer); }

Status IbTransport::connectAll() {
  for (int p = 0; p < nranks_; ++p) {
    if (canConnect(p)) RETURN_IF_ERROR(connector_->connect(p));
  }
  return okStatus();
}

int IbTransport::connectedPeers() const { return connector_ ? connector_->connectedPeers() : 0; }

}  // namespace braid
