#include "transport/ib/ib_transport.h"

#include <algorithm>
#include <cstring>

#include "bootstrap/bootstrap.h"
#include "base/config.h"
#include "base/log.h"
#include "transport/ib/ib_proxy.h"
#include "transport/ib/verbs_api.h"

namespace braid {
namespace {

constexpr double kMaxFlushSeconds = 60;
#if BRAID_HAVE_IBVERBS
constexpr uint32_t kQpInfoTag = 0x49425150;  // "IBQP"
#endif

}  // namespace

#if !BRAID_HAVE_IBVERBS
class IbProxy {};
#endif

IbTransport::~IbTransport() {
#if BRAID_HAVE_IBVERBS
  if (proxy_) {
    const bool aborted = abort_ != nullptr && abort_->load(std::memory_order_acquire);
    proxy_->close(/*flush=*/!aborted, flushSeconds_);
  }
#endif
}

Result<std::unique_ptr<IbTransport>> IbTransport::create(const TransportContext& ctx,
                                                         const std::vector<bool>& wanted,
                                                         const VerbsApi* verbs) {
  const int n = ctx.nranks;
  const int me = ctx.rank;
  std::unique_ptr<IbTransport> t(new IbTransport());
  t->rank_ = me;
  t->nranks_ = n;
  t->maxChannels_ = ctx.maxChannels;
  t->abort_ = ctx.abort;
  const double timeout = ctx.config->timeoutSeconds;
  t->flushSeconds_ = timeout > 0 ? std::min(timeout, kMaxFlushSeconds) : kMaxFlushSeconds;

  // Who wants whom: a rank opens its device only when some pair with it may use RDMA.
  const size_t maskBytes = (size_t(n) + 7) / 8;
  std::vector<uint8_t> masks(maskBytes * size_t(n), 0);
  for (int p = 0; p < n && p < static_cast<int>(wanted.size()); ++p) {
    if (wanted[p] && p != me) masks[maskBytes * size_t(me) + p / 8] |= uint8_t(1u << (p % 8));
  }
  RETURN_IF_ERROR(ctx.bootstrap->allGather(masks.data(), maskBytes)
                      .withContext("RDMA transport: exchanging wishes"));
  auto wants = [&](int a, int b) { return (masks[maskBytes * size_t(a) + b / 8] >> (b % 8)) & 1u; };
  std::vector<bool> pair(n, false);
  bool needed = false;
  for (int p = 0; p < n; ++p) {
    pair[p] = p != me && (wants(me, p) || wants(p, me));
    needed |= pair[p];
  }

#if BRAID_HAVE_IBVERBS
  std::unique_ptr<IbDevice> device;
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
        device = std::move(opened).value();
      else
        t->unavailable_ = opened.status().message();
    }
  }
#else
  (void)verbs;
  if (needed) t->unavailable_ = "built without the libibverbs headers (Meson option ibverbs)";
#endif

  std::vector<uint8_t> ready(size_t(n), 0);
#if BRAID_HAVE_IBVERBS
  ready[me] = device ? 1 : 0;
#endif
  RETURN_IF_ERROR(ctx.bootstrap->allGather(ready.data(), 1)
                      .withContext("RDMA transport: exchanging device presence"));
  std::vector<bool> linked(n, false);
  for (int p = 0; p < n; ++p) {
    linked[p] = pair[p] && ready[me] && ready[p];
    t->linkedPeers_ += linked[p] ? 1 : 0;
  }

#if BRAID_HAVE_IBVERBS
  if (device) t->device_ = device->description();
  Status setup;
  if (t->linkedPeers_ > 0) {
    Result<std::unique_ptr<IbProxy>> proxy =
        IbProxy::create(proxyOptions(ctx), linked, std::move(device));
    if (proxy.ok())
      t->proxy_ = std::move(proxy).value();
    else
      setup = proxy.status().withContext("RDMA transport");
  }
  // Every linked pair trades its halves, even after a local failure (the peer waits for it).
  for (int p = 0; p < n; ++p) {
    if (!linked[p]) continue;
    QpInfo mine;
    if (t->proxy_) mine = t->proxy_->localInfo(p);
    RETURN_IF_ERROR(ctx.bootstrap->send(p, kQpInfoTag, &mine, sizeof(mine)));
  }
  for (int p = 0; p < n; ++p) {
    if (!linked[p]) continue;
    QpInfo theirs;
    RETURN_IF_ERROR(ctx.bootstrap->recv(p, kQpInfoTag, &theirs, sizeof(theirs)));
    if (setup.ok() && theirs.qpn == 0) {
      setup = systemError("RDMA transport: " + std::string("rank ") + std::to_string(p) +
                          " could not set up its queue pair");
    }
    if (setup.ok()) setup = t->proxy_->connect(p, theirs);
  }
  // Nobody writes before every queue pair is ready to receive.
  Status barrier = ctx.bootstrap->barrier();
  RETURN_IF_ERROR(setup);
  RETURN_IF_ERROR(barrier);
  if (t->proxy_) {
    RETURN_IF_ERROR(t->proxy_->start());
    if (ctx.logger != nullptr) {
      BRAID_LOG(*ctx.logger, kInfo, kNet, "RDMA transport on %s: %d peers", t->device_.c_str(),
                t->linkedPeers_);
    }
  }
#endif
  return t;
}

bool IbTransport::canConnect(int peer) const {
#if BRAID_HAVE_IBVERBS
  return proxy_ && proxy_->linked(peer);
#else
  (void)peer;
  return false;
#endif
}

Result<SendConnector> IbTransport::sendConnector(int peer, int channel) {
#if BRAID_HAVE_IBVERBS
  if (canConnect(peer) && channel >= 0 && channel < maxChannels_) {
    return SendConnector(proxy_->sendFifo(peer, channel), proxy_->waker());
  }
#endif
  return internalError("no RDMA FIFO to rank " + std::to_string(peer) + " channel " +
                       std::to_string(channel));
}

Result<RecvConnector> IbTransport::recvConnector(int peer, int channel) {
#if BRAID_HAVE_IBVERBS
  if (canConnect(peer) && channel >= 0 && channel < maxChannels_) {
    return RecvConnector(proxy_->recvFifo(peer, channel), proxy_->waker());
  }
#endif
  return internalError("no RDMA FIFO from rank " + std::to_string(peer) + " channel " +
                       std::to_string(channel));
}

bool IbTransport::peerAlive(int peer) const {
#if BRAID_HAVE_IBVERBS
  if (proxy_) return proxy_->peerAlive(peer);
#endif
  (void)peer;
  return true;
}

std::optional<Status> IbTransport::failure() const {
#if BRAID_HAVE_IBVERBS
  if (proxy_) return proxy_->failure();
#endif
  return std::nullopt;
}

std::optional<PeerFailure> IbTransport::peerFailure(int peer) const {
#if BRAID_HAVE_IBVERBS
  if (proxy_) return proxy_->peerFailure(peer);
#endif
  (void)peer;
  return std::nullopt;
}

void IbTransport::notifyFailure(int failedRank, const PeerFailure& failure) {
#if BRAID_HAVE_IBVERBS
  if (proxy_) proxy_->notifyFailure(failedRank, failure);
#else
  (void)failedRank;
  (void)failure;
#endif
}

}  // namespace braid
