#include "transport/socket/socket_proxy.h"

#include <sched.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

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
// Idle, the proxy sleeps until the eventfd (posts, adoptions, notices, close) or a stream wakes
// it; the limit only bounds a wake-up missed, and each one costs ranks sharing the core
// (docs/scale.md#waits-that-cost-nothing).
constexpr int kSleepMs = 1000;
constexpr int kFlushSleepMs = 10;
constexpr double kLingerSeconds = 2;

uint32_t pieceCount(uint32_t bytes, size_t streams) {
  if (streams <= 1 || bytes < 2 * kMinPieceBytes) return 1;
  return static_cast<uint32_t>(std::min<size_t>(streams, bytes / kMinPieceBytes));
}

bool peerGoneErrno(int error) {
  return error == EPIPE || error == ECONNRESET || error == ENOTCONN || error == ETIMEDOUT ||
         error == EHOSTUNREACH || error == ENETUNREACH;
}

}  // namespace

SocketProxy::SocketProxy(ProxyOptions options)
    : NetworkProxy(std::move(options), "socket transport") {}

Result<std::unique_ptr<SocketProxy>> SocketProxy::start(ProxyOptions options,
                                                        const std::vector<bool>& linked) {
  std::unique_ptr<SocketProxy> p(new SocketProxy(std::move(options)));
  const int n = p->options().nranks;
  p->peerStreams_.resize(n);
  RETURN_IF_ERROR(p->setUpFifos(std::vector<int>(n, 0), linked));
  p->allocate();
  RETURN_IF_ERROR(p->openWakeup(kEventTag));
  RETURN_IF_ERROR(p->startThread());
  return p;
}

void SocketProxy::adopt(PeerStream stream) {
  adopted_.give(std::move(stream));
  wakeProxy();
}

void SocketProxy::takeAdopted() {
  for (PeerStream& in : adopted_.take()) {
    if (in.peer < 0 || in.peer >= options().nranks || !linked(in.peer)) continue;
    const size_t id = streams_.size();
    // A peer whose streams closed stays gone: one that comes back is a stranger to its calls.
    const bool gone = !peerStreams_[in.peer].empty() && !linkUp(in.peer);
    if (gone) continue;
    streams_.emplace_back();
    Stream& s = streams_.back();
    s.peer = in.peer;
    s.socket = std::move(in.socket);
    s.rx.reset(new char[kRxBytes]);  // not zeroed: pages come as data does
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = id;
    if (::epoll_ctl(epollFd(), EPOLL_CTL_ADD, s.socket.fd(), &ev) != 0) {
      recordFailure(std::string("epoll_ctl: ") + std::strerror(errno));
      streams_.pop_back();
      continue;
    }
    peerStreams_[in.peer].push_back(static_cast<int>(id));
    linkOpened(in.peer);
  }
  wakeRank();
}

void SocketProxy::allocate() {
  const size_t fifoCount = size_t(options().nranks) * options().maxChannels;
  send_.resize(fifoCount);
  recv_.resize(fifoCount);
}

std::vector<uint32_t>& SocketProxy::piecesLeft(size_t f) {
  std::vector<uint32_t>& left = send_[f].piecesLeft;
  if (left.empty()) left.assign(options().nslots, 0);
  return left;
}

std::vector<SocketProxy::SlotAssembly>& SocketProxy::assemblies(size_t f) {
  std::vector<SlotAssembly>& slots = recv_[f].slots;
  if (slots.empty()) slots.assign(options().nslots, SlotAssembly{});
  return slots;
}

SocketProxy::~SocketProxy() { close(false, 0); }

