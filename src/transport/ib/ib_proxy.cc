#include "transport/ib/ib_proxy.h"

#include <algorithm>
#include <cmath>

namespace braid {

QpRetryLimits qpRetryLimits(double peerTimeoutSeconds) {
  QpRetryLimits limits;
  if (!(peerTimeoutSeconds > 0)) return limits;
  // A write fails after its first try and retryCount retries, each waiting the ack timeout.
  constexpr double kTickSeconds = 4.096e-6;
  constexpr int kMinExponent = 14;  // 67 ms: shorter waits trip over ordinary congestion
  constexpr int kMaxExponent = 31;
  const double perTry = peerTimeoutSeconds / (limits.retryCount + 1);
  const int fits = static_cast<int>(std::floor(std::log2(perTry / kTickSeconds)));
  limits.timeout = static_cast<uint8_t>(std::clamp(fits, kMinExponent, kMaxExponent));
  return limits;
}

}  // namespace braid

#if BRAID_HAVE_IBVERBS

#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "bootstrap/auth.h"

namespace braid {
namespace {

using Clock = std::chrono::steady_clock;

// wr_id: kind (8 bits) | peer (24) | channel (8) | work requests it completes (8).
// kPartWr: the unsignalled data write before a slot's header; it completes only on error.
enum WrKind : uint64_t { kRecvWr = 1, kDataWr = 2, kControlWr = 3, kPartWr = 4 };
uint64_t wrId(WrKind kind, int peer, int channel, int count) {
  return (uint64_t(kind) << 56) | (uint64_t(peer & 0xffffff) << 32) |
         (uint64_t(channel & 0xff) << 24) | uint64_t(count & 0xff);
}

constexpr auto kSpin = std::chrono::microseconds(10);
constexpr auto kYield = std::chrono::microseconds(60);
constexpr auto kProbeEvery = std::chrono::milliseconds(100);
constexpr int kSleepMs = 100;
constexpr int kFlushSleepMs = 10;
// After its goodbyes, how long a closing rank waits for its peers' (see run()).
constexpr auto kLinger = std::chrono::seconds(2);
constexpr uint64_t kEventTag = 1;
constexpr uint64_t kChannelTag = 2;

size_t roundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

}  // namespace

IbProxy::IbProxy(ProxyOptions options, std::unique_ptr<IbDevice> device)
    : NetworkProxy(std::move(options), "RDMA transport"),
      device_(std::move(device)),
      api_(device_->api()) {}

Result<std::unique_ptr<IbProxy>> IbProxy::create(ProxyOptions options,
                                                 const std::vector<bool>& linked,
                                                 std::unique_ptr<IbDevice> device) {
  std::unique_ptr<IbProxy> p(new IbProxy(std::move(options), std::move(device)));
  const VerbsApi& api = p->api_;
  IbDevice& dev = *p->device_;
  const int n = p->options().nranks;
  const int channels = p->options().maxChannels;
  const uint32_t nslots = p->options().nslots;
  const size_t fifos = size_t(n) * channels;

  p->peers_.resize(n);
  p->adopted_.assign(n, 0);
  p->lost_ = std::make_unique<std::atomic<bool>[]>(n);
  p->send_.resize(fifos);
  p->recv_.resize(fifos);
  // No link is up before its peer's first use.
  RETURN_IF_ERROR(p->setUpFifos(std::vector<int>(n, 0), linked));
  // Every slot may be in flight as two writes, plus credits, announcements, a notice, probes.
  p->sendDepth_ = static_cast<int>(4 * nslots * channels + channels + 16);
  p->recvDepth_ = static_cast<int>(2 * nslots * channels + channels + 16);
  if (dev.maxQpWr() > 0) {
    p->sendDepth_ = std::min(p->sendDepth_, dev.maxQpWr());
    p->recvDepth_ = std::min(p->recvDepth_, dev.maxQpWr());
  }
  p->controlStride_ = roundUp(sizeof(Announce) * channels + sizeof(WireNotice), 64);

  RETURN_IF_ERROR(p->openWakeup(kEventTag));
  p->cache_ = std::make_unique<MrCache>(api, dev.pd());
  p->channel_ = api.createCompChannel(dev.context());
  if (p->channel_ == nullptr) return systemError("ibv_create_comp_channel failed");
  const int flags = ::fcntl(p->channel_->fd, F_GETFL);
  ::fcntl(p->channel_->fd, F_SETFL, flags | O_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kChannelTag;
  ::epoll_ctl(p->epollFd(), EPOLL_CTL_ADD, p->channel_->fd, &ev);
  RETURN_IF_ERROR(p->startThread());
  return p;
}

Result<QpInfo> IbProxy::openPeer(int r) {
  if (!linked(r) || peers_[r]) {
    return internalError("RDMA transport: rank " + std::to_string(r) +
                         " opened twice or not linked");
  }
  const VerbsApi& api = api_;
  IbDevice& dev = *device_;
  auto peer = std::make_unique<Peer>();
  // Stored first: the destructor frees whatever a failure below leaves behind.
  Peer& q = *peer;
  peers_[r] = std::move(peer);
  const int cqe = sendDepth_ + recvDepth_;
  q.cq = api.createCq(dev.context(), cqe, nullptr, channel_, 0);
  if (q.cq == nullptr) {
    return systemError("ibv_create_cq of " + std::to_string(cqe) + " entries for rank " +
                       std::to_string(r) + " failed");
  }
  q.control.assign(2 * controlStride_, 0);
  q.controlMr = api.regMr(dev.pd(), q.control.data(), q.control.size(),
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (q.controlMr == nullptr) return systemError("ibv_reg_mr of a control block failed");
  ibv_qp_init_attr init{};
  init.send_cq = q.cq;
  init.recv_cq = q.cq;
  init.cap.max_send_wr = static_cast<uint32_t>(sendDepth_);
  init.cap.max_recv_wr = static_cast<uint32_t>(recvDepth_);
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.qp_type = IBV_QPT_RC;
  q.qp = api.createQp(dev.pd(), &init);
  if (q.qp == nullptr)
    return systemError("ibv_create_qp for rank " + std::to_string(r) + " failed");
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = dev.port();
  attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  if (api.modifyQp(q.qp, &attr,
                   IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0) {
    return systemError("queue pair for rank " + std::to_string(r) + ": INIT failed");
  }
  uint32_t psn = 0;
  RETURN_IF_ERROR(randomBytes(&psn, sizeof(psn)));
  q.psn = psn & 0xffffff;
  for (int i = 0; i < recvDepth_; ++i) {
    ibv_recv_wr wr{};
    wr.wr_id = wrId(kRecvWr, r, 0, 0);
    ibv_recv_wr* bad = nullptr;
    if (api.postRecv(q.qp, &wr, &bad) != 0) return systemError("ibv_post_recv failed");
  }
  return localInfo(r);
}

IbProxy::~IbProxy() {
  close(false, 0);
  for (auto& peer : peers_) {
    if (!peer) continue;
    if (peer->qp != nullptr) api_.destroyQp(peer->qp);
    if (peer->cq != nullptr) api_.destroyCq(peer->cq);
    if (peer->controlMr != nullptr) api_.deregMr(peer->controlMr);
  }
  cache_.reset();
  if (channel_ != nullptr) api_.destroyCompChannel(channel_);
  device_.reset();
  // The FIFO arena (NetworkProxy's) is unmapped after this: its registrations are gone by now.
}

char* IbProxy::controlBlock(int peer, bool inbox) const {
  return const_cast<char*>(peers_[peer]->control.data()) + (inbox ? 0 : controlStride_);
}

void IbProxy::peerConnected(int peer) {
  connected_.give(peer);
  linkOpened(peer);
  wakeProxy();
}

void IbProxy::peerLost(int peer) {
  lost_[peer].store(true, std::memory_order_release);
  wakeRank();
}

void IbProxy::takeConnected() {
  for (int peer : connected_.take()) {
    if (adopted_[peer]) continue;
    adopted_[peer] = 1;
    active_.push_back(peer);
  }
}

QpInfo IbProxy::localInfo(int peer) const {
  QpInfo info;
  const Peer& p = *peers_[peer];
  info.qpn = p.qp->qp_num;
  info.psn = p.psn;
  info.lid = device_->lid();
  info.ethernet = device_->ethernet() ? 1 : 0;
  info.mtu = static_cast<uint8_t>(device_->mtu());
  std::memcpy(info.gid, device_->gid().raw, sizeof(info.gid));
  info.controlAddr = reinterpret_cast<uint64_t>(controlBlock(peer, /*inbox=*/true));
  info.controlRkey = p.controlMr->rkey;
  info.nslots = options().nslots;
  info.slotBytes = options().slotBytes;
  info.maxChannels = static_cast<uint32_t>(options().maxChannels);
  return info;
}

Status IbProxy::connect(int peer, const QpInfo& remote) {
  const std::string who = options().peerNames[peer];
  if (remote.nslots != options().nslots || remote.slotBytes != options().slotBytes ||
      remote.maxChannels != static_cast<uint32_t>(options().maxChannels)) {
    return invalidUsage(who +
                        " has other FIFO shapes (BRAID_NSLOTS, BRAID_CHUNK_BYTES or "
                        "BRAID_NCHANNELS differ between ranks?)");
  }
  if ((remote.ethernet != 0) != device_->ethernet()) {
    return invalidUsage(who + " is on " + (remote.ethernet ? "RoCE" : "InfiniBand") +
                        ", this rank on " + (device_->ethernet() ? "RoCE" : "InfiniBand"));
  }
  Peer& p = *peers_[peer];
  p.remoteControl = remote.controlAddr;
  p.remoteControlRkey = remote.controlRkey;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = static_cast<ibv_mtu>(std::min<int>(remote.mtu, device_->mtu()));
  attr.dest_qp_num = remote.qpn;
  attr.rq_psn = remote.psn;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = 12;
  attr.ah_attr.dlid = remote.lid;
  attr.ah_attr.sl = 0;
  attr.ah_attr.src_path_bits = 0;
  attr.ah_attr.port_num = device_->port();
  if (device_->ethernet()) {
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, remote.gid, sizeof(remote.gid));
    attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(device_->gidIndex());
    attr.ah_attr.grh.hop_limit = 255;
  }
  if (api_.modifyQp(p.qp, &attr,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0) {
    return systemError("queue pair with " + who + ": RTR failed");
  }
  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_RTS;
  // A peer that stops answering fails the next write within BRAID_PEER_TIMEOUT: the completion
  // error marks its queue pair down, as a reset does a TCP stream.
  const QpRetryLimits limits = qpRetryLimits(options().peerTimeoutSeconds);
  attr.timeout = limits.timeout;
  attr.retry_cnt = limits.retryCount;
  attr.rnr_retry = 7;
  attr.sq_psn = p.psn;
  attr.max_rd_atomic = 1;
  if (api_.modifyQp(p.qp, &attr,
                    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                        IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) != 0) {
    return systemError("queue pair with " + who + ": RTS failed");
  }
  return okStatus();
}

bool IbProxy::peerAlive(int peer) {
  if (!linked(peer)) return true;
  if (lost_[peer].load(std::memory_order_acquire)) return false;
  if (!NetworkProxy::peerAlive(peer)) return false;
  // Not connected yet: nothing to probe (a peer gone before its first use fails the exchange).
  if (!linkUp(peer, std::memory_order_acquire)) return true;
  // Only a write notices that a peer's queue pair is gone; ask the proxy for one.
  Peer& p = *peers_[peer];
  if (!p.probe.exchange(true)) {
    probePending_.store(true, std::memory_order_release);
    wakeProxy();
  }
  return true;
}

// ---- The proxy thread -----------------------------------------------------------------------

void IbProxy::run() {
  epoll_event events[4];
  bool idle = false;
  bool flushing = false;
  bool lingering = false;
  Clock::time_point idleSince;
  Clock::time_point flushEnd;
  Clock::time_point lingerEnd;
  for (;;) {
    const Mode mode = currentMode(std::memory_order_acquire);
    if (mode == Mode::kStop) break;
    takeConnected();
    bool moved = refreshOpened();
    if (mode == Mode::kFlush) {
      const auto now = Clock::now();
      if (!flushing) {
        flushing = true;
        flushEnd = now + std::chrono::milliseconds(static_cast<int64_t>(flushSeconds() * 1000));
      }
      // Everything posted is in the peers' memory: say goodbye, so that they stop writing here,
      // and wait for theirs before the queue pairs go (a write to a destroyed one fails).
      if (!lingering && (flushed() || now > flushEnd)) {
        sayGoodbye();
        lingering = true;
        lingerEnd = now + kLinger;
      }
      if (lingering && (allGone() || now > lingerEnd)) break;
    }
    if (!lingering) {
      moved |= scanRecvs();
      moved |= scanSends();
      moved |= sendNotices();
      moved |= sendProbes();
    }
    moved |= pollCompletions();
    int timeout = 0;
    bool sleeping = false;
    if (moved) {
      idle = false;
      continue;
    }
    const auto now = Clock::now();
    if (!idle) {
      idle = true;
      idleSince = now;
      continue;
    }
    // Armed work of a kernel (NetworkProxy::arm): it cannot ring, so keep polling.
    if (now - idleSince <= kYield || armedWorkOutstanding()) {
      if (now - idleSince > kSpin) sched_yield();
      continue;
    }
    // Sleep: raise `sleeping` and arm the completion queue, then look once more (fifo.h).
    announceSleep(waker());
    sleeping = true;
    for (int peer : active_) api_.reqNotifyCq(peers_[peer]->cq, 0);
    if ((!lingering && (scanRecvs() | scanSends() | sendNotices() | sendProbes())) |
        pollCompletions()) {
      waker()->sleeping.store(0, std::memory_order_relaxed);
      idle = false;
      continue;
    }
    timeout = mode == Mode::kRun ? kSleepMs : kFlushSleepMs;
    const int n = ::epoll_wait(epollFd(), events, 4, timeout);
    if (sleeping) waker()->sleeping.store(0, std::memory_order_relaxed);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 == kEventTag) {
        uint64_t v = 0;
        (void)!::read(eventFd(), &v, sizeof(v));
      } else if (channel_ != nullptr) {
        ibv_cq* cq = nullptr;
        void* context = nullptr;
        while (api_.getCqEvent(channel_, &cq, &context) == 0) api_.ackCqEvents(cq, 1);
      }
    }
    idle = false;
  }
}

bool IbProxy::refreshOpened() {
  if (!fifos().refreshOpened()) return false;
  for (int f : fifos().openedSends()) {
    SendState& st = send_[f];
    if (st.registered) continue;
    // The rank posts into this FIFO: register it so that the HCA can read it.
    const FifoView v = fifos().view(f, true);
    Result<ibv_mr*> mr = cache_->acquire(v.control, fifos().fifoBytes());
    if (!mr.ok()) {
      fail(mr.status().withContext("registering a send FIFO"));
      continue;
    }
    fifoMrs_.push_back(mr.value());
    st.lkey = mr.value()->lkey;
    st.registered = true;
  }
  return true;
}

Status IbProxy::postWrite(int peer, uint64_t id, ibv_sge* sge, uint64_t remote, uint32_t rkey,
                          std::optional<uint32_t> imm) {
  Peer& p = *peers_[peer];
  ibv_send_wr wr{};
  wr.wr_id = id;
  wr.sg_list = sge;
  wr.num_sge = sge != nullptr ? 1 : 0;
  wr.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (imm) wr.imm_data = htonl(*imm);
  wr.wr.rdma.remote_addr = remote;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  if (api_.postSend(p.qp, &wr, &bad) != 0) return systemError("ibv_post_send failed");
  ++p.outstanding;
  return okStatus();
}

bool IbProxy::scanSends() {
  return sendPosted(
      [this](size_t f, int peer, int) {
        return adopted_[peer] && send_[f].registered && send_[f].announced;
      },
      [this](size_t f, int peer, int channel, const FifoView& v, uint64_t seq) {
        return writeSlot(f, peer, channel, v, seq);
      });
}

bool IbProxy::writeSlot(size_t f, int peer, int channel, const FifoView& v, uint64_t seq) {
  const uint32_t slotBytes = options().slotBytes;
  const size_t metaBytes = fifos().metaBytes();
  Peer& p = *peers_[peer];
  if (p.outstanding + 2 > sendDepth_) return false;
  const SendState& st = send_[f];
  const uint32_t index = static_cast<uint32_t>(seq % options().nslots);
  const uint32_t bytes = std::min(v.headers[index].bytes, slotBytes);
  // The data, then the header with the immediate that tells the receiver: RC delivers them
  // in order, so the slot is whole when the receiver sees the immediate.
  ibv_sge data{reinterpret_cast<uint64_t>(v.data + size_t(index) * slotBytes), bytes, st.lkey};
  ibv_sge header{reinterpret_cast<uint64_t>(&v.headers[index]),
                 static_cast<uint32_t>(sizeof(SlotHeader)), st.lkey};
  ibv_send_wr w[2]{};
  w[0].wr_id = wrId(kPartWr, peer, channel, 0);
  w[0].sg_list = &data;
  w[0].num_sge = 1;
  w[0].opcode = IBV_WR_RDMA_WRITE;
  w[0].wr.rdma.remote_addr = st.remoteAddr + metaBytes + uint64_t(index) * slotBytes;
  w[0].wr.rdma.rkey = st.rkey;
  w[0].next = &w[1];
  const int count = bytes > 0 ? 2 : 1;
  w[1].wr_id = wrId(kDataWr, peer, channel, count);
  w[1].sg_list = &header;
  w[1].num_sge = 1;
  w[1].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  w[1].send_flags = IBV_SEND_SIGNALED;
  w[1].imm_data = htonl(packImm(ImmKind::kData, static_cast<uint32_t>(channel), 0));
  w[1].wr.rdma.remote_addr =
      st.remoteAddr + sizeof(FifoControl) + uint64_t(index) * sizeof(SlotHeader);
  w[1].wr.rdma.rkey = st.rkey;
  ibv_send_wr* bad = nullptr;
  if (api_.postSend(p.qp, bytes > 0 ? &w[0] : &w[1], &bad) != 0) {
    peerGone(peer, "ibv_post_send failed");
    return false;
  }
  p.outstanding += count;
  return true;
}

bool IbProxy::scanRecvs() {
  bool announced = false;
  const bool credited = returnCredits(
      [&](size_t f, int peer, int channel) {
        if (!adopted_[peer] || peers_[peer]->outstanding >= sendDepth_) return false;
        if (recv_[f].announced) return true;
        // The sender learns where the FIFO is before any credit: only then may it write.
        announced |= announce(f, peer, channel);
        return false;
      },
      [&](size_t, int peer, int channel, uint64_t tail) {
        Peer& p = *peers_[peer];
        Status s = postWrite(peer, wrId(kControlWr, peer, channel, 1), nullptr, p.remoteControl,
                             p.remoteControlRkey,
                             packImm(ImmKind::kCredit, static_cast<uint32_t>(channel),
                                     static_cast<uint32_t>(tail & kImmValueMask)));
        if (!s.ok()) {
          peerGone(peer, s.message());
          return false;
        }
        return true;
      });
  return announced || credited;
}

bool IbProxy::announce(size_t fifo, int peer, int channel) {
  Peer& p = *peers_[peer];
  const FifoView v = fifos().view(fifo, false);
  // Register the FIFO and tell the sender where it is.
  Result<ibv_mr*> mr = cache_->acquire(v.control, fifos().fifoBytes());
  if (!mr.ok()) {
    fail(mr.status().withContext("registering a receive FIFO"));
    return false;
  }
  fifoMrs_.push_back(mr.value());
  auto* out = reinterpret_cast<Announce*>(controlBlock(peer, /*inbox=*/false)) + channel;
  out->addr = reinterpret_cast<uint64_t>(v.control);
  out->rkey = mr.value()->rkey;
  out->valid = 1;
  ibv_sge sge{reinterpret_cast<uint64_t>(out), static_cast<uint32_t>(sizeof(Announce)),
              p.controlMr->lkey};
  Status s = postWrite(peer, wrId(kControlWr, peer, channel, 1), &sge,
                       p.remoteControl + uint64_t(channel) * sizeof(Announce), p.remoteControlRkey,
                       packImm(ImmKind::kAnnounce, static_cast<uint32_t>(channel), 0));
  if (!s.ok()) {
    peerGone(peer, s.message());
    return false;
  }
  recv_[fifo].announced = true;
  return true;
}

bool IbProxy::sendNotices() {
  const size_t noticeOffset = sizeof(Announce) * options().maxChannels;
  return sendNotice([&](int r, const Notice& notice) {
    if (!adopted_[r]) return;
    Peer& p = *peers_[r];
    const std::string& message = notice.failure.status.message();
    auto* out = reinterpret_cast<WireNotice*>(controlBlock(r, false) + noticeOffset);
    *out = WireNotice{};
    out->origin = notice.origin;
    out->code = notice.failure.status.code();
    out->collectivesDone = notice.failure.collectivesDone;
    out->bytes = static_cast<uint32_t>(std::min(message.size(), sizeof(out->text)));
    std::memcpy(out->text, message.data(), out->bytes);
    ibv_sge sge{reinterpret_cast<uint64_t>(out), static_cast<uint32_t>(sizeof(WireNotice)),
                p.controlMr->lkey};
    (void)postWrite(r, wrId(kControlWr, r, 0, 1), &sge, p.remoteControl + noticeOffset,
                    p.remoteControlRkey,
                    packImm(ImmKind::kNotice, 0, static_cast<uint32_t>(out->code)));
  });
}

bool IbProxy::sendProbes() {
  if (!probePending_.load(std::memory_order_acquire)) return false;
  probePending_.store(false);
  const auto now = Clock::now();
  bool moved = false;
  for (int r = 0; r < options().nranks; ++r) {
    if (!usable(r)) {
      if (linkUp(r)) probePending_.store(true);  // taken in at the next turn: probe it then
      continue;
    }
    Peer& p = *peers_[r];
    if (!p.probe.load()) continue;
    if (now - p.lastProbe < kProbeEvery || p.outstanding >= sendDepth_) {
      probePending_.store(true);  // later
      continue;
    }
    p.probe.store(false);
    p.lastProbe = now;
    // A zero-length write: no receive is consumed; it fails only if the peer's queue pair is gone.
    if (!postWrite(r, wrId(kControlWr, r, 0, 1), nullptr, p.remoteControl, p.remoteControlRkey,
                   std::nullopt)
             .ok()) {
      peerGone(r, "ibv_post_send failed");
    }
    moved = true;
  }
  return moved;
}

void IbProxy::sayGoodbye() {
  for (int r = 0; r < options().nranks; ++r) {
    if (!usable(r)) continue;
    Peer& p = *peers_[r];
    if (p.outstanding >= sendDepth_ ||
        !postWrite(r, wrId(kControlWr, r, 0, 1), nullptr, p.remoteControl, p.remoteControlRkey,
                   packImm(ImmKind::kBye, 0, 0))
             .ok()) {
      peerGone(r, "no room for a goodbye");
    }
  }
}

bool IbProxy::allGone() const {
  for (int r = 0; r < options().nranks; ++r) {
    // A peer that has said goodbye is gone; our own goodbye must have left too.
    if (!linked(r)) continue;
    if (linkUp(r) || (adopted_[r] && peers_[r]->outstanding > 0)) return false;
  }
  return true;
}

bool IbProxy::pollCompletions() {
  bool moved = false;
  ibv_wc wc[32];
  for (int peer : active_) {
    for (;;) {
      const int n = api_.pollCq(peers_[peer]->cq, 32, wc);
      if (n < 0) {
        fail(systemError("ibv_poll_cq failed"));
        return moved;
      }
      for (int i = 0; i < n; ++i) completion(wc[i]);
      moved |= n > 0;
      if (n < 32) break;
    }
  }
  return moved;
}

void IbProxy::completion(const ibv_wc& wc) {
  const auto kind = static_cast<WrKind>(wc.wr_id >> 56);
  const int peer = static_cast<int>((wc.wr_id >> 32) & 0xffffff);
  const int channel = static_cast<int>((wc.wr_id >> 24) & 0xff);
  const int count = static_cast<int>(wc.wr_id & 0xff);
  if (!linked(peer) || !adopted_[peer])
    return fail(internalError("completion for unknown rank " + std::to_string(peer)));
  Peer& p = *peers_[peer];
  if (kind != kRecvWr) p.outstanding -= count;
  if (wc.status != IBV_WC_SUCCESS) {
    return peerGone(peer, std::string(kind == kRecvWr ? "receive" : "RDMA write") +
                              " completed with status " + std::to_string(wc.status));
  }
  if (kind == kRecvWr) {
    if (!(wc.wc_flags & IBV_WC_WITH_IMM)) {
      return fail(
          internalError("a receive without immediate data from " + options().peerNames[peer]));
    }
    received(peer, ntohl(wc.imm_data));
    ibv_recv_wr wr{};
    wr.wr_id = wc.wr_id;
    ibv_recv_wr* bad = nullptr;
    if (linkUp(peer) && api_.postRecv(p.qp, &wr, &bad) != 0) peerGone(peer, "ibv_post_recv failed");
    return;
  }
  if (kind == kDataWr) {
    const size_t f = fifos().index(peer, channel);
    SendCredits& credits = sendCredits(f);
    ++credits.released;  // completions of one queue pair come in order
    fifos().view(f, true).control->tail.store(credits.released, std::memory_order_seq_cst);
    wakeRank();
  }
}

void IbProxy::received(int peer, uint32_t imm) {
  const auto kind = static_cast<ImmKind>(imm >> 29);
  const auto channel = static_cast<int>((imm >> kImmValueBits) & 0x7f);
  const uint32_t value = imm & kImmValueMask;
  const std::string& who = options().peerNames[peer];
  if (channel >= options().maxChannels) {
    return fail(internalError(who + " wrote to channel " + std::to_string(channel)));
  }
  const size_t f = fifos().index(peer, channel);
  switch (kind) {
    case ImmKind::kData: {
      RecvCredits& credits = recvCredits(f);
      const FifoView v = fifos().view(f, false);
      if (credits.posted >= v.control->tail.load(std::memory_order_acquire) + options().nslots) {
        return fail(
            internalError(who + " wrote beyond its credit on channel " + std::to_string(channel)));
      }
      ++credits.posted;
      v.control->head.store(credits.posted, std::memory_order_seq_cst);
      wakeRank();
      return;
    }
    case ImmKind::kCredit: {
      // The immediate carries the tail's low bits: the credit is the nearest tail at or after
      // the last one with them.
      SendCredits& credits = sendCredits(f);
      uint64_t tail = (credits.creditTail & ~uint64_t(kImmValueMask)) | value;
      if (tail < credits.creditTail) tail += uint64_t(kImmValueMask) + 1;
      if (!credits.takeCredit(tail)) {
        return fail(internalError(who + " returned credit it was never sent"));
      }
      return;
    }
    case ImmKind::kAnnounce: {
      Announce a;
      std::memcpy(&a, reinterpret_cast<Announce*>(controlBlock(peer, true)) + channel, sizeof(a));
      if (a.valid != 1) return fail(internalError(who + " announced an invalid FIFO"));
      SendState& st = send_[f];
      st.remoteAddr = a.addr;
      st.rkey = a.rkey;
      st.announced = true;
      return;
    }
    case ImmKind::kBye: return peerGone(peer, "closed");
    case ImmKind::kNotice: {
      WireNotice n;
      std::memcpy(&n, controlBlock(peer, true) + sizeof(Announce) * options().maxChannels,
                  sizeof(n));
      noticeArrived(peer, n.origin, n.code, n.collectivesDone,
                    std::string_view(n.text, std::min<uint32_t>(n.bytes, sizeof(n.text))));
      return;
    }
  }
  fail(internalError(who + " sent an unknown immediate " + std::to_string(imm)));
}

void IbProxy::peerGone(int peer, const std::string& why) {
  if (!peerDown(peer)) return;
  if (options().logger != nullptr && currentMode() == Mode::kRun) {
    BRAID_LOG(*options().logger, kInfo, kNet, "RDMA transport: %s: %s",
              options().peerNames[peer].c_str(), why.c_str());
  }
  wakeRank();
}

void IbProxy::fail(const Status& status) {
  recordFailure(status.message());
  wakeRank();
}

bool IbProxy::flushed() const {
  if (!sendsFlushed()) return false;
  for (int r = 0; r < options().nranks; ++r) {
    if (usable(r) && peers_[r]->outstanding > 0) return false;
  }
  return true;
}

}  // namespace braid

#endif  // BRAID_HAVE_IBVERBS
