#include "transport/socket/socket_proxy.h"

#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <new>
#include <system_error>

namespace braid {
namespace {

using socketwire::FrameHeader;
using socketwire::FrameKind;
using Clock = std::chrono::steady_clock;

constexpr size_t kRxBytes = 64 * 1024;
// Payloads at least this big are read straight into the FIFO rather than through staging.
constexpr size_t kDirectReadBytes = 16 * 1024;
// Slots smaller than two of these go out whole on one stream: splitting costs a header and a
// syscall per piece, which only pays off when the bytes dominate.
constexpr uint32_t kMinPieceBytes = 32 * 1024;
constexpr int kMaxIov = 64;
constexpr uint64_t kEventTag = UINT64_MAX;
// Idle backoff before sleeping in epoll: poll, then yield (a rank sharing the core gets to run).
constexpr auto kSpin = std::chrono::microseconds(10);
constexpr auto kYield = std::chrono::microseconds(60);
constexpr int kSleepMs = 100;
constexpr int kFlushSleepMs = 10;
constexpr double kLingerSeconds = 2;

size_t roundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

uint32_t pieceCount(uint32_t bytes, size_t streams) {
  if (streams <= 1 || bytes < 2 * kMinPieceBytes) return 1;
  return static_cast<uint32_t>(std::min<size_t>(streams, bytes / kMinPieceBytes));
}

bool peerGoneErrno(int error) {
  return error == EPIPE || error == ECONNRESET || error == ENOTCONN || error == ETIMEDOUT ||
         error == EHOSTUNREACH || error == ENETUNREACH;
}

}  // namespace

OwnedFd::~OwnedFd() { reset(-1); }

void OwnedFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

Result<std::unique_ptr<SocketProxy>> SocketProxy::start(Options options,
                                                        std::vector<PeerStream> streams) {
  std::unique_ptr<SocketProxy> p(new SocketProxy());
  p->options_ = std::move(options);
  const int n = p->options_.nranks;
  p->notices_ = std::make_unique<PeerFailures>(n);
  const size_t fifos = size_t(n) * p->options_.maxChannels;
  std::sort(streams.begin(), streams.end(), [](const PeerStream& a, const PeerStream& b) {
    return a.peer != b.peer ? a.peer < b.peer : a.index < b.index;
  });
  p->peerStreams_.resize(n);
  p->liveStreams_ = std::make_unique<std::atomic<int>[]>(n);
  for (int r = 0; r < n; ++r) p->liveStreams_[r].store(0);
  p->streams_.resize(streams.size());
  for (size_t i = 0; i < streams.size(); ++i) {
    Stream& s = p->streams_[i];
    s.peer = streams[i].peer;
    s.socket = std::move(streams[i].socket);
    s.rx = std::make_unique<char[]>(kRxBytes);
    p->peerStreams_[s.peer].push_back(static_cast<int>(i));
    p->liveStreams_[s.peer].fetch_add(1);
  }
  p->sendOpened_ = std::make_unique<std::atomic<bool>[]>(fifos);
  p->recvOpened_ = std::make_unique<std::atomic<bool>[]>(fifos);
  for (size_t i = 0; i < fifos; ++i) {
    p->sendOpened_[i].store(false);
    p->recvOpened_[i].store(false);
  }
  RETURN_IF_ERROR(p->allocate());

  p->eventFd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!p->eventFd_.valid()) return errnoError("socket transport: eventfd", errno);
  p->waker_.eventFd = p->eventFd_.fd();
  p->epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!p->epoll_.valid()) return errnoError("socket transport: epoll_create1", errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kEventTag;
  if (::epoll_ctl(p->epoll_.fd(), EPOLL_CTL_ADD, p->eventFd_.fd(), &ev) != 0) {
    return errnoError("socket transport: epoll_ctl", errno);
  }
  for (size_t i = 0; i < p->streams_.size(); ++i) {
    ev.events = EPOLLIN;
    ev.data.u64 = i;
    if (::epoll_ctl(p->epoll_.fd(), EPOLL_CTL_ADD, p->streams_[i].socket.fd(), &ev) != 0) {
      return errnoError("socket transport: epoll_ctl", errno);
    }
  }
  try {
    p->thread_ = std::thread([raw = p.get()] { raw->run(); });
  } catch (const std::system_error& e) {
    return systemError(std::string("socket transport: proxy thread: ") + e.what());
  }
  return p;
}