void SocketProxy::stopped() {
  for (Stream& s : streams_) s.socket.close();
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
    const Mode mode = currentMode(std::memory_order_acquire);
    if (mode == Mode::kStop) break;
    takeAdopted();
    // Before the flush check: a connector opened just before close() must be seen to be flushed.
    fifos().refreshOpened();
    if (mode == Mode::kFlush) {
      const auto now = Clock::now();
      if (!flushing) {
        flushing = true;
        flushEnd = now + std::chrono::milliseconds(static_cast<int64_t>(flushSeconds() * 1000));
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
      } else if (now - idleSince > kYield && !armedWorkOutstanding()) {
        // Raise `sleeping`, then look once more: a post racing with us is seen here or rings the
        // eventfd (fifo.h).
        announceSleep(waker());
        sleeping = true;
        if (!lingering && (scanSends() | scanRecvs() | takeNotices())) {
          waker()->sleeping.store(0, std::memory_order_relaxed);
          flushAll();
          idle = false;
          continue;
        }
        timeout = mode == Mode::kRun ? kSleepMs : kFlushSleepMs;
      } else if (now - idleSince > kSpin) {
        sched_yield();
      }
    }
    const int n = ::epoll_wait(epollFd(), events, 64, timeout);
    if (sleeping) waker()->sleeping.store(0, std::memory_order_relaxed);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 == kEventTag) {
        uint64_t value = 0;
        (void)!::read(eventFd(), &value, sizeof(value));
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

bool SocketProxy::scanSends() {
  return sendPosted([](size_t, int, int) { return true; },
                    [this](size_t f, int peer, int channel, const FifoView& v, uint64_t seq) {
                      queuePieces(f, peer, channel, v, seq);
                      return true;
                    });
}

void SocketProxy::queuePieces(size_t f, int peer, int channel, const FifoView& v, uint64_t seq) {
  const uint32_t slotBytes = options().slotBytes;
  const std::vector<int>& ids = peerStreams_[peer];
  const uint32_t index = static_cast<uint32_t>(seq % options().nslots);
  const SlotHeader& h = v.headers[index];
  const uint32_t total = std::min(h.bytes, slotBytes);
  const uint32_t pieces = pieceCount(total, ids.size());
  piecesLeft(f)[index] = pieces;
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
                              options().rank,
                              h.call};
    item.data = v.data + size_t(index) * slotBytes + offset;
    item.fifo = static_cast<int>(f);
    item.seq = seq;
    streams_[ids[(size_t(channel) + i) % ids.size()]].out.push_back(item);
    offset += len;
  }
}

bool SocketProxy::scanRecvs() {
  return returnCredits([](size_t, int, int) { return true; },
                       [&](size_t, int peer, int channel, uint64_t tail) {
                         queueControl(
                             peer, channel,
                             FrameHeader{FrameKind::kCredit, static_cast<uint32_t>(channel), tail,
                                         0, 0, 0, options().rank, CallDescriptor{}});
                         return true;
                       });
}

