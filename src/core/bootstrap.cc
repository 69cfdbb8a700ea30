// Bootstrap: join (rendezvous at the root, then the ring), the ring collectives, point-to-point
// messages and split. The root lives in bootstrap_root.cc, the listener's service thread in
// bootstrap_service.cc; the protocol is described in bootstrap.h and bootstrap_wire.h.
#include "core/bootstrap.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <system_error>

#include "core/auth.h"
#include "core/bootstrap_impl.h"
#include "core/little_endian.h"
#include "core/log.h"

namespace braid {
namespace {

constexpr size_t kJoinPayloadBytes = 8 + SocketAddress::kWireBytes;
constexpr size_t kSplitRecordBytes = 8 + SocketAddress::kWireBytes;  // color, key, listener

std::string rankText(int rank) { return "rank " + std::to_string(rank); }

const char* opName(RingOp op) { return op == RingOp::kBarrier ? "barrier" : "allGather"; }

// A socket we only write to has nothing to read; readable means the peer closed or reset it.
bool peerHungUp(const Socket& socket) {
  pollfd p{socket.fd(), POLLIN, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
}

// Opens a listener on the interface BRAID_SOCKET_IFNAME selects (or on `near`'s address).
Result<Socket> openListener(const std::string& ifname, const SocketAddress* near) {
  SocketAddress address;
  if (near != nullptr) {
    address = *near;
  } else {
    ASSIGN_OR_RETURN(const InterfaceAddress interface, selectInterface(ifname));
    address = interface.address;
  }
  address.setPort(0);
  return Socket::listenOn(address);
}

}  // namespace

// ---- Impl: life cycle ----------------------------------------------------------------------

Bootstrap::Impl::Impl(int rank, int nranks, const Secret& secret, Socket listener,
                      const SocketAddress& address, const WaitPolicy& wait)
    : rank_(rank), nranks_(nranks), secret_(secret), wait_(wait), listener_(std::move(listener)),
      listenAddress_(address) {}

Result<std::unique_ptr<Bootstrap::Impl>> Bootstrap::Impl::create(int rank, int nranks,
                                                                 const Secret& secret,
                                                                 Socket listener,
                                                                 const WaitPolicy& wait) {
  ASSIGN_OR_RETURN(const SocketAddress address, listener.localAddress());
  std::unique_ptr<Impl> impl(new Impl(rank, nranks, secret, std::move(listener), address, wait));
  impl->wake_ = Socket(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!impl->wake_.valid()) return errnoError("eventfd", errno);
  impl->p2pIn_.resize(static_cast<size_t>(nranks));
  impl->p2pIn_[static_cast<size_t>(rank)].open = true;  // messages to self
  impl->p2pOut_.resize(static_cast<size_t>(nranks));
  impl->p2pBroken_.resize(static_cast<size_t>(nranks));
  try {
    impl->service_ = std::thread(&Impl::serve, impl.get());
  } catch (const std::system_error& e) {
    return systemError(std::string("bootstrap service thread: ") + e.what());
  }
  return impl;
}

Bootstrap::Impl::~Impl() {
  stop_.store(true);
  wakeService();
  if (service_.joinable()) service_.join();
}

void Bootstrap::Impl::wakeService() {
  const uint64_t one = 1;
  (void)::write(wake_.fd(), &one, sizeof(one));
}

Status Bootstrap::Impl::connect(std::vector<SocketAddress> peers, const Deadline& deadline) {
  peers_ = std::move(peers);
  if (nranks_ == 1) return okStatus();
  const int next = (rank_ + 1) % nranks_;
  const int prev = (rank_ + nranks_ - 1) % nranks_;
  Result<Socket> ring = connectPeer(next, Purpose::kRing, deadline,
                                    rankText(rank_) + ": ring connect to " + rankText(next));
  if (!ring.ok()) return breakRing(ring.status());
  ringNext_ = std::move(ring.value());
  const std::string what = rankText(rank_) + ": waiting for " + rankText(prev) + " to connect the ring";
  std::unique_lock<std::mutex> lock(mu_);
  while (!ringIn_.open) {
    if (Status s = deadline.check(what); !s.ok()) {
      lock.unlock();
      return breakRing(s);
    }
    cv_.wait_for(lock, std::chrono::milliseconds(deadline.pollMs()));
  }
  return okStatus();
}

Result<Socket> Bootstrap::Impl::connectPeer(int peer, Purpose purpose, const Deadline& deadline,
                                            const std::string& what) {
  ASSIGN_OR_RETURN(Socket s, Socket::connectTo(peers_[static_cast<size_t>(peer)], deadline, what,
                                               /*retryRefused=*/false));
  RETURN_IF_ERROR(authenticateAsClient(s, secret_, deadline, what));
  uint8_t identify[kIdentifyBytes];
  putLe32(identify, static_cast<uint32_t>(purpose));
  putLe32(identify + 4, static_cast<uint32_t>(rank_));
  putLe32(identify + 8, static_cast<uint32_t>(nranks_));
  RETURN_IF_ERROR(writeFrame(s, FrameType::kIdentify, 0, 0, identify, sizeof(identify), deadline,
                             what));
  std::vector<uint8_t> reply;
  ASSIGN_OR_RETURN(const FrameHeader header,
                   readFrame(s, frameBit(FrameType::kAccept) | frameBit(FrameType::kError), 0,
                             &reply, deadline, what));
  (void)header;
  return s;
}

Result<Channel::Frame> Bootstrap::Impl::take(Channel& channel, std::optional<uint32_t> tag,
                                             const Deadline& deadline, const std::string& what) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    auto it = channel.frames.begin();
    if (tag) {
      it = std::find_if(channel.frames.begin(), channel.frames.end(),
                        [&](const Channel::Frame& f) { return f.tag == *tag; });
    }
    if (it != channel.frames.end()) {
      Channel::Frame frame = std::move(*it);
      const bool wasFull = channel.queuedBytes > kMaxQueuedBytes;
      channel.queuedBytes -= frame.data.size();
      channel.frames.erase(it);
      lock.unlock();
      if (wasFull) wakeService();  // it may resume reading this peer
      return frame;
    }
    if (channel.closed) return remoteError(what + ": " + channel.reason);
    RETURN_IF_ERROR(deadline.check(what));
    cv_.wait_for(lock, std::chrono::milliseconds(deadline.pollMs()));
  }
}