Status SocketProxy::allocate() {
  const int n = options_.nranks;
  const uint32_t nslots = options_.nslots;
  metaBytes_ = roundUp(sizeof(FifoControl) + nslots * sizeof(SlotHeader), 4096);
  fifoBytes_ = metaBytes_ + roundUp(size_t(nslots) * options_.slotBytes, 4096);
  arenaSlot_.assign(n, -1);
  int linkedPeers = 0;
  for (int r = 0; r < n; ++r) {
    if (!peerStreams_[r].empty()) arenaSlot_[r] = linkedPeers++;
  }
  send_.resize(size_t(n) * options_.maxChannels);
  recv_.resize(size_t(n) * options_.maxChannels);
  if (linkedPeers == 0) return okStatus();
  // Address space only: pages are taken when a FIFO is first used.
  arenaBytes_ = size_t(linkedPeers) * options_.maxChannels * 2 * fifoBytes_;
  void* mem = ::mmap(nullptr, arenaBytes_, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED) {
    const int error = errno;
    const size_t wanted = arenaBytes_;
    arenaBytes_ = 0;
    return errnoError("socket transport: mapping " + std::to_string(wanted) + " bytes of FIFOs",
                      error);
  }
  arena_ = static_cast<char*>(mem);
  for (int r = 0; r < n; ++r) {
    if (arenaSlot_[r] < 0) continue;
    for (int c = 0; c < options_.maxChannels; ++c) {
      const size_t f = fifoIndex(r, c);
      new (view(f, true).control) FifoControl();
      new (view(f, false).control) FifoControl();
      send_[f].piecesLeft.assign(nslots, 0);
      recv_[f].slots.assign(nslots, SlotAssembly{});
    }
  }
  return okStatus();
}

SocketProxy::~SocketProxy() {
  close(false, 0);
  if (arena_ != nullptr) ::munmap(arena_, arenaBytes_);
}

void SocketProxy::close(bool flush, double flushSeconds) {
  if (closed_) return;
  closed_ = true;
  if (hasFailure_.load() || notices_->any()) flush = false;  // peers are failing too; nobody waits for the rest
  flushSeconds_ = flushSeconds;
  mode_.store(flush ? Mode::kFlush : Mode::kStop, std::memory_order_release);
  const uint64_t one = 1;
  if (eventFd_.valid()) (void)!::write(eventFd_.fd(), &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  for (Stream& s : streams_) s.socket.close();
}

FifoView SocketProxy::view(size_t index, bool send) const {
  const int peer = static_cast<int>(index / options_.maxChannels);
  const int channel = static_cast<int>(index % options_.maxChannels);
  char* base =
      arena_ + ((size_t(arenaSlot_[peer]) * options_.maxChannels + channel) * 2 + (send ? 0 : 1)) *
                   fifoBytes_;
  FifoView v;
  v.control = reinterpret_cast<FifoControl*>(base);
  v.headers = reinterpret_cast<SlotHeader*>(base + sizeof(FifoControl));
  v.data = base + metaBytes_;
  v.nslots = options_.nslots;
  v.slotBytes = options_.slotBytes;
  return v;
}

bool SocketProxy::linked(int peer) const {
  return peer >= 0 && peer < options_.nranks && arenaSlot_[peer] >= 0;
}

FifoView SocketProxy::sendFifo(int peer, int channel) {
  const size_t f = fifoIndex(peer, channel);
  if (!sendOpened_[f].exchange(true)) openedGeneration_.fetch_add(1, std::memory_order_release);
  return view(f, true);
}

FifoView SocketProxy::recvFifo(int peer, int channel) {
  const size_t f = fifoIndex(peer, channel);
  if (!recvOpened_[f].exchange(true)) openedGeneration_.fetch_add(1, std::memory_order_release);
  return view(f, false);
}

bool SocketProxy::peerAlive(int peer) const {
  return !linked(peer) || liveStreams_[peer].load(std::memory_order_acquire) > 0;
}

std::optional<Status> SocketProxy::failure() const {
  if (!hasFailure_.load(std::memory_order_acquire)) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

void SocketProxy::notifyFailure(int failedRank, const PeerFailure& failure) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (noticeQueued_) return;
    noticeQueued_ = true;
    noticeText_ = failure.status.message().substr(0, socketwire::kMaxNoticeBytes);
    notice_ = FrameHeader{FrameKind::kNotice,
                          0,
                          failure.collectivesDone,
                          0,
                          static_cast<uint32_t>(noticeText_.size()),
                          static_cast<uint32_t>(failure.status.code()),
                          failedRank,
                          CallDescriptor{}};
  }
  noticePending_.store(true, std::memory_order_release);
  const uint64_t one = 1;
  (void)!::write(eventFd_.fd(), &one, sizeof(one));
}

