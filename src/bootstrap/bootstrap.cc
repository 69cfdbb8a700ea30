// Bootstrap: join (rendezvous at the root, then the ring), the ring collectives, point-to-point
// messages and split. The root lives in bootstrap_root.cc, the listener's service thread in
// bootstrap_service.cc; the protocol is described in bootstrap.h and bootstrap_wire.h.
#include "bootstrap/bootstrap.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <system_error>

#include "base/little_endian.h"
#include "base/log.h"
#include "bootstrap/auth.h"
#include "bootstrap/bootstrap_impl.h"

namespace braid {
namespace {

constexpr size_t kSplitRecordBytes = 8 + SocketAddress::kWireBytes;  // color, key, listener
// While waiting for the previous rank to connect the ring, look whether it still exists after
// this long, then again at this interval.
constexpr auto kProbeAfter = std::chrono::milliseconds(200);
constexpr auto kProbeEvery = std::chrono::milliseconds(500);
// A probe or a parting error frame must not hold up a failing rank for long.
constexpr double kShortWaitSeconds = 1;

std::atomic<BootstrapFaultHook> gFaultHook{nullptr};

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

void faultPoint(const char* point, const SocketAddress& listener) {
  if (BootstrapFaultHook hook = gFaultHook.load(std::memory_order_acquire)) {
    hook(point, listener.toString());
  }
}

std::string rankText(int rank) { return "rank " + std::to_string(rank); }

const char* opName(RingOp op) {
  switch (op) {
    case RingOp::kBarrier: return "barrier";
    case RingOp::kSpreadAddresses: return "spreading the listener addresses";
    default: return "allGather";
  }
}

Status Channel::Frame::copyTo(void* out, size_t bytes, const std::string& what, int from,
                              const std::string& hint) const {
  if (data.size() != bytes) {
    return invalidUsage(what + ": " + rankText(from) + " sent " + std::to_string(data.size()) +
                        " bytes, this rank expects " + std::to_string(bytes) + hint);
  }
  if (bytes > 0) std::memcpy(out, data.data(), bytes);
  return okStatus();
}

// ---- Impl: life cycle ----------------------------------------------------------------------

Bootstrap::Impl::Impl(int rank, int nranks, const Secret& secret, Socket listener,
                      const SocketAddress& address, const WaitPolicy& wait)
    : rank_(rank),
      nranks_(nranks),
      secret_(secret),
      wait_(wait),
      listener_(std::move(listener)),
      listenAddress_(address) {}

Result<std::unique_ptr<Bootstrap::Impl>> Bootstrap::Impl::create(int rank, int nranks,
                                                                 const Secret& secret,
                                                                 Socket listener,
                                                                 const WaitPolicy& wait) {
  ASSIGN_OR_RETURN(const SocketAddress address, listener.localAddress());
  std::unique_ptr<Impl> impl(new Impl(rank, nranks, secret, std::move(listener), address, wait));
  ASSIGN_OR_RETURN(impl->wake_, Socket::wakeFd("bootstrap service"));
  impl->p2pIn_.resize(static_cast<size_t>(nranks));
  impl->p2pIn_[static_cast<size_t>(rank)].open = true;  // messages to self
  impl->p2pOut_.resize(static_cast<size_t>(nranks));
  impl->p2pBroken_.resize(static_cast<size_t>(nranks));
  try {
    impl->service_ = std::thread([raw = impl.get()] {
      raw->serve();
      endThreadCrypto();
    });
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

void Bootstrap::Impl::wakeService() { wake_.wake(); }

Status Bootstrap::Impl::connect(std::vector<SocketAddress> peers, const Deadline& deadline) {
  setPeers(std::move(peers));
  if (nranks_ == 1) return okStatus();
  const int next = (rank_ + 1) % nranks_;
  const int prev = (rank_ + nranks_ - 1) % nranks_;
  Result<Socket> ring = connectPeer(next, Purpose::kRing, deadline,
                                    rankText(rank_) + ": ring connect to " + rankText(next));
  if (!ring.ok()) return farewell(breakRing(ring.status()));
  ringNext_ = std::move(ring.value());
  {
    std::lock_guard<std::mutex> lock(mu_);
    nextToWatch_ = ringNext_.fd();
  }
  wakeService();
  const std::string what =
      rankText(rank_) + ": waiting for " + rankText(prev) + " to connect the ring";
  // A previous rank that died after the rendezvous never connects; without a look at its
  // listener this wait would end only at the timeout.
  auto nextProbe = std::chrono::steady_clock::now() + kProbeAfter;
  std::unique_lock<std::mutex> lock(mu_);
  while (!ringIn_.open) {
    Status s = deadline.check(what);
    if (s.ok()) {
      lock.unlock();
      if (std::optional<Status> words = nextPartingWords()) {
        s = Status(words->code(), what + ": " + words->message());
      } else if (std::chrono::steady_clock::now() >= nextProbe) {
        s = probePeer(prev, what);
        nextProbe = std::chrono::steady_clock::now() + kProbeEvery;
      }
      lock.lock();
      if (ringIn_.open) break;
    }
    if (!s.ok()) {
      lock.unlock();
      return farewell(breakRing(s));
    }
    const auto untilProbe =
        std::chrono::ceil<std::chrono::milliseconds>(nextProbe - std::chrono::steady_clock::now());
    cv_.wait_for(lock, std::clamp(untilProbe, std::chrono::milliseconds(0),
                                  std::chrono::milliseconds(deadline.eventWaitMs())));
  }
  return okStatus();
}

Status Bootstrap::Impl::farewell(Status status) {
  // The previous rank may be about to connect the ring; give the service thread a moment to
  // tell it why this rank gives up, or it would only see a closed connection.
  const Deadline shortly = Deadline::after(kShortWaitSeconds);
  std::unique_lock<std::mutex> lock(mu_);
  while (!ringIn_.open && !toldPrevious_ && !shortly.expired()) {
    cv_.wait_for(lock, std::chrono::milliseconds(shortly.pollMs()));
  }
  return status;
}

Status Bootstrap::Impl::probePeer(int peer, const std::string& what) {
  const SocketAddress& where = peers_[static_cast<size_t>(peer)];
  const Deadline probe = Deadline::after(kShortWaitSeconds, wait_.abort);
  Result<Socket> s = Socket::connectTo(where, probe, what, /*retryRefused=*/false);
  if (probe.aborted()) return probe.check(what);
  // Connected: alive. Timed out or a local error: unknown, so keep waiting.
  if (s.ok() || s.status().code() != braidRemoteError) return okStatus();
  // Refused: nobody listens on the address the rendezvous gave for it any more.
  return remoteError(what + ": " + rankText(peer) + " exited (its listener at " + where.toString() +
                     " refuses connections)");
}

Result<Socket> Bootstrap::Impl::connectPeer(int peer, Purpose purpose, const Deadline& deadline,
                                            const std::string& what) {
  const SocketAddress& where = peers_[static_cast<size_t>(peer)];
  Result<Socket> connected = Socket::connectTo(where, deadline, what, /*retryRefused=*/false);
  if (!connected.ok()) {
    if (connected.status().code() != braidRemoteError || deadline.aborted()) {
      return connected.status();
    }
    // Refused: the address the rendezvous gave for it has nobody listening any more.
    return remoteError(what + ": " + rankText(peer) + " exited (nobody listens at " +
                       where.toString() + " any more)");
  }
  Socket s = std::move(connected.value());
  if (purpose != Purpose::kGather) s.setPeerTimeout(wait_.peerTimeoutSeconds);
  Status status = authenticateAsClient(s, secret_, deadline, what);
  const std::vector<uint8_t> identify =
      encodeIdentify({static_cast<uint32_t>(purpose), rank_, nranks_});
  if (status.ok()) {
    status =
        writeFrame(s, FrameType::kIdentify, 0, 0, identify.data(), identify.size(), deadline, what);
  }
  if (status.ok()) {
    std::vector<uint8_t> reply;
    status = readFrame(s, frameBit(FrameType::kAccept) | frameBit(FrameType::kError), 0, &reply,
                       deadline, what)
                 .status();
  }
  // Cut off (not refused with a reason, which arrives as an error frame): it went away.
  if (status.code() == braidRemoteError && !deadline.aborted() &&
      (status.message().find("connection closed by peer") != std::string::npos ||
       status.message().find("connection reset by peer") != std::string::npos)) {
    return remoteError(what + ": " + rankText(peer) +
                       " closed the connection during the handshake (it exited or failed)");
  }
  if (!status.ok()) return status;
  return s;
}

Status Bootstrap::Impl::nextGone(const std::string& what) {
  if (!nextHungUp_) {
    // The write failed: what it said before it left may still be there to read.
    nextHungUp_ = true;
    std::optional<Status> words = readPartingWords(ringNext_, kShortWaitSeconds);
    if (words && !ringCause_) ringCause_ = words;
  }
  if (ringCause_) return Status(ringCause_->code(), what + ": " + ringCause_->message());
  return remoteError(what + ": " + rankText((rank_ + 1) % nranks_) +
                     " closed the ring connection (it exited or failed)");
}

std::optional<Status> Bootstrap::Impl::nextPartingWords() {
  if (!ringNext_.valid() || nextHungUp_ || !peerHungUp(ringNext_)) return std::nullopt;
  // The next rank writes nothing on this connection unless it gives up: then it says why.
  nextHungUp_ = true;
  std::optional<Status> words = readPartingWords(ringNext_, kShortWaitSeconds);
  BRAID_LOG(processLogger(), kInfo, kBoot, "rank %d: the next rank closed the ring%s%s", rank_,
            words ? ", saying: " : " without a word", words ? words->message().c_str() : "");
  if (words && !ringCause_) ringCause_ = words;
  return words;
}

Result<Channel::Frame> Bootstrap::Impl::take(Channel& channel, std::optional<uint32_t> tag,
                                             const Deadline& deadline, const std::string& what,
                                             bool watchNext, bool watchRing) {
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
    if (channel.closed && channel.upstream) {
      return Status(channel.upstream->code(), what + ": " + channel.upstream->message());
    }
    if (channel.closed) return remoteError(what + ": " + channel.reason);
    // Only a failure the previous rank reports: it may close the ring having finished.
    if (watchRing && ringIn_.closed && ringIn_.upstream) {
      return Status(ringIn_.upstream->code(), what + ": " + ringIn_.upstream->message());
    }
    RETURN_IF_ERROR(deadline.check(what));
    if (watchNext) {
      // A failure may come round the other way: the next rank tells us before it leaves.
      lock.unlock();
      std::optional<Status> words = nextPartingWords();
      if (words) return Status(words->code(), what + ": " + words->message());
      lock.lock();
      if (!channel.frames.empty() || channel.closed) continue;
    }
    cv_.wait_for(lock, std::chrono::milliseconds(deadline.eventWaitMs()));
  }
}

std::optional<Status> Bootstrap::Impl::ringCause(const Deadline& deadline) {
  const Deadline shortly = Deadline::after(kShortWaitSeconds);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (ringIn_.closed && ringIn_.upstream) return ringIn_.upstream;
    if (ringCause_) return ringCause_;
    if (shortly.expired() || !deadline.check("").ok()) return std::nullopt;
    lock.unlock();
    if (std::optional<Status> words = nextPartingWords()) return words;
    lock.lock();
    cv_.wait_for(lock, std::chrono::milliseconds(shortly.pollMs()));
  }
}

// ---- Ring collectives ----------------------------------------------------------------------

Status Bootstrap::Impl::breakRing(Status status) {
  if (!ringBroken_) ringBroken_ = status;
  std::unique_lock<std::mutex> lock(mu_);
  // The first failure on the ring goes round unchanged, both ways, so every rank names its origin
  // (say, the rank that died) instead of only the neighbour that gave up.
  const Status cause = ringIn_.upstream ? *ringIn_.upstream : ringCause_ ? *ringCause_ : status;
  farewell_ = cause;
  BRAID_LOG(processLogger(), kInfo, kBoot, "rank %d: ring broken (%s); telling the neighbours: %s",
            rank_, status.message().c_str(), cause.message().c_str());
  const std::vector<uint8_t> payload = encodeErrorPayload(cause);
  std::vector<uint8_t> frame(kFrameHeaderBytes + payload.size());
  encodeFrameHeader({FrameType::kError, 0, 0, static_cast<uint32_t>(payload.size())}, frame.data());
  std::memcpy(frame.data() + kFrameHeaderBytes, payload.data(), payload.size());
  if (ringInFd_ >= 0) {
    // Backwards on the accepted connection, which carries nothing else this way: one small
    // non-blocking write, best effort (the service thread only reads it).
    (void)::send(ringInFd_, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    ::shutdown(ringInFd_, SHUT_RDWR);
  }
  lock.unlock();
  if (ringNext_.valid() && !nextHungUp_) {
    (void)ringNext_.writeAll(frame.data(), frame.size(), Deadline::after(kShortWaitSeconds),
                             rankText(rank_) + ": ring error");
  }
  ringNext_.shutdownBoth();
  if (status.message().find(cause.message()) != std::string::npos) return status;
  // Another rank failed first: that is the failure worth reporting.
  return Status(cause.code(), status.message() + "; the ring failed first at " + cause.message());
}

Status Bootstrap::Impl::ringStep(const void* sendData, void* recvData, size_t bytes, RingOp op,
                                 const Deadline& deadline) {
  const int next = (rank_ + 1) % nranks_;
  const int prev = (rank_ + nranks_ - 1) % nranks_;
  const uint32_t seq = static_cast<uint32_t>(ringSeq_++);
  const std::string what = rankText(rank_) + ": " + opName(op);
  faultPoint("ring:step", listenAddress_);
  (void)nextPartingWords();
  if (nextHungUp_) return nextGone(what);
  if (Status sent = writeFrame(ringNext_, FrameType::kRing, static_cast<uint16_t>(op), seq,
                               sendData, bytes, deadline, what + ": send to " + rankText(next));
      !sent.ok()) {
    if (sent.code() != braidRemoteError || deadline.aborted()) {
      nextHungUp_ = true;  // it may end mid-frame: nothing more can follow on it
      return sent;
    }
    return nextGone(what);
  }
  ASSIGN_OR_RETURN(const Channel::Frame frame,
                   take(ringIn_, std::nullopt, deadline, what + ": receive from " + rankText(prev),
                        /*watchNext=*/true));
  if (frame.flags != static_cast<uint16_t>(op) || frame.tag != seq) {
    return invalidUsage(what + ": " + rankText(prev) + " is in " +
                        opName(static_cast<RingOp>(frame.flags)) + " step " +
                        std::to_string(frame.tag) + ", this rank in " + opName(op) + " step " +
                        std::to_string(seq) + " (ranks called different bootstrap collectives)");
  }
  return frame.copyTo(recvData, bytes, what, prev);
}

Status Bootstrap::Impl::allGather(void* data, size_t bytesPerRank, RingOp op, double graceSeconds) {
  if (ringBroken_) return *ringBroken_;
  if (bytesPerRank > kMaxFrameBytes) {
    return invalidArgument(std::string(opName(op)) + ": " + std::to_string(bytesPerRank) +
                           " bytes per rank exceed the bootstrap limit of " +
                           std::to_string(kMaxFrameBytes));
  }
  if (bytesPerRank > 0 && data == nullptr) return invalidArgument("allGather: null buffer");
  auto* bytes = static_cast<uint8_t*>(data);
  const Deadline deadline = opDeadline(graceSeconds);
  if (everyAddress_ && nranks_ > kRingCollectiveMaxRanks &&
      bytesPerRank * size_t(nranks_) <= kMaxFrameBytes) {
    Status s = hosts_.gatherByHost ? gatherByHost(bytes, bytesPerRank, op, deadline)
                                   : disseminate(bytes, bytesPerRank, op, deadline);
    return s.ok() ? s : breakRing(s);
  }
  // Step s forwards the block that came from rank - s: after nranks-1 steps each rank has all.
  for (int step = 0; step < nranks_ - 1; ++step) {
    const size_t sendBlock = static_cast<size_t>((rank_ - step + nranks_) % nranks_);
    const size_t recvBlock = static_cast<size_t>((rank_ - step - 1 + 2 * nranks_) % nranks_);
    Status s = ringStep(bytes == nullptr ? nullptr : bytes + sendBlock * bytesPerRank,
                        bytes == nullptr ? nullptr : bytes + recvBlock * bytesPerRank, bytesPerRank,
                        op, deadline);
    if (!s.ok()) return breakRing(s);
  }
  return okStatus();
}

Status Bootstrap::Impl::spreadAddresses(const Deadline& deadline) {
  const uint32_t seq = static_cast<uint32_t>(ringSeq_++);
  const uint32_t tag = kDisseminationTag | ((seq & 0xffu) << 8) | kSpreadRound;
  const std::string what = rankText(rank_) + ": " + opName(RingOp::kSpreadAddresses);
  faultPoint("ring:step", listenAddress_);
  // A rank at distance v = n - rank from rank 0 hears from its addressParent (v less its highest
  // bit) and tells the ranks at v + 2^k for every 2^k above v.
  const int distance = (nranks_ - rank_) % nranks_;
  int firstStep = 1;
  std::vector<uint8_t> table;
  if (distance == 0) {
    table = encodeAddressTable(peers_, hostKeys_);
  } else {
    const int parent = addressParent(rank_, nranks_);
    const std::string step = what + ": receive from " + rankText(parent);
    Channel* channel = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      channel = &gatherIn_[parent];
    }
    Result<Channel::Frame> taken =
        takeWatchingPeer(*channel, parent, tag, deadline, step, /*watchRing=*/true);
    if (!taken.ok()) return breakRing(namingTheCause(taken.status(), step, deadline));
    if (taken->flags != static_cast<uint16_t>(RingOp::kSpreadAddresses)) {
      return breakRing(invalidUsage(step + ": " + rankText(parent) + " is in " +
                                    opName(static_cast<RingOp>(taken->flags)) +
                                    " (ranks called different bootstrap collectives)"));
    }
    table = std::move(taken->data);
    Result<AddressTable> all = decodeAddressTable(table, nranks_);
    if (!all.ok()) return breakRing(all.status().withContext(step));
    if (!(all->listeners[size_t(rank_)] == listenAddress_)) {
      return breakRing(remoteError(step + ": the table gives this rank's address as " +
                                   all->listeners[size_t(rank_)].toString() + ", not " +
                                   listenAddress_.toString()));
    }
    setPeers(std::move(all->listeners));
    setHosts(std::move(all->hostKeys));
    while (firstStep <= distance) firstStep *= 2;
  }
  for (int step = firstStep; distance + step < nranks_; step *= 2) {
    const int to = (rank_ - step + nranks_) % nranks_;
    const std::string send = what + ": send to " + rankText(to);
    if (Status sent =
            sendFrame(Purpose::kGather, to, static_cast<uint16_t>(RingOp::kSpreadAddresses), tag,
                      table.data(), table.size(), deadline, send);
        !sent.ok()) {
      return breakRing(namingTheCause(sent, send, deadline));
    }
  }
  return okStatus();
}

Status Bootstrap::Impl::namingTheCause(Status failed, const std::string& step,
                                       const Deadline& deadline) {
  if (failed.code() != braidRemoteError) return failed;
  std::optional<Status> cause = ringCause(deadline);
  return cause ? Status(cause->code(), step + ": " + cause->message()) : failed;
}

Result<Channel::Frame> Bootstrap::Impl::takeWatchingPeer(Channel& channel, int peer, uint32_t tag,
                                                         const Deadline& deadline,
                                                         const std::string& what, bool watchRing) {
  for (;;) {
    const Deadline slice = Deadline::after(kProbeEverySeconds, wait_.abort);
    Result<Channel::Frame> frame = take(channel, tag, slice, what, watchRing, watchRing);
    // Only the slice running out means "keep waiting".
    if (frame.ok() || !slice.expired() || slice.aborted()) return frame;
    RETURN_IF_ERROR(deadline.check(what));
    // A peer connects before it sends, and its connection closing ends the wait: one that never
    // connected and whose listener is gone exited without sending.
    bool opened = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      opened = channel.open;
    }
    if (!opened) RETURN_IF_ERROR(probePeer(peer, what));
  }
}

Status Bootstrap::Impl::disseminate(uint8_t* data, size_t bytesPerRank, RingOp op,
                                    const Deadline& deadline) {
  const uint32_t seq = static_cast<uint32_t>(ringSeq_++);
  const std::string what = rankText(rank_) + ": " + opName(op);
  faultPoint("ring:step", listenAddress_);
  // Block i of `held` is rank (rank + i)'s: a round sends the first blocks held and appends what
  // comes back.
  std::vector<uint8_t> held(bytesPerRank * size_t(nranks_));
  if (bytesPerRank > 0) {
    std::memcpy(held.data(), data + bytesPerRank * size_t(rank_), bytesPerRank);
  }
  int have = 1;
  for (int round = 0, distance = 1; have < nranks_; ++round, distance *= 2) {
    const int count = std::min(distance, nranks_ - have);
    const int to = (rank_ - distance + nranks_) % nranks_;
    const int from = (rank_ + distance) % nranks_;
    const uint32_t tag = kDisseminationTag | ((seq & 0xffu) << 8) | uint32_t(round);
    const size_t bytes = bytesPerRank * size_t(count);
    const std::string step = what + " round " + std::to_string(round);
    if (Status sent = sendFrame(Purpose::kGather, to, static_cast<uint16_t>(op), tag, held.data(),
                                bytes, deadline, step + ": send to " + rankText(to));
        !sent.ok()) {
      return namingTheCause(sent, step, deadline);
    }
    RETURN_IF_ERROR(receiveGathered(from, tag, op, held.data() + bytesPerRank * size_t(have), bytes,
                                    step, deadline));
    have += count;
  }
  for (int i = 1; i < nranks_ && bytesPerRank > 0; ++i) {
    std::memcpy(data + bytesPerRank * size_t((rank_ + i) % nranks_),
                held.data() + bytesPerRank * size_t(i), bytesPerRank);
  }
  return okStatus();
}

Status Bootstrap::Impl::receiveGathered(int from, uint32_t tag, RingOp op, void* out, size_t bytes,
                                        const std::string& step, const Deadline& deadline) {
  Channel* gathered = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    gathered = &gatherIn_[from];
  }
  Result<Channel::Frame> taken =
      takeWatchingPeer(*gathered, from, tag, deadline, step + ": receive from " + rankText(from),
                       /*watchRing=*/true);
  if (!taken.ok()) return namingTheCause(taken.status(), step, deadline);
  const Channel::Frame& frame = taken.value();
  if (frame.flags != static_cast<uint16_t>(op)) {
    return invalidUsage(step + ": " + rankText(from) + " is in " +
                        opName(static_cast<RingOp>(frame.flags)) + ", this rank in " + opName(op) +
                        " (ranks called different bootstrap collectives)");
  }
  return frame.copyTo(out, bytes, step, from, " (ranks gave different block sizes)");
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
                           " bytes exceed the bootstrap limit of " +
                           std::to_string(kMaxFrameBytes));
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
  return sendFrame(Purpose::kP2p, peer, 0, tag, data, bytes, opDeadline(), what);
}