// ---- Ring collectives ----------------------------------------------------------------------

Status Bootstrap::Impl::breakRing(Status status) {
  if (!ringBroken_) ringBroken_ = status;
  ringNext_.shutdownBoth();
  std::lock_guard<std::mutex> lock(mu_);
  if (ringInFd_ >= 0) ::shutdown(ringInFd_, SHUT_RDWR);
  return status;
}

Status Bootstrap::Impl::ringStep(const void* sendData, void* recvData, size_t bytes, RingOp op,
                                 const Deadline& deadline) {
  const int next = (rank_ + 1) % nranks_;
  const int prev = (rank_ + nranks_ - 1) % nranks_;
  const uint32_t seq = static_cast<uint32_t>(ringSeq_++);
  const std::string what = rankText(rank_) + ": " + opName(op);
  if (peerHungUp(ringNext_)) {
    return remoteError(what + ": " + rankText(next) + " closed the ring connection");
  }
  RETURN_IF_ERROR(writeFrame(ringNext_, FrameType::kRing, static_cast<uint16_t>(op), seq, sendData,
                             bytes, deadline, what + ": send to " + rankText(next)));
  ASSIGN_OR_RETURN(const Channel::Frame frame,
                   take(ringIn_, std::nullopt, deadline, what + ": receive from " + rankText(prev)));
  if (frame.flags != static_cast<uint16_t>(op) || frame.tag != seq) {
    return invalidUsage(what + ": " + rankText(prev) + " is in " +
                        opName(static_cast<RingOp>(frame.flags)) + " step " +
                        std::to_string(frame.tag) + ", this rank in " + opName(op) + " step " +
                        std::to_string(seq) + " (ranks called different bootstrap collectives)");
  }
  if (frame.data.size() != bytes) {
    return invalidUsage(what + ": " + rankText(prev) + " sent a block of " +
                        std::to_string(frame.data.size()) + " bytes, this rank expects " +
                        std::to_string(bytes));
  }
  if (bytes > 0) std::memcpy(recvData, frame.data.data(), bytes);
  return okStatus();
}