// ---- The proxy thread -----------------------------------------------------------------------

void SocketProxy::run() {
  epoll_event events[64];
  bool idle = false;
  Clock::time_point idleSince;
  bool flushing = false;
  bool lingering = false;
  Clock::time_point flushEnd;
  Clock::time_point lingerEnd;
  for (;;) {
    const Mode mode = mode_.load(std::memory_order_acquire);
    if (mode == Mode::kStop) break;
    // Before the flush check: a connector opened just before close() must be seen to be flushed.
    refreshOpened();
    if (mode == Mode::kFlush) {
      const auto now = Clock::now();
      if (!flushing) {
        flushing = true;
        flushEnd = now + std::chrono::milliseconds(static_cast<int64_t>(flushSeconds_ * 1000));
      }
      if (!lingering && (flushed() || now > flushEnd)) {
        // Everything is on the wire: say so, then read until the peers have said so too.
        for (Stream& s : streams_) {
          if (s.socket.valid()) ::shutdown(s.socket.fd(), SHUT_WR);
          s.out.clear();
        }
        lingering = true;
        lingerEnd = now + std::chrono::milliseconds(static_cast<int64_t>(kLingerSeconds * 1000));
      }
      if (lingering && (allClosed() || now > lingerEnd)) break;
    }
    bool moved = false;
    if (!lingering) {
      moved |= scanSends();
      moved |= scanRecvs();
      moved |= takeNotices();
      moved |= flushAll();
    }
    int timeout = 0;
    bool sleeping = false;
    if (moved) {
      idle = false;
    } else {
      const auto now = Clock::now();
      if (!idle) {
        idle = true;
        idleSince = now;
      } else if (now - idleSince > kYield) {
        // Raise `sleeping`, then look once more: a post racing with us is seen here or rings the
        // eventfd (fifo.h).
        announceSleep(&waker_);
        sleeping = true;
        if (!lingering && (scanSends() | scanRecvs() | takeNotices())) {
          waker_.sleeping.store(0, std::memory_order_relaxed);
          flushAll();
          idle = false;
          continue;
        }
        timeout = mode == Mode::kRun ? kSleepMs : kFlushSleepMs;
      } else if (now - idleSince > kSpin) {
        sched_yield();
      }
    }
    const int n = ::epoll_wait(epoll_.fd(), events, 64, timeout);
    if (sleeping) waker_.sleeping.store(0, std::memory_order_relaxed);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 == kEventTag) {
        uint64_t value = 0;
        (void)!::read(eventFd_.fd(), &value, sizeof(value));
        continue;
      }
      Stream& s = streams_[events[i].data.u64];
      if (!s.socket.valid()) continue;
      if (s.readOpen && (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) readStream(s);
      if (s.socket.valid() && (events[i].events & EPOLLOUT)) flushStream(s);
    }
    if (n > 0) idle = false;
  }
}

void SocketProxy::refreshOpened() {
  const uint64_t generation = openedGeneration_.load(std::memory_order_acquire);
  if (generation == openedSeen_) return;
  openedSeen_ = generation;
  openedSends_.clear();
  openedRecvs_.clear();
  const size_t fifos = size_t(options_.nranks) * options_.maxChannels;
  for (size_t f = 0; f < fifos; ++f) {
    if (sendOpened_[f].load(std::memory_order_acquire)) openedSends_.push_back(static_cast<int>(f));
    if (recvOpened_[f].load(std::memory_order_acquire)) openedRecvs_.push_back(static_cast<int>(f));
  }
}