bool SocketProxy::takeNotices() {
  return sendNotice([&](int peer, const Notice& notice) {
    // The notice's text stays as it is once queued (notifyFailure runs once).
    const std::string& text = notice.failure.status.message();
    OutItem item;
    item.header = FrameHeader{
        FrameKind::kNotice,
        0,
        notice.failure.collectivesDone,
        0,
        static_cast<uint32_t>(std::min<size_t>(text.size(), socketwire::kMaxNoticeBytes)),
        static_cast<uint32_t>(notice.failure.status.code()),
        notice.origin,
        CallDescriptor{}};
    item.data = text.data();
    Stream& s = streams_[peerStreams_[peer][0]];
    auto at = s.out.begin() + (s.frontDone > 0 && !s.out.empty() ? 1 : 0);
    while (at != s.out.end() && at->fifo < 0) ++at;
    s.out.insert(at, item);
  });
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
  std::vector<uint32_t>& left = piecesLeft(size_t(item.fifo));
  SendCredits& credits = sendCredits(item.fifo);
  const uint32_t nslots = options().nslots;
  --left[item.seq % nslots];
  const uint64_t before = credits.released;
  while (credits.released < credits.queued && left[credits.released % nslots] == 0) {
    ++credits.released;
  }
  if (credits.released != before) {
    fifos().view(item.fifo, true).control->tail.store(credits.released, std::memory_order_seq_cst);
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
  const uint32_t nslots = options().nslots;
  if (h.kind != FrameKind::kNotice && h.channel >= static_cast<uint32_t>(options().maxChannels)) {
    return internalError("frame for channel " + std::to_string(h.channel) + " beyond the " +
                         std::to_string(options().maxChannels) + " set up");
  }
  const size_t f = fifos().index(s.peer, static_cast<int>(h.channel));
  switch (h.kind) {
    case FrameKind::kData: {
      const uint64_t posted = recvCredits(f).posted;
      const FifoView v = fifos().view(f, false);
      const uint64_t tail = v.control->tail.load(std::memory_order_acquire);
      if (h.seq < posted || h.seq >= tail + nslots) {
        return internalError("slot " + std::to_string(h.seq) + " outside the credit window [" +
                             std::to_string(posted) + ", " + std::to_string(tail + nslots) + ")");
      }
      if (h.total > options().slotBytes || h.offset > h.total || h.bytes > h.total - h.offset) {
        return internalError("piece [" + std::to_string(h.offset) + ", +" +
                             std::to_string(h.bytes) + ") of a " + std::to_string(h.total) +
                             "-byte slot does not fit (BRAID_CHUNK_BYTES differ between ranks?)");
      }
      SlotAssembly& a = assemblies(f)[h.seq % nslots];
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
      s.payload = v.data + size_t(h.seq % nslots) * options().slotBytes + h.offset;
      s.payloadLeft = h.bytes;
      s.inPayload = true;
      return okStatus();
    }
    case FrameKind::kCredit: {
      SendCredits& credits = sendCredits(f);
      if (!credits.takeCredit(h.seq)) {
        return internalError("credit " + std::to_string(h.seq) + " outside [" +
                             std::to_string(credits.creditTail) + ", " +
                             std::to_string(credits.queued) + "]");
      }
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
    noticeArrived(s.peer, h.origin, static_cast<int32_t>(h.total), static_cast<uint32_t>(h.seq),
                  s.notice);
    return okStatus();
  }
  const size_t f = fifos().index(s.peer, static_cast<int>(h.channel));
  const uint32_t nslots = options().nslots;
  std::vector<SlotAssembly>& slots = assemblies(f);
  RecvCredits& credits = recvCredits(f);
  SlotAssembly& a = slots[h.seq % nslots];
  a.got += h.bytes;
  if (a.got != a.total) return okStatus();
  const FifoView v = fifos().view(f, false);
  bool posted = false;
  for (;;) {
    SlotAssembly& b = slots[credits.posted % nslots];
    if (b.seq != credits.posted || b.got != b.total) break;
    SlotHeader& out = v.headers[credits.posted % nslots];
    out.bytes = b.total;
    out.reserved = 0;
    out.call = b.call;
    b.seq = UINT64_MAX;
    ++credits.posted;
    posted = true;
  }
  if (posted) {
    v.control->head.store(credits.posted, std::memory_order_seq_cst);
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
    if (linkClosed(peer) > 0) return;
  }
  // The peer is gone: every stream of it goes.
  for (int id : peerStreams_[peer]) {
    Stream& t = streams_[id];
    if (t.socket.valid()) {
      ::epoll_ctl(epollFd(), EPOLL_CTL_DEL, t.socket.fd(), nullptr);
      t.socket.close();
    }
    t.readOpen = false;
    t.out.clear();
    t.frontDone = 0;
  }
  peerDown(peer);
  if (options().logger != nullptr && currentMode() == Mode::kRun) {
    BRAID_LOG(*options().logger, kInfo, kNet, "socket transport: %s: connection %s",
              options().peerNames[peer].c_str(), why.c_str());
  }
  wakeRank();
}

void SocketProxy::setWantOut(Stream& s, bool want) {
  s.wantOut = want;
  if (!s.socket.valid()) return;
  epoll_event ev{};
  ev.events = (s.readOpen ? EPOLLIN : 0u) | (want ? EPOLLOUT : 0u);
  ev.data.u64 = static_cast<uint64_t>(&s - streams_.data());
  ::epoll_ctl(epollFd(), EPOLL_CTL_MOD, s.socket.fd(), &ev);
}

void SocketProxy::protocolError(const Stream& s, const Status& status) {
  const int peer = s.peer;
  recordFailure("bad frame from " + options().peerNames[peer] + ": " + status.message());
  closeStream(streams_[peerStreams_[peer][0]], /*reset=*/true, "dropped: " + status.message());
}

bool SocketProxy::flushed() const {
  if (!sendsFlushed()) return false;
  for (const Stream& s : streams_) {
    if (s.socket.valid() && !s.out.empty()) return false;
  }
  return true;
}

bool SocketProxy::allClosed() const {
  for (int r = 0; r < options().nranks; ++r) {
    if (linkUp(r)) return false;
  }
  return true;
}

}  // namespace braid