Status Bootstrap::Impl::allGather(void* data, size_t bytesPerRank, RingOp op) {
  if (ringBroken_) return *ringBroken_;
  if (bytesPerRank > kMaxFrameBytes) {
    return invalidArgument(std::string(opName(op)) + ": " + std::to_string(bytesPerRank) +
                           " bytes per rank exceed the bootstrap limit of " +
                           std::to_string(kMaxFrameBytes));
  }
  if (bytesPerRank > 0 && data == nullptr) return invalidArgument("allGather: null buffer");
  auto* bytes = static_cast<uint8_t*>(data);
  const Deadline deadline = opDeadline();
  // Step s forwards the block that came from rank - s: after nranks-1 steps each rank has all.
  for (int step = 0; step < nranks_ - 1; ++step) {
    const size_t sendBlock = static_cast<size_t>((rank_ - step + nranks_) % nranks_);
    const size_t recvBlock = static_cast<size_t>((rank_ - step - 1 + 2 * nranks_) % nranks_);
    Status s = ringStep(bytes == nullptr ? nullptr : bytes + sendBlock * bytesPerRank,
                        bytes == nullptr ? nullptr : bytes + recvBlock * bytesPerRank,
                        bytesPerRank, op, deadline);
    if (!s.ok()) return breakRing(s);
  }
  return okStatus();
}

// ---- Point to point ------------------------------------------------------------------------

Status Bootstrap::Impl::send(int peer, uint32_t tag, const void* data, size_t bytes) {
  const std::string what =
      rankText(rank_) + ": send to " + rankText(peer) + " (tag " + std::to_string(tag) + ")";
  if (peer < 0 || peer >= nranks_) {
    return invalidArgument(what + ": peer outside 0.." + std::to_string(nranks_ - 1));
  }
  if (bytes > kMaxFrameBytes) {
    return invalidArgument(what + ": " + std::to_string(bytes) +
                           " bytes exceed the bootstrap limit of " + std::to_string(kMaxFrameBytes));
  }
  if (bytes > 0 && data == nullptr) return invalidArgument(what + ": null buffer");
  const size_t p = static_cast<size_t>(peer);
  if (peer == rank_) {
    const auto* b = static_cast<const uint8_t*>(data);
    {
      std::lock_guard<std::mutex> lock(mu_);
      p2pIn_[p].frames.push_back({0, tag, std::vector<uint8_t>(b, b + bytes)});
      p2pIn_[p].queuedBytes += bytes;
    }
    cv_.notify_all();
    return okStatus();
  }
  if (p2pBroken_[p]) return *p2pBroken_[p];
  const Deadline deadline = opDeadline();
  if (!p2pOut_[p].valid()) {
    Result<Socket> s = connectPeer(peer, Purpose::kP2p, deadline, what);
    // A timeout or abort while connecting leaves nothing half-sent: a later send may try again.
    if (!s.ok()) return s.status();
    p2pOut_[p] = std::move(s.value());
  }
  Status status = peerHungUp(p2pOut_[p])
                      ? remoteError(what + ": " + rankText(peer) + " closed the connection")
                      : writeFrame(p2pOut_[p], FrameType::kMessage, 0, tag, data, bytes, deadline,
                                   what);
  if (!status.ok()) {
    // The stream may end mid-frame: it cannot carry another message.
    p2pBroken_[p] = status;
    p2pOut_[p].close();
  }
  return status;
}

