#include "transport/staged_path.h"

namespace braid {

Result<std::unique_ptr<StagedPath>> StagedPath::create(const TransportContext& ctx,
                                                       const std::vector<bool>& wanted,
                                                       std::unique_ptr<HostMemoryMapper> mapper) {
  std::unique_ptr<StagedPath> path(new StagedPath());
  path->mapper_ = std::move(mapper);
  path->maxChannels_ = ctx.maxChannels;
  path->rank_ = ctx.rank;
  path->nranks_ = ctx.nranks;
  TransportContext own = ctx;
  own.rankWaker = &path->waker_;
  own.abort = &path->aborted_;
  ASSIGN_OR_RETURN(path->transport_, SocketTransport::create(own, wanted));
  return path;
}

StagedPath::~StagedPath() {
  mapped_.clear();
  mapper_.reset();  // before the FIFOs' memory goes with the transport
}

Result<gpu::DeviceFifo> StagedPath::sendFifo(int peer, int channel) {
  return deviceFifo(peer, channel, true);
}

Result<gpu::DeviceFifo> StagedPath::recvFifo(int peer, int channel) {
  return deviceFifo(peer, channel, false);
}

Result<gpu::DeviceFifo> StagedPath::deviceFifo(int peer, int channel, bool send) {
  NetworkProxy* proxy = transport_->proxy();
  if (proxy == nullptr || !proxy->linked(peer) || channel < 0 || channel >= maxChannels_) {
    return internalError("device path: no staged FIFO " + std::string(send ? "to" : "from") +
                         " rank " + std::to_string(peer) + " on channel " +
                         std::to_string(channel));
  }
  const FifoView v = send ? proxy->sendFifo(peer, channel) : proxy->recvFifo(peer, channel);
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
  if (NetworkProxy* proxy = transport_->proxy()) proxy->arm(counts);
}

Status StagedPath::health() const {
  if (std::optional<Status> failure = transport_->failure()) return *failure;
  if (std::optional<PeerFailure> notice = transport_->peerFailure(kAnyPeer)) return notice->status;
  for (int p = 0; p < nranks_; ++p) {
    if (transport_->canConnect(p) && !transport_->peerAlive(p)) {
      return remoteError("device path: rank " + std::to_string(p) +
                         " is gone (its TCP connections to rank " + std::to_string(rank_) +
                         " for device buffers closed)");
    }
  }
  return okStatus();
}

void StagedPath::abort() {
  aborted_.store(true, std::memory_order_release);
  if (NetworkProxy* proxy = transport_->proxy()) proxy->disarm();
}

}  // namespace braid
