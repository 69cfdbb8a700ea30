#include "transport/shm/shm_transport.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "base/config.h"
#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "transport/shm/shared_buffers.h"

namespace braid {

constexpr uint64_t kInboxMagic = 0x6272616964736d31ull;  // "braidsm1"
constexpr size_t kHeaderBytes = 4096;  // the header's page; the readable map follows it
constexpr uint32_t kLines =
    64;  // messages in flight per FIFO (BRAID_FIFO_BYTES bounds their bytes)
constexpr size_t kFifoMetaBytes = 8192;  // FifoControl + SlotLine[kLines]
// A payload area per line: calls up to kSmallBytes per message pipeline kLines deep.
constexpr size_t kSmallAreaBytes = size_t{kLines} * kSmallBytes;
constexpr size_t kMessageBytes = 256;

struct FailureNotice {
  std::atomic<int32_t> state{0};  // 0 none, 1 being written, 2 readable
  int32_t rank = -1;
  int32_t code = 0;
  uint32_t collectivesDone = 0;
  char message[kMessageBytes] = {};
};

struct InboxHeader {
  uint64_t magic;
  int32_t rank;
  int32_t nranks;
  int32_t maxChannels;
  uint32_t slotBytes;
  uint64_t ringBytes;
  uint64_t fifoStride;
  cpu_set_t cpus;  ///< the CPUs the rank may run on (its creating thread's affinity)
  Waker waker;
  alignas(kCacheLine) FailureNotice failure;
};
static_assert(sizeof(InboxHeader) <= kHeaderBytes);
static_assert(sizeof(FifoControl) + kLines * sizeof(SlotLine) <= kFifoMetaBytes);

namespace {

size_t roundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

}  // namespace

ShmTransport::~ShmTransport() {
  if (probeFd_ >= 0) close(probeFd_);
}

Result<std::unique_ptr<ShmTransport>> ShmTransport::makeInbox(const TransportContext& ctx,
                                                              PeerInfo& self) {
  std::unique_ptr<ShmTransport> t(new ShmTransport());
  t->rank_ = ctx.rank;
  t->nranks_ = ctx.nranks;
  t->maxChannels_ = ctx.maxChannels;
  t->slotBytes_ = static_cast<uint32_t>(roundUp(ctx.config->slotBytes, 64));
  t->ringBytes_ = shmRingBytes(*ctx.config);
  t->fifoStride_ = kFifoMetaBytes + kSmallAreaBytes + roundUp(t->ringBytes_, 4096);
  // After the header: one bit per rank, set where this rank can map that rank's shared buffers.
  t->headerBytes_ = kHeaderBytes + roundUp((size_t(ctx.nranks) + 7) / 8, 4096);
  const size_t bytes =
      t->headerBytes_ + size_t(ctx.nranks) * size_t(ctx.maxChannels) * t->fifoStride_;

  removeStaleSegments();
  const std::string myName = makeSegmentName();
  if (myName.size() >= sizeof(self.shmInbox)) {
    return internalError("shm transport: inbox name " + myName + " too long");
  }
  ASSIGN_OR_RETURN(ShmSegment mine, ShmSegment::create(myName, bytes));
  auto* h = new (mine.data()) InboxHeader();
  h->rank = ctx.rank;
  h->nranks = ctx.nranks;
  h->maxChannels = ctx.maxChannels;
  h->slotBytes = t->slotBytes_;
  h->ringBytes = t->ringBytes_;
  h->fifoStride = t->fifoStride_;
  if (sched_getaffinity(0, sizeof(h->cpus), &h->cpus) != 0) CPU_ZERO(&h->cpus);
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kInboxMagic;
  t->inboxes_.resize(ctx.nranks);
  t->inboxes_[ctx.rank] = std::move(mine);
  std::snprintf(self.shmInbox, sizeof(self.shmInbox), "%s", myName.c_str());
  // Open until every rank has tried it (connect's barrier).
  t->probeFd_ = openProbeFd();
  self.shmProbeFd = t->probeFd_;
  return t;
}

Status ShmTransport::connect(const TransportContext& ctx, const std::function<Status()>& barrier) {
  const std::vector<PeerInfo>& peers = *ctx.peers;
  const PeerInfo& self = peers[ctx.rank];
  const size_t bytes = inboxes_[ctx.rank].size();
  pids_.assign(ctx.nranks, 0);
  watches_.resize(ctx.nranks);
  reserved_.assign(ctx.nranks, std::vector<bool>(ctx.maxChannels, false));
  Status openStatus;
  for (int r = 0; r < ctx.nranks; ++r) {
    if (r == ctx.rank) continue;
    if (peers[r].hostHash != self.hostHash) continue;
    const std::string name(peers[r].shmInbox, strnlen(peers[r].shmInbox, sizeof(self.shmInbox)));
    Result<ShmSegment> seg = ShmSegment::open(name, bytes);
    if (!seg.ok()) {
      // Same host name but another /dev/shm (containers): leave the peer to other transports.
      BRAID_LOG(*ctx.logger, kInfo, kShm, "cannot map rank %d's inbox: %s", r,
                seg.status().message().c_str());
      continue;
    }
    const auto* ph = reinterpret_cast<const InboxHeader*>(seg->data());
    if (ph->magic != kInboxMagic || ph->rank != r || ph->nranks != ctx.nranks ||
        ph->fifoStride != fifoStride_ || ph->maxChannels != ctx.maxChannels ||
        ph->slotBytes != slotBytes_ || ph->ringBytes != ringBytes_) {
      openStatus = invalidUsage("rank " + std::to_string(r) +
                                "'s shared-memory inbox has another layout (BRAID_FIFO_BYTES or "
                                "BRAID_CHUNK_BYTES differ between ranks?)");
    }
    if (peers[r].pidNamespace == self.pidNamespace) {
      pids_[r] = peers[r].pid;
      // A pidfd opened now, while the peer is known to run, pins that very process.
      if (peers[r].pid != self.pid) watches_[r] = ProcessWatch(peers[r].pid);
    }
    inboxes_[r] = std::move(seg).value();
  }
  // The host's ranks and the CPUs they may use between them: with more ranks than CPUs a
  // waiting rank yields at once (progress.cc).
  int hostRanks = 0;
  cpu_set_t hostCpus;
  CPU_ZERO(&hostCpus);
  for (size_t r = 0; r < inboxes_.size(); ++r) {
    if (inboxes_[r].data() == nullptr) continue;
    ++hostRanks;
    CPU_OR(&hostCpus, &hostCpus, &header(static_cast<int>(r))->cpus);
  }
  Waker& waker = header(ctx.rank)->waker;
  waker.hostRanks = static_cast<uint32_t>(hostRanks);
  waker.hostCpus = static_cast<uint32_t>(CPU_COUNT(&hostCpus));
  // Which peers' shared buffers this rank can map, as bits in its own inbox that its host's ranks
  // read after the barrier (after which everyone has mapped everything it needs, so the names can
  // go). A sender lends only what its receiver reads; nothing here grows with n^2.
  uint8_t* myReadable = readableMap(ctx.rank);
  for (int r = 0; r < ctx.nranks; ++r) {
    if (r == ctx.rank || inboxes_[r].data() == nullptr) continue;
    if (pids_[r] != 0 && canOpenPeerFd(pids_[r], peers[r].shmProbeFd)) {
      myReadable[r / 8] |= uint8_t(1u << (r % 8));
    }
  }
  std::atomic_thread_fence(std::memory_order_release);
  Status gathered = barrier();
  std::atomic_thread_fence(std::memory_order_acquire);
  inboxes_[ctx.rank].unlink();
  if (probeFd_ >= 0) close(probeFd_);
  probeFd_ = -1;
  RETURN_IF_ERROR(gathered);
  RETURN_IF_ERROR(openStatus);
  setUpLending();
  return okStatus();
}

uint8_t* ShmTransport::readableMap(int rank) const {
  return reinterpret_cast<uint8_t*>(inboxes_[rank].data()) + kHeaderBytes;
}

bool ShmTransport::canRead(int reader, int owner) const {
  return (readableMap(reader)[owner / 8] >> (owner % 8)) & 1u;
}

void ShmTransport::setUpLending() {
  lending_.assign(nranks_, Lending::kNone);
  readers_.resize(nranks_);
  for (int r = 0; r < nranks_; ++r) {
    if (!canConnect(r)) continue;
    const bool sameProcess = pids_[r] == getpid();
    if (sameProcess) {
      lending_[r] = Lending::kSameProcess;
    } else if (canRead(r, rank_)) {
      lending_[r] = Lending::kSharedBuffers;
    }
    if (sameProcess || canRead(rank_, r)) {
      readers_[r] = std::make_unique<PeerBufferReader>(pids_[r], sameProcess);
    }
  }
}

InboxHeader* ShmTransport::header(int rank) const {
  return reinterpret_cast<InboxHeader*>(inboxes_[rank].data());
}

bool ShmTransport::canConnect(int peer) const {
  return peer >= 0 && peer < nranks_ && peer != rank_ && inboxes_[peer].data() != nullptr;
}

FifoView ShmTransport::fifo(int receiver, int sender, int channel) const {
  char* base = inboxes_[receiver].data() + headerBytes_ +
               (size_t(sender) * maxChannels_ + channel) * fifoStride_;
  FifoView v;
  v.control = reinterpret_cast<FifoControl*>(base);
  // Both ends are this process's and the peer's connectors: publish through the slot lines.
  v.lines = reinterpret_cast<SlotLine*>(base + sizeof(FifoControl));
  v.nlines = kLines;
  v.small = base + kFifoMetaBytes;
  v.data = base + kFifoMetaBytes + kSmallAreaBytes;
  v.nslots = static_cast<uint32_t>(ringBytes_ / slotBytes_);  // unused with lines; kept sensible
  v.slotBytes = slotBytes_;
  v.dataBytes = ringBytes_;
  return v;
}

Status ShmTransport::reserveFifo(int receiver, int sender, int channel) {
  const int peer = receiver == rank_ ? sender : receiver;
  const size_t offset = headerBytes_ + (size_t(sender) * maxChannels_ + channel) * fifoStride_;
  return inboxes_[receiver]
      // Small messages (the lines and their areas) are mapped now: first touches of those pages
      // cost 5-10 us each under some hypervisors. The ring for larger ones maps as it is used, so
      // a peer that only ever exchanges small messages costs 264 KiB, not the whole FIFO.
      .reserve(offset, fifoStride_, kFifoMetaBytes + kSmallAreaBytes)
      .withContext("FIFO with rank " + std::to_string(peer));
}

Result<SendConnector> ShmTransport::sendConnector(int peer, int channel) {
  if (!canConnect(peer) || channel < 0 || channel >= maxChannels_) {
    return internalError("no shared-memory FIFO to rank " + std::to_string(peer) + " channel " +
                         std::to_string(channel));
  }
  RETURN_IF_ERROR(reserveFifo(peer, rank_, channel));
  SendConnector connector(fifo(peer, rank_, channel), &header(peer)->waker);
  connector.setLending(lending_[peer]);
  return connector;
}

Result<RecvConnector> ShmTransport::recvConnector(int peer, int channel) {
  if (!canConnect(peer) || channel < 0 || channel >= maxChannels_) {
    return internalError("no shared-memory FIFO from rank " + std::to_string(peer) + " channel " +
                         std::to_string(channel));
  }
  RETURN_IF_ERROR(reserveFifo(rank_, peer, channel));
  return RecvConnector(fifo(rank_, peer, channel), &header(peer)->waker, readers_[peer].get());
}

Waker* ShmTransport::waker() const { return &header(rank_)->waker; }

void ShmTransport::notifyFailure(int failedRank, const PeerFailure& failure) {
  FailureNotice& notice = header(rank_)->failure;
  int32_t expected = 0;
  if (notice.state.compare_exchange_strong(expected, 1)) {
    notice.rank = failedRank;
    notice.code = failure.status.code();
    notice.collectivesDone = failure.collectivesDone;
    std::snprintf(notice.message, sizeof(notice.message), "%s", failure.status.message().c_str());
    notice.state.store(2, std::memory_order_release);
  }
  for (int r = 0; r < nranks_; ++r) {
    if (r == rank_ || inboxes_[r].data() == nullptr) continue;
    header(r)->waker.sleeping.store(1);  // force the wake below even if it is awake right now
    wakeIfSleeping(&header(r)->waker);
  }
}

std::optional<PeerFailure> ShmTransport::peerFailure(int peer) const {
  if (peer == kAnyPeer) {
    std::optional<PeerFailure> found;
    for (int r = 0; r < nranks_; ++r) {
      std::optional<PeerFailure> f = r != rank_ ? peerFailure(r) : std::nullopt;
      if (f && (!found || f->collectivesDone < found->collectivesDone)) found = f;
    }
    return found;
  }
  if (peer < 0 || peer >= nranks_ || peer == rank_ || inboxes_[peer].data() == nullptr) {
    return std::nullopt;
  }
  const FailureNotice& notice = header(peer)->failure;
  if (notice.state.load(std::memory_order_acquire) != 2) return std::nullopt;
  // Written by another process: never trust its code or read past the message buffer.
  PeerFailure f;
  f.status =
      Status(notice.code > braidSuccess && notice.code <= braidTimeout
                 ? static_cast<braidResult_t>(notice.code)
                 : braidRemoteError,
             "rank " + std::to_string(peer) + " failed: " +
                 std::string(notice.message, strnlen(notice.message, sizeof(notice.message))));
  f.collectivesDone = notice.collectivesDone;
  return f;
}

bool ShmTransport::peerAlive(int peer) const {
  if (peer < 0 || peer >= nranks_) return true;
  return !watches_[peer].exited();
}

}  // namespace braid
