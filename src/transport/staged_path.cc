#include "transport/staged_path.h"

#include "base/config.h"
#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "transport/network_links.h"

namespace braid {

Result<std::unique_ptr<StagedPath>> StagedPath::create(const TransportContext& ctx,
                                                       const std::vector<bool>& wanted,
                                                       StagedMedia media,
                                                       std::unique_ptr<HostMemoryMapper> mapper) {
  return create(ctx, wanted, media, std::move(mapper), "no GPU");
}

Result<std::unique_ptr<StagedPath>> StagedPath::create(const TransportContext& ctx,
                                                       const std::vector<bool>& wanted,
                                                       StagedMedia media,
                                                       std::unique_ptr<HostMemoryMapper> mapper,
                                                       const std::string& gpuGdrWhyNot) {
  std::unique_ptr<StagedPath> path(new StagedPath());
  path->mapper_ = std::move(mapper);
  path->media_ = media;
  path->rank_ = ctx.rank;
  path->nranks_ = ctx.nranks;
  path->maxChannels_ = ctx.maxChannels;
  TransportContext own = ctx;
  own.rankWaker = &path->waker_;
  own.abort = &path->aborted_;
  // Collective: every rank sets up both, whatever they link.
  std::vector<bool> rdmaWanted(ctx.nranks, false);
  std::vector<bool> tcpWanted(ctx.nranks, false);
  for (int p = 0; p < ctx.nranks && p < static_cast<int>(wanted.size()); ++p) {
    rdmaWanted[p] = media.rdma && wanted[p];
    tcpWanted[p] = media.tcp && wanted[p];
  }
  ASSIGN_OR_RETURN(NetworkTransports made, createNetworkTransports(own, rdmaWanted, tcpWanted));
  path->rdma_ = std::move(made.ib);
  path->tcp_ = std::move(made.socket);
  RETURN_IF_ERROR(path->rdma_->connectAll());
  RETURN_IF_ERROR(path->tcp_->connectAll());
  // A rank must not tear its listener down while a peer still opens streams to it: the set-up
  // ends only once every rank's streams are open.
  if (ctx.bootstrap != nullptr) {
    RETURN_IF_ERROR(ctx.bootstrap->barrier().withContext("staged path set-up"));
  }

  GdrInputs gdr;
  gdr.mode = gdrModeOf(ctx.config->gdr);
  for (int p = 0; p < ctx.nranks; ++p) {
    if (path->rdma_->canConnect(p)) gdr.rdmaPeers.push_back(p);
  }
  gdr.gpuWhyNot = gpuGdrWhyNot;
  gdr.nicWhyNot = path->rdma_->dmabufWhyNot();
  gdr.pathWhyNot = "the staged path does not place FIFOs in device memory yet";
  Result<GdrDecision> decision = decideGdr(gdr);
  if (!decision.ok()) {
    return decision.status().withContext("device path of rank " + std::to_string(ctx.rank));
  }
  path->gdr_ = decision->use;
  if (!decision->info.empty() && ctx.logger != nullptr) {
    BRAID_LOG(*ctx.logger, kInfo, kNet, "%s", decision->info.c_str());
  }
  return path;
}

StagedPath::~StagedPath() {
  mapped_.clear();
  mapper_.reset();  // before the FIFOs' memory goes with the transports
}

std::vector<NetworkTransport*> StagedPath::transports() const {
  std::vector<NetworkTransport*> all;
  if (rdma_) all.push_back(rdma_.get());
  if (tcp_) all.push_back(tcp_.get());
  return all;
}

NetworkTransport* StagedPath::transportOf(int peer) const {
  if (rdma_ && rdma_->canConnect(peer)) return rdma_.get();
  if (tcp_ && tcp_->canConnect(peer)) return tcp_.get();
  return nullptr;
}

NetworkProxy* StagedPath::proxyOf(int peer) const {
  NetworkTransport* t = transportOf(peer);
  return t != nullptr ? t->proxy() : nullptr;
}

std::string StagedPath::describe(int peer) const {
  if (rdma_ && rdma_->canConnect(peer)) return "RDMA";
  if (tcp_ && tcp_->canConnect(peer)) return "TCP";
  std::string rdma = !media_.rdma ? "BRAID_TRANSPORT excludes ib"
                     : rdma_ && !rdma_->unavailableReason().empty()
                         ? "no RDMA: " + rdma_->unavailableReason()
                         : "RDMA does not link it";
  std::string tcp = media_.tcp ? "TCP does not link it" : "BRAID_TRANSPORT excludes socket";
  return rdma + "; " + tcp;
}

Result<gpu::DeviceFifo> StagedPath::sendFifo(int peer, int channel) {
  return deviceFifo(peer, channel, true);
}

Result<gpu::DeviceFifo> StagedPath::recvFifo(int peer, int channel) {
  return deviceFifo(peer, channel, false);
}

Result<gpu::DeviceFifo> StagedPath::deviceFifo(int peer, int channel, bool send) {
  NetworkProxy* proxy = proxyOf(peer);
  if (proxy == nullptr || channel < 0 || channel >= maxChannels_) {
    return internalError("device path: no staged FIFO " + std::string(send ? "to" : "from") +
                         " rank " + std::to_string(peer) + " on channel " +
                         std::to_string(channel));
  }
  // Mapped for the device before the FIFO is opened: an RDMA proxy registers a FIFO with its NIC
  // when it opens, and the device's registration must come first.
  const FifoView v = proxy->fifoView(peer, channel, send);
  char* host = reinterpret_cast<char*>(v.control);
  const auto key = std::make_pair(size_t(peer) * maxChannels_ + channel, send);
  auto it = mapped_.find(key);
  if (it == mapped_.end()) {
    Result<char*> device = mapper_->map(host, proxy->fifoBytes());
    if (!device.ok()) {
      return device.status().withContext("device path: mapping the staged FIFO " +
                                         std::string(send ? "to" : "from") + " rank " +
                                         std::to_string(peer));
    }
    it = mapped_.emplace(key, device.value()).first;
  }
  if (send) {
    proxy->sendFifo(peer, channel);
  } else {
    proxy->recvFifo(peer, channel);
  }
  auto onDevice = [&](const void* p) { return it->second + (static_cast<const char*>(p) - host); };
  gpu::DeviceFifo f;
  f.head = reinterpret_cast<uint64_t*>(onDevice(&v.control->head));
  f.tail = reinterpret_cast<uint64_t*>(onDevice(&v.control->tail));
  f.headers = reinterpret_cast<SlotHeader*>(onDevice(v.headers));
  f.data = onDevice(v.data);
  f.nslots = v.nslots;
  f.slotBytes = v.slotBytes;
  f.count = 0;
  return f;
}

void StagedPath::arm(const std::vector<gpu::FifoSlotCount>& counts) {
  // Each proxy skips the peers it does not link.
  for (NetworkTransport* t : transports()) {
    if (t->proxy() != nullptr) t->proxy()->arm(counts);
  }
}

std::optional<Status> StagedPath::failure() const {
  for (const NetworkTransport* t : transports()) {
    if (std::optional<Status> failure = t->failure()) return failure;
  }
  return std::nullopt;
}

Status StagedPath::health() const {
  if (std::optional<Status> failed = failure()) return *failed;
  for (const NetworkTransport* t : transports()) {
    if (std::optional<PeerFailure> notice = t->peerFailure(kAnyPeer)) return notice->status;
  }
  for (int p = 0; p < nranks_; ++p) {
    const NetworkTransport* t = transportOf(p);
    if (t != nullptr && !t->peerAlive(p)) {
      return remoteError("device path: rank " + std::to_string(p) + " is gone (its " + describe(p) +
                         " connections to rank " + std::to_string(rank_) +
                         " for device buffers closed)");
    }
  }
  return okStatus();
}

void StagedPath::abort() {
  aborted_.store(true, std::memory_order_release);
  for (NetworkTransport* t : transports()) {
    if (t->proxy() != nullptr) t->proxy()->disarm();
  }
}

}  // namespace braid