bool SocketProxy::scanSends() {
  bool moved = false;
  const uint32_t nslots = options_.nslots;
  for (int f : openedSends_) {
    const int peer = f / options_.maxChannels;
    const int channel = f % options_.maxChannels;
    if (liveStreams_[peer].load(std::memory_order_relaxed) == 0) continue;
    SendState& st = send_[f];
    const FifoView v = view(f, true);
    const uint64_t head = v.control->head.load(std::memory_order_acquire);
    const std::vector<int>& ids = peerStreams_[peer];
    while (st.queued < head && st.queued < st.creditTail + nslots) {
      const uint64_t seq = st.queued++;
      const uint32_t index = static_cast<uint32_t>(seq % nslots);
      const SlotHeader& h = v.headers[index];
      const uint32_t total = std::min(h.bytes, options_.slotBytes);
      const uint32_t pieces = pieceCount(total, ids.size());
      st.piecesLeft[index] = pieces;
      uint32_t offset = 0;
      for (uint32_t i = 0; i < pieces; ++i) {
        const uint32_t len = total / pieces + (i < total % pieces ? 1 : 0);
        OutItem item;
        item.header = FrameHeader{FrameKind::kData,
                                  static_cast<uint32_t>(channel),
                                  seq,
                                  offset,
                                  len,
                                  total,
                                  options_.rank,
                                  h.call};
        item.data = v.data + size_t(index) * options_.slotBytes + offset;
        item.fifo = f;
        item.seq = seq;
        streams_[ids[(size_t(channel) + i) % ids.size()]].out.push_back(item);
        offset += len;
      }
      moved = true;
    }
  }
  return moved;
}

bool SocketProxy::scanRecvs() {
  bool moved = false;
  for (int f : openedRecvs_) {
    const int peer = f / options_.maxChannels;
    if (liveStreams_[peer].load(std::memory_order_relaxed) == 0) continue;
    RecvState& st = recv_[f];
    const uint64_t tail = view(f, false).control->tail.load(std::memory_order_acquire);
    if (tail <= st.creditSent) continue;
    st.creditSent = tail;
    const int channel = f % options_.maxChannels;
    queueControl(peer, channel,
                 FrameHeader{FrameKind::kCredit, static_cast<uint32_t>(channel), tail, 0, 0, 0,
                             options_.rank, CallDescriptor{}});
    moved = true;
  }
  return moved;
}

bool SocketProxy::takeNotices() {
  if (!noticePending_.load(std::memory_order_acquire)) return false;
  noticePending_.store(false);
  FrameHeader header;
  {
    std::lock_guard<std::mutex> lock(mu_);
    header = notice_;
  }
  for (int peer = 0; peer < options_.nranks; ++peer) {
    if (!linked(peer) || liveStreams_[peer].load() == 0) continue;
    Stream& s = streams_[peerStreams_[peer][0]];
    OutItem item;
    item.header = header;
    item.data = noticeText_.data();  // fixed once queued (notifyFailure runs once)
    auto at = s.out.begin() + (s.frontDone > 0 && !s.out.empty() ? 1 : 0);
    while (at != s.out.end() && at->fifo < 0) ++at;
    s.out.insert(at, item);
  }
  return true;
}

void SocketProxy::queueControl(int peer, int channel, const FrameHeader& header) {
  const std::vector<int>& ids = peerStreams_[peer];
  Stream& s = streams_[ids[size_t(channel) % ids.size()]];
  // Credits are latency-critical: they go ahead of queued data, behind a frame already half
  // written and behind earlier control frames (so that they stay in order); a credit still
  // waiting for the same channel is raised instead of sending another.
  auto at = s.out.begin() + (s.frontDone > 0 && !s.out.empty() ? 1 : 0);
  for (; at != s.out.end() && at->fifo < 0; ++at) {
    if (header.kind == FrameKind::kCredit && at->header.kind == FrameKind::kCredit &&
        at->header.channel == header.channel) {
      at->header.seq = std::max(at->header.seq, header.seq);
      return;
    }
  }
  OutItem item;
  item.header = header;
  s.out.insert(at, item);
}