Status Bootstrap::Impl::sendFrame(Purpose purpose, int peer, uint16_t flags, uint32_t tag,
                                  const void* data, size_t bytes, const Deadline& deadline,
                                  const std::string& what) {
  const bool gather = purpose == Purpose::kGather;
  Socket& out = gather ? gatherOut_[peer] : p2pOut_[size_t(peer)];
  std::optional<Status>& broken = gather ? gatherBroken_[peer] : p2pBroken_[size_t(peer)];
  if (broken) return *broken;
  if (!out.valid()) {
    Result<Socket> s = connectPeer(peer, purpose, deadline, what);
    // A timeout or abort while connecting leaves nothing half-sent: a later send may try again.
    if (!s.ok()) return s.status();
    out = std::move(s.value());
  }
  const std::string closed = what + ": " + rankText(peer) + " closed the connection";
  Status status = peerHungUp(out) ? remoteError(closed)
                                  : writeFrame(out, FrameType::kMessage, flags, tag, data, bytes,
                                               deadline, what);
  // A peer that closes while the frame goes out fails the write: name it as the check above does.
  if (status.code() == braidRemoteError &&
      status.message().find("connection closed by peer") != std::string::npos) {
    status = remoteError(closed);
  }
  if (!status.ok()) {
    // The stream may end mid-frame: it cannot carry another message.
    broken = status;
    out.close();
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
  return frame.copyTo(data, bytes, what, peer);
}

std::optional<int> Bootstrap::Impl::unansweringPeer() {
  std::lock_guard<std::mutex> lock(mu_);
  if (ringIn_.unanswering) return (rank_ + nranks_ - 1) % nranks_;
  for (size_t p = 0; p < p2pIn_.size(); ++p) {
    if (p2pIn_[p].unanswering) return static_cast<int>(p);
  }
  return std::nullopt;
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
  std::vector<uint64_t> hostKeys;
  int newRank = -1;
  for (size_t i = 0; i < members.size(); ++i) {
    peers.push_back(members[i].address);
    hostKeys.push_back(hostKeyOf(members[i].parentRank));
    result.parentRanks.push_back(members[i].parentRank);
    if (members[i].parentRank == rank_) newRank = static_cast<int>(i);
  }
  const int n = static_cast<int>(members.size());
  ASSIGN_OR_RETURN(const Secret groupSecret, deriveSplitSecret(secret_, counter, color));
  ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl,
                   create(newRank, n, groupSecret, std::move(listener), wait_));
  RETURN_IF_ERROR(impl->connect(std::move(peers), opDeadline()));
  impl->setHosts(std::move(hostKeys));
  result.bootstrap.reset(new Bootstrap(std::move(impl)));
  return result;
}

