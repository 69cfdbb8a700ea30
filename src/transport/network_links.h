// The two network transports, RDMA and TCP, set up together with one exchange of link wishes
// (link_wishes.h) instead of one each: each rank says which peers it wants over either, and a
// pair goes over RDMA where either end wants it and both have a usable port, else over TCP where
// either end wants that. Used by the communicator and by the device path's staged FIFOs.
#pragma once

#include <memory>
#include <vector>

#include "base/status.h"
#include "transport/ib/ib_transport.h"
#include "transport/socket/socket_transport.h"

namespace braid {

struct VerbsApi;

/// Both network transports of one communicator (or staged path).
struct NetworkTransports {
  std::unique_ptr<IbTransport> ib;
  std::unique_ptr<SocketTransport> socket;
};

/// Collective over ctx.bootstrap: every rank calls it, with the peers it wants over RDMA
/// (ibWanted) and over TCP (socketWanted, whether or not RDMA also reaches them). The RDMA
/// transport links the pairs either end wants over it where both have a usable port; the socket
/// transport the pairs either end wants over TCP that RDMA does not link. verbs: as
/// IbTransport::prepare's.
Result<NetworkTransports> createNetworkTransports(const TransportContext& ctx,
                                                  const std::vector<bool>& ibWanted,
                                                  const std::vector<bool>& socketWanted,
                                                  const VerbsApi* verbs = nullptr);

}  // namespace braid