Status Bootstrap::Impl::recv(int peer, uint32_t tag, void* data, size_t bytes) {
  const std::string what =
      rankText(rank_) + ": recv from " + rankText(peer) + " (tag " + std::to_string(tag) + ")";
  if (peer < 0 || peer >= nranks_) {
    return invalidArgument(what + ": peer outside 0.." + std::to_string(nranks_ - 1));
  }
  if (bytes > 0 && data == nullptr) return invalidArgument(what + ": null buffer");
  ASSIGN_OR_RETURN(const Channel::Frame frame,
                   take(p2pIn_[static_cast<size_t>(peer)], tag, opDeadline(), what));
  if (frame.data.size() != bytes) {
    return invalidUsage(what + ": " + rankText(peer) + " sent " +
                        std::to_string(frame.data.size()) + " bytes, this rank expects " +
                        std::to_string(bytes));
  }
  if (bytes > 0) std::memcpy(data, frame.data.data(), bytes);
  return okStatus();
}

// ---- Split ---------------------------------------------------------------------------------

Result<SplitResult> Bootstrap::Impl::split(int color, int key) {
  const uint64_t counter = ++splitCount_;
  Socket listener;
  SocketAddress address;
  if (color >= 0) {
    ASSIGN_OR_RETURN(listener, openListener("", &listenAddress_));
    ASSIGN_OR_RETURN(address, listener.localAddress());
  }
  std::vector<uint8_t> records(static_cast<size_t>(nranks_) * kSplitRecordBytes);
  uint8_t* mine = records.data() + static_cast<size_t>(rank_) * kSplitRecordBytes;
  putLe32(mine, static_cast<uint32_t>(color));
  putLe32(mine + 4, static_cast<uint32_t>(key));
  if (color >= 0) address.toWire(mine + 8);
  RETURN_IF_ERROR(allGather(records.data(), kSplitRecordBytes, RingOp::kAllGather));

  SplitResult result;
  if (color < 0) return result;
  struct Member {
    int key;
    int parentRank;
    SocketAddress address;
  };
  std::vector<Member> members;
  for (int r = 0; r < nranks_; ++r) {
    const uint8_t* record = records.data() + static_cast<size_t>(r) * kSplitRecordBytes;
    if (static_cast<int>(getLe32(record)) != color) continue;
    Result<SocketAddress> peer = SocketAddress::fromWire(record + 8);
    if (!peer.ok() || peer->port() == 0) {
      return remoteError("split: " + rankText(r) + " sent a bad listener address");
    }
    members.push_back({static_cast<int>(getLe32(record + 4)), r, peer.value()});
  }
  std::stable_sort(members.begin(), members.end(), [](const Member& a, const Member& b) {
    return a.key != b.key ? a.key < b.key : a.parentRank < b.parentRank;
  });
  std::vector<SocketAddress> peers;
  int newRank = -1;
  for (size_t i = 0; i < members.size(); ++i) {
    peers.push_back(members[i].address);
    result.parentRanks.push_back(members[i].parentRank);
    if (members[i].parentRank == rank_) newRank = static_cast<int>(i);
  }
  const int n = static_cast<int>(members.size());
  ASSIGN_OR_RETURN(const Secret groupSecret, deriveSplitSecret(secret_, counter, color));
  ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl,
                   create(newRank, n, groupSecret, std::move(listener), wait_));
  RETURN_IF_ERROR(impl->connect(std::move(peers), opDeadline()));
  result.bootstrap.reset(new Bootstrap(std::move(impl)));
  return result;
}

// ---- Bootstrap -----------------------------------------------------------------------------