// ---- Bootstrap -----------------------------------------------------------------------------

Bootstrap::Bootstrap(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Bootstrap::~Bootstrap() = default;

Result<std::unique_ptr<Bootstrap>> Bootstrap::join(const braidUniqueId& id, int rank, int nranks,
                                                   const std::string& ifname,
                                                   const WaitPolicy& wait, uint64_t hostKey) {
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
  const std::string what = "join as rank " + std::to_string(rank) + " of " + std::to_string(nranks);
  ASSIGN_OR_RETURN(Socket listener, openListener(ifname, nullptr));
  // The service thread runs before the table arrives: the previous rank may connect the ring as
  // soon as it has the table.
  ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl,
                   Impl::create(rank, nranks, info.secret, std::move(listener), wait));

  const std::string atRoot = what + ": root " + info.root.toString();
  ASSIGN_OR_RETURN(Socket root, Socket::connectTo(info.root, deadline, atRoot,
                                                  /*retryRefused=*/true));
  RETURN_IF_ERROR(authenticateAsClient(root, info.secret, deadline, atRoot));
  const std::vector<uint8_t> payload = encodeJoin({rank, nranks, impl->listenAddress(), hostKey});
  RETURN_IF_ERROR(
      writeFrame(root, FrameType::kJoin, 0, 0, payload.data(), payload.size(), deadline, atRoot));
  faultPoint("join:root", impl->listenAddress());
  const std::vector<int> told = rootTableRanks(rank, nranks);
  const size_t tableBytes = told.size() * kAddressEntryBytes;
  std::vector<uint8_t> table;
  Result<FrameHeader> header =
      readFrame(root, frameBit(FrameType::kTable) | frameBit(FrameType::kError),
                static_cast<uint32_t>(tableBytes), &table, deadline,
                atRoot + ": waiting for the other ranks");
  if (!header.ok()) {
    if (deadline.expired() || deadline.aborted()) {
      // Giving up on our own clock: say so, and the root tells every rank (this one included)
      // which ranks never came, instead of reporting this one as lost.
      const std::vector<uint8_t> why = encodeErrorPayload(header.status());
      if (writeFrame(root, FrameType::kError, 0, 0, why.data(), why.size(),
                     Deadline::after(kShortWaitSeconds), atRoot)
              .ok()) {
        if (std::optional<Status> told = readPartingWords(root, kShortWaitSeconds)) {
          return Status(header.status().code(), atRoot + ": " + told->message());
        }
      }
    }
    return header.status();
  }
  root.close();
  faultPoint("join:table", impl->listenAddress());
  Result<AddressTable> decoded = decodeAddressTable(table, static_cast<int>(told.size()));
  if (!decoded.ok()) return decoded.status().withContext(atRoot);
  std::vector<SocketAddress> peers(static_cast<size_t>(nranks));
  std::vector<uint64_t> hostKeys(static_cast<size_t>(nranks));
  for (size_t i = 0; i < told.size(); ++i) {
    peers[size_t(told[i])] = decoded->listeners[i];
    hostKeys[size_t(told[i])] = decoded->hostKeys[i];
  }
  if (!(peers[size_t(rank)] == impl->listenAddress())) {
    return remoteError(atRoot + ": the table gives this rank's address as " +
                       peers[size_t(rank)].toString() + ", not " +
                       impl->listenAddress().toString());
  }
  // The root told this rank a few addresses only; the others come over the ring or the tree.
  RETURN_IF_ERROR(impl->connect(peers, deadline));
  // Rank 0's table beyond 8 ranks and every table of two ranks are whole (rootTableRanks); the
  // other ranks learn the rest below.
  if ((rank == 0 && nranks > kRingCollectiveMaxRanks) || nranks <= 2) {
    impl->setHosts(std::move(hostKeys));
  }
  if (nranks > kRingCollectiveMaxRanks) {
    RETURN_IF_ERROR(
        impl->spreadAddresses(deadline).withContext("receiving the ranks' listener addresses"));
  } else if (nranks > 2) {
    std::vector<uint8_t> wire(static_cast<size_t>(nranks) * kAddressEntryBytes);
    const std::vector<uint8_t> mine = encodeAddressTable({impl->listenAddress()}, {hostKey});
    std::copy(mine.begin(), mine.end(), wire.begin() + size_t(rank) * kAddressEntryBytes);
    RETURN_IF_ERROR(impl->allGather(wire.data(), kAddressEntryBytes, RingOp::kAllGather)
                        .withContext("exchanging the ranks' listener addresses"));
    ASSIGN_OR_RETURN(AddressTable all, decodeAddressTable(wire, nranks));
    impl->setPeers(std::move(all.listeners));
    impl->setHosts(std::move(all.hostKeys));
  }
  faultPoint("join:ring", impl->listenAddress());
  BRAID_LOG(processLogger(), kInfo, kBoot, "rank %d of %d joined; listening on %s", rank, nranks,
            impl->listenAddress().toString().c_str());
  return std::unique_ptr<Bootstrap>(new Bootstrap(std::move(impl)));
}

