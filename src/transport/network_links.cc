#include "transport/network_links.h"

#include "transport/link_wishes.h"

namespace braid {

Result<NetworkTransports> createNetworkTransports(const TransportContext& ctx,
                                                  const std::vector<bool>& ibWanted,
                                                  const std::vector<bool>& socketWanted,
                                                  const VerbsApi* verbs) {
  NetworkTransports made;
  made.ib = IbTransport::prepare(ctx, ibWanted, verbs);
  made.socket = SocketTransport::prepare(ctx, socketWanted);
  ASSIGN_OR_RETURN(
      const std::vector<LinkWishes> wishes,
      exchangeLinkWishes(ctx, {made.ib->wishes(), made.socket->wishes()}, "network transports"));
  RETURN_IF_ERROR(made.ib->link(ctx, wishes[0]));
  // Which pairs RDMA links follows from what both ends said, so both ends leave the same pairs
  // out of TCP.
  std::vector<bool> overRdma(size_t(ctx.nranks), false);
  for (int p = 0; p < ctx.nranks; ++p) overRdma[size_t(p)] = made.ib->canConnect(p);
  RETURN_IF_ERROR(made.socket->link(ctx, wishes[1], overRdma));
  return made;
}

}  // namespace braid
