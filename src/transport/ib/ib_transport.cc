#include "transport/ib/ib_transport.h"

#include <algorithm>
#include <cstring>

#include "base/config.h"
#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "transport/ib/ib_proxy.h"
#include "transport/ib/verbs_api.h"

namespace braid {
namespace {

#if BRAID_HAVE_IBVERBS
constexpr uint32_t kQpInfoTag = 0x49425150;  // "IBQP"
#endif

}  // namespace

Result<std::unique_ptr<IbTransport>> IbTransport::create(const TransportContext& ctx,
                                                         const std::vector<bool>& wanted,
                                                         const VerbsApi* verbs) {
  const int n = ctx.nranks;
  const int me = ctx.rank;
  std::unique_ptr<IbTransport> t(new IbTransport(ctx));

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
  int linkedPeers = 0;
  for (int p = 0; p < n; ++p) {
    linked[p] = pair[p] && ready[me] && ready[p];
    linkedPeers += linked[p] ? 1 : 0;
  }
  t->setLinkedPeers(linkedPeers);

#if BRAID_HAVE_IBVERBS
  if (device) {
    t->device_ = device->description();
    t->dmabufWhyNot_ =
        device->api().regDmabufMr != nullptr ? "" : "this libibverbs has no ibv_reg_dmabuf_mr";
  }
  Status setup;
  IbProxy* proxy = nullptr;  // the transport's, once made
  if (linkedPeers > 0) {
    Result<std::unique_ptr<IbProxy>> made =
        IbProxy::create(proxyOptions(ctx), linked, std::move(device));
    if (made.ok()) {
      proxy = made.value().get();
      t->setProxy(std::move(made).value());
    } else {
      setup = made.status().withContext("RDMA transport");
    }
  }
  // Every linked pair trades its halves, even after a local failure (the peer waits for it).
  for (int p = 0; p < n; ++p) {
    if (!linked[p]) continue;
    QpInfo mine;
    if (proxy != nullptr) mine = proxy->localInfo(p);
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
    if (setup.ok()) setup = proxy->connect(p, theirs);
  }
  // Nobody writes before every queue pair is ready to receive.
  Status barrier = ctx.bootstrap->barrier();
  RETURN_IF_ERROR(setup);
  RETURN_IF_ERROR(barrier);
  if (proxy != nullptr) {
    RETURN_IF_ERROR(proxy->start());
    if (ctx.logger != nullptr) {
      BRAID_LOG(*ctx.logger, kInfo, kNet, "RDMA transport on %s: %d peers", t->device_.c_str(),
                linkedPeers);
    }
  }
#endif
  return t;
}

}  // namespace braid