int Bootstrap::rank() const { return impl_->rank(); }
int Bootstrap::nranks() const { return impl_->nranks(); }
std::string Bootstrap::listenerAddress() const { return impl_->listenAddress().toString(); }
Result<Secret> Bootstrap::deriveKey(std::string_view label) const {
  return hmacSha256(impl_->secret().data(), impl_->secret().size(), label.data(), label.size());
}

Status Bootstrap::allGather(void* data, size_t bytesPerRank, double graceSeconds) {
  return impl_->allGather(data, bytesPerRank, RingOp::kAllGather, graceSeconds);
}
Status Bootstrap::barrier() { return impl_->allGather(nullptr, 0, RingOp::kBarrier); }
Status Bootstrap::send(int peer, uint32_t tag, const void* data, size_t bytes) {
  return impl_->send(peer, tag, data, bytes);
}
Status Bootstrap::recv(int peer, uint32_t tag, void* data, size_t bytes) {
  return impl_->recv(peer, tag, data, bytes);
}
Result<SplitResult> Bootstrap::split(int color, int key) { return impl_->split(color, key); }
std::optional<int> Bootstrap::unansweringPeer() const { return impl_->unansweringPeer(); }
Result<std::unique_ptr<Bootstrap>> Bootstrap::shrink(const std::vector<int>& excluded) {
  return impl_->shrink(excluded);
}

void setBootstrapFaultHook(BootstrapFaultHook hook) {
  gFaultHook.store(hook, std::memory_order_release);
}

}  // namespace braid