Bootstrap::Bootstrap(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Bootstrap::~Bootstrap() = default;

Result<std::unique_ptr<Bootstrap>> Bootstrap::join(const braidUniqueId& id, int rank, int nranks,
                                                   const std::string& ifname,
                                                   const WaitPolicy& wait) {
  (void)processLogger();  // before the service thread starts (see startBootstrapRoot)
  if (nranks < 1 || nranks > kMaxRanks) {
    return invalidArgument("nranks " + std::to_string(nranks) + " outside 1.." +
                           std::to_string(kMaxRanks));
  }
  if (rank < 0 || rank >= nranks) {
    return invalidArgument("rank " + std::to_string(rank) + " outside 0.." +
                           std::to_string(nranks - 1));
  }
  ASSIGN_OR_RETURN(const UniqueIdInfo info, decodeUniqueId(id));
  const Deadline deadline = Deadline::after(wait.timeoutSeconds, wait.abort);
  const std::string what = "join as rank " + std::to_string(rank) + " of " +
                           std::to_string(nranks);
  ASSIGN_OR_RETURN(Socket listener, openListener(ifname, nullptr));
  // The service thread runs before the table arrives: the previous rank may connect the ring as
  // soon as it has the table.
  ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl,
                   Impl::create(rank, nranks, info.secret, std::move(listener), wait));

  const std::string atRoot = what + ": root " + info.root.toString();
  ASSIGN_OR_RETURN(Socket root, Socket::connectTo(info.root, deadline, atRoot,
                                                  /*retryRefused=*/true));
  RETURN_IF_ERROR(authenticateAsClient(root, info.secret, deadline, atRoot));
  uint8_t payload[kJoinPayloadBytes];
  putLe32(payload, static_cast<uint32_t>(rank));
  putLe32(payload + 4, static_cast<uint32_t>(nranks));
  impl->listenAddress().toWire(payload + 8);
  RETURN_IF_ERROR(writeFrame(root, FrameType::kJoin, 0, 0, payload, sizeof(payload), deadline,
                             atRoot));
  const size_t tableBytes = static_cast<size_t>(nranks) * SocketAddress::kWireBytes;
  std::vector<uint8_t> table;
  ASSIGN_OR_RETURN(const FrameHeader header,
                   readFrame(root, frameBit(FrameType::kTable) | frameBit(FrameType::kError),
                             static_cast<uint32_t>(tableBytes), &table, deadline,
                             atRoot + ": waiting for the other ranks"));
  (void)header;
  root.close();
  if (table.size() != tableBytes) {
    return remoteError(atRoot + ": address table of " + std::to_string(table.size()) +
                       " bytes, expected " + std::to_string(tableBytes));
  }
  std::vector<SocketAddress> peers;
  for (int r = 0; r < nranks; ++r) {
    Result<SocketAddress> peer =
        SocketAddress::fromWire(table.data() + static_cast<size_t>(r) * SocketAddress::kWireBytes);
    if (!peer.ok()) return peer.status().withContext(atRoot + ": address of rank " + std::to_string(r));
    peers.push_back(peer.value());
  }
  if (!(peers[static_cast<size_t>(rank)] == impl->listenAddress())) {
    return remoteError(atRoot + ": the table gives this rank's address as " +
                       peers[static_cast<size_t>(rank)].toString() + ", not " +
                       impl->listenAddress().toString());
  }
  RETURN_IF_ERROR(impl->connect(std::move(peers), deadline));
  BRAID_LOG(processLogger(), kInfo, kBoot, "rank %d of %d joined; listening on %s", rank, nranks,
            impl->listenAddress().toString().c_str());
  return std::unique_ptr<Bootstrap>(new Bootstrap(std::move(impl)));
}

int Bootstrap::rank() const { return impl_->rank(); }
int Bootstrap::nranks() const { return impl_->nranks(); }
std::string Bootstrap::listenerAddress() const { return impl_->listenAddress().toString(); }

Status Bootstrap::allGather(void* data, size_t bytesPerRank) {
  return impl_->allGather(data, bytesPerRank, RingOp::kAllGather);
}
Status Bootstrap::barrier() { return impl_->allGather(nullptr, 0, RingOp::kBarrier); }
Status Bootstrap::send(int peer, uint32_t tag, const void* data, size_t bytes) {
  return impl_->send(peer, tag, data, bytes);
}
Status Bootstrap::recv(int peer, uint32_t tag, void* data, size_t bytes) {
  return impl_->recv(peer, tag, data, bytes);
}
Result<SplitResult> Bootstrap::split(int color, int key) { return impl_->split(color, key); }

}  // namespace braid