bool SocketProxy::flushAll() {
  bool wrote = false;
  for (Stream& s : streams_) {
    if (!s.out.empty() && !s.wantOut && s.socket.valid()) wrote |= flushStream(s);
  }
  return wrote;
}

bool SocketProxy::flushStream(Stream& s) {
  bool wrote = false;
  constexpr size_t kHeaderBytes = sizeof(FrameHeader);
  while (!s.out.empty() && s.socket.valid()) {
    iovec iov[kMaxIov];
    int n = 0;
    size_t skip = s.frontDone;
    for (auto it = s.out.begin(); it != s.out.end() && n + 2 <= kMaxIov; ++it) {
      if (skip < kHeaderBytes) {
        iov[n++] = {reinterpret_cast<char*>(&it->header) + skip, kHeaderBytes - skip};
        skip = 0;
      } else {
        skip -= kHeaderBytes;
      }
      if (it->header.bytes > skip) {
        iov[n++] = {const_cast<char*>(it->data) + skip, it->header.bytes - skip};
      }
      skip = 0;
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(n);
    const ssize_t w = ::sendmsg(s.socket.fd(), &msg, MSG_NOSIGNAL);
    if (w < 0) {
      const int error = errno;
      if (error == EINTR) continue;
      if (error == EAGAIN || error == EWOULDBLOCK) {
        setWantOut(s, true);
        return wrote;
      }
      closeStream(s, /*reset=*/true,
                  peerGoneErrno(error) ? "connection reset" : std::string(std::strerror(error)));
      return wrote;
    }
    wrote = true;
    size_t left = static_cast<size_t>(w);
    while (left > 0 && !s.out.empty()) {
      const size_t itemLeft = kHeaderBytes + s.out.front().header.bytes - s.frontDone;
      if (left < itemLeft) {
        s.frontDone += left;
        break;
      }
      left -= itemLeft;
      s.frontDone = 0;
      const OutItem done = s.out.front();
      s.out.pop_front();
      pieceWritten(done);
    }
  }
  if (s.wantOut) setWantOut(s, false);
  return wrote;
}

void SocketProxy::pieceWritten(const OutItem& item) {
  if (item.fifo < 0) return;
  SendState& st = send_[item.fifo];
  const uint32_t nslots = options_.nslots;
  --st.piecesLeft[item.seq % nslots];
  const uint64_t before = st.released;
  while (st.released < st.queued && st.piecesLeft[st.released % nslots] == 0) ++st.released;
  if (st.released != before) {
    view(item.fifo, true).control->tail.store(st.released, std::memory_order_seq_cst);
    wakeRank();
  }
}

void SocketProxy::readStream(Stream& s) {
  constexpr size_t kHeaderBytes = sizeof(FrameHeader);
  while (s.socket.valid() && s.readOpen) {
    if (s.inPayload) {
      if (s.payloadLeft == 0) {
        Status st = payloadDone(s);
        if (!st.ok()) return protocolError(s, st);
        continue;
      }
      const size_t staged = s.rxEnd - s.rxBegin;
      if (staged > 0) {
        const size_t k = std::min(staged, s.payloadLeft);
        std::memcpy(s.payload, s.rx.get() + s.rxBegin, k);
        s.rxBegin += k;
        s.payload += k;
        s.payloadLeft -= k;
        continue;
      }
      if (s.payloadLeft >= kDirectReadBytes) {
        const ssize_t r = ::recv(s.socket.fd(), s.payload, s.payloadLeft, 0);
        if (r > 0) {
          s.payload += r;
          s.payloadLeft -= static_cast<size_t>(r);
          continue;
        }
        if (r == 0) return closeStream(s, /*reset=*/true, "closed in the middle of a frame");
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        return closeStream(s, /*reset=*/true, std::strerror(errno));
      }
    } else if (s.rxEnd - s.rxBegin >= kHeaderBytes) {
      std::memcpy(&s.frame, s.rx.get() + s.rxBegin, kHeaderBytes);
      s.rxBegin += kHeaderBytes;
      Status st = frameArrived(s);
      if (!st.ok()) return protocolError(s, st);
      continue;
    }
    // Refill the staging buffer.
    if (s.rxBegin == s.rxEnd) {
      s.rxBegin = s.rxEnd = 0;
    } else if (s.rxBegin > 0) {
      std::memmove(s.rx.get(), s.rx.get() + s.rxBegin, s.rxEnd - s.rxBegin);
      s.rxEnd -= s.rxBegin;
      s.rxBegin = 0;
    }
    const ssize_t r = ::recv(s.socket.fd(), s.rx.get() + s.rxEnd, kRxBytes - s.rxEnd, 0);
    if (r > 0) {
      s.rxEnd += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) {
      const bool midFrame = s.inPayload || s.rxEnd > s.rxBegin;
      return closeStream(s, /*reset=*/midFrame,
                         midFrame ? "closed in the middle of a frame" : "closed");
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    return closeStream(s, /*reset=*/true, std::strerror(errno));
  }
}

Status SocketProxy::frameArrived(Stream& s) {
  const FrameHeader& h = s.frame;
  const uint32_t nslots = options_.nslots;
  if (h.kind != FrameKind::kNotice && h.channel >= static_cast<uint32_t>(options_.maxChannels)) {
    return internalError("frame for channel " + std::to_string(h.channel) + " beyond the " +
                         std::to_string(options_.maxChannels) + " set up");
  }
  const size_t f = fifoIndex(s.peer, static_cast<int>(h.channel));
  switch (h.kind) {
    case FrameKind::kData: {
      RecvState& st = recv_[f];
      const FifoView v = view(f, false);
      const uint64_t tail = v.control->tail.load(std::memory_order_acquire);
      if (h.seq < st.posted || h.seq >= tail + nslots) {
        return internalError("slot " + std::to_string(h.seq) + " outside the credit window [" +
                             std::to_string(st.posted) + ", " + std::to_string(tail + nslots) +
                             ")");
      }
      if (h.total > options_.slotBytes || h.offset > h.total || h.bytes > h.total - h.offset) {
        return internalError("piece [" + std::to_string(h.offset) + ", +" +
                             std::to_string(h.bytes) + ") of a " + std::to_string(h.total) +
                             "-byte slot does not fit (BRAID_CHUNK_BYTES differ between ranks?)");
      }
      SlotAssembly& a = st.slots[h.seq % nslots];
      if (a.seq != h.seq) {
        if (a.seq != UINT64_MAX)
          return internalError("slot " + std::to_string(h.seq) + " overlaps an unposted slot");
        a.seq = h.seq;
        a.total = h.total;
        a.got = 0;
        a.call = h.call;
      } else if (a.total != h.total || a.got + h.bytes > a.total) {
        return internalError("pieces of slot " + std::to_string(h.seq) + " disagree on its size");
      }
      s.payload = v.data + size_t(h.seq % nslots) * options_.slotBytes + h.offset;
      s.payloadLeft = h.bytes;
      s.inPayload = true;
      return okStatus();
    }
    case FrameKind::kCredit: {
      SendState& st = send_[f];
      if (h.seq < st.creditTail || h.seq > st.queued) {
        return internalError("credit " + std::to_string(h.seq) + " outside [" +
                             std::to_string(st.creditTail) + ", " + std::to_string(st.queued) +
                             "]");
      }
      st.creditTail = h.seq;
      return okStatus();
    }
    case FrameKind::kNotice: {
      if (h.bytes > socketwire::kMaxNoticeBytes) return internalError("oversized failure notice");
      s.notice.assign(h.bytes, '\0');
      s.payload = s.notice.data();
      s.payloadLeft = h.bytes;
      s.inPayload = true;
      return okStatus();
    }
  }
  return internalError("unknown frame kind " + std::to_string(static_cast<uint32_t>(h.kind)));
}

Status SocketProxy::payloadDone(Stream& s) {
  s.inPayload = false;
  const FrameHeader& h = s.frame;
  if (h.kind == FrameKind::kNotice) {
    const auto code = static_cast<braidResult_t>(h.total);
    std::string who = h.origin >= 0 && h.origin < options_.nranks
                          ? options_.peerNames[h.origin]
                          : "rank " + std::to_string(h.origin);
    notices_->record(s.peer, PeerFailure{Status(code == braidSuccess ? braidRemoteError : code,
                                                who + " failed: " + s.notice),
                                         static_cast<uint32_t>(h.seq)});
    wakeRank();
    return okStatus();
  }
  const size_t f = fifoIndex(s.peer, static_cast<int>(h.channel));
  const uint32_t nslots = options_.nslots;
  RecvState& st = recv_[f];
  SlotAssembly& a = st.slots[h.seq % nslots];
  a.got += h.bytes;
  if (a.got != a.total) return okStatus();
  const FifoView v = view(f, false);
  bool posted = false;
  for (;;) {
    SlotAssembly& b = st.slots[st.posted % nslots];
    if (b.seq != st.posted || b.got != b.total) break;
    SlotHeader& out = v.headers[st.posted % nslots];
    out.bytes = b.total;
    out.reserved = 0;
    out.call = b.call;
    b.seq = UINT64_MAX;
    ++st.posted;
    posted = true;
  }
  if (posted) {
    v.control->head.store(st.posted, std::memory_order_seq_cst);
    wakeRank();
  }
  return okStatus();
}

void SocketProxy::closeStream(Stream& s, bool reset, const std::string& why) {
  const int peer = s.peer;
  if (!reset) {
    if (!s.readOpen) return;
    s.readOpen = false;
    setWantOut(s, s.wantOut);  // stop watching for input: EOF would report forever
    if (liveStreams_[peer].fetch_sub(1) > 1) return;
  }
  // The peer is gone: every stream of it goes.
  for (int id : peerStreams_[peer]) {
    Stream& t = streams_[id];
    if (t.socket.valid()) {
      ::epoll_ctl(epoll_.fd(), EPOLL_CTL_DEL, t.socket.fd(), nullptr);
      t.socket.close();
    }
    t.readOpen = false;
    t.out.clear();
    t.frontDone = 0;
  }
  liveStreams_[peer].store(0, std::memory_order_release);
  if (options_.logger != nullptr && mode_.load() == Mode::kRun) {
    BRAID_LOG(*options_.logger, kInfo, kNet, "socket transport: %s: connection %s",
              options_.peerNames[peer].c_str(), why.c_str());
  }
  wakeRank();
}

void SocketProxy::setWantOut(Stream& s, bool want) {
  s.wantOut = want;
  if (!s.socket.valid()) return;
  epoll_event ev{};
  ev.events = (s.readOpen ? EPOLLIN : 0u) | (want ? EPOLLOUT : 0u);
  ev.data.u64 = static_cast<uint64_t>(&s - streams_.data());
  ::epoll_ctl(epoll_.fd(), EPOLL_CTL_MOD, s.socket.fd(), &ev);
}

void SocketProxy::protocolError(const Stream& s, const Status& status) {
  const int peer = s.peer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_) {
      failure_ = Status(braidRemoteError, "socket transport: bad frame from " +
                                              options_.peerNames[peer] + ": " + status.message());
    }
  }
  hasFailure_.store(true, std::memory_order_release);
  closeStream(streams_[peerStreams_[peer][0]], /*reset=*/true, "dropped: " + status.message());
}

void SocketProxy::wakeRank() { wakeIfSleeping(options_.rankWaker); }

bool SocketProxy::flushed() const {
  if (noticePending_.load(std::memory_order_acquire)) return false;
  for (int f : openedSends_) {
    const int peer = f / options_.maxChannels;
    if (liveStreams_[peer].load() == 0) continue;
    const uint64_t head = view(f, true).control->head.load(std::memory_order_acquire);
    if (send_[f].released != head) return false;
  }
  for (const Stream& s : streams_) {
    if (s.socket.valid() && !s.out.empty()) return false;
  }
  return true;
}

bool SocketProxy::allClosed() const {
  for (int r = 0; r < options_.nranks; ++r) {
    if (liveStreams_[r].load() > 0) return false;
  }
  return true;
}

}  // namespace braid
