// What the network transports' proxies (socket/socket_proxy.h, ib/ib_proxy.h) share. Each runs
// one thread per communicator that moves the slots of its FIFOs (proxy_fifos.h) between this
// rank's memory and the network, and sleeps in epoll on an eventfd that the rank rings through
// waker() while the proxy sleeps. This base holds the rest of what the two have in common:
//
//   - the options both are built from (proxyOptions());
//   - the thread's start, and its stop with or without a flush (close());
//   - which peers are still up: a count of the links (streams, a queue pair) carrying each;
//   - credits (slot_credits.h) and their loops: the send loop hands the proxy each slot the rank
//     posted that the receiver has room for, the credit loop each tail the rank freed slots up to;
//   - failures: the proxy's own (failure()), the notices peers sent (peerFailure()), and the one
//     notice this rank sends (notifyFailure(), then the notice loop).
//
// A proxy says how a slot, a credit or a notice travels; the loops here say which and when.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/status.h"
#include "fifo/fifo.h"
#include "kernels/executor_protocol.h"
#include "transport/peer_failures.h"
#include "transport/proxy_fifos.h"
#include "transport/slot_credits.h"
#include "transport/transport.h"

namespace braid {

/// What a network proxy is built from.
struct ProxyOptions {
  int rank = 0;
  int nranks = 1;
  int maxChannels = 1;
  uint32_t nslots = 2;
  uint32_t slotBytes = 0;
  Waker* rankWaker = nullptr;
  const Logger* logger = nullptr;
  std::vector<std::string> peerNames;  ///< "rank 3 (host)" per rank, for messages
  double peerTimeoutSeconds = 0;       ///< BRAID_PEER_TIMEOUT (0: never)
};

/// The options of ctx's proxy: FIFO shapes from ctx.config, peer names from ctx.peers.
ProxyOptions proxyOptions(const TransportContext& ctx);

/// A file descriptor closed with the object (a proxy's epoll instance and eventfd).
class OwnedFd {
 public:
  OwnedFd() = default;
  explicit OwnedFd(int fd) : fd_(fd) {}
  ~OwnedFd();
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  /// Takes `fd`, closing the one held before.
  void reset(int fd);

 private:
  int fd_ = -1;
};

class NetworkProxy {
 public:
  /// A subclass's destructor calls close() first: the thread runs the subclass's code.
  virtual ~NetworkProxy();
  NetworkProxy(const NetworkProxy&) = delete;
  NetworkProxy& operator=(const NetworkProxy&) = delete;

  /// Stops the thread. flush: first puts every posted slot on the wire and waits for the peers,
  /// for at most flushSeconds; never after a failure of this proxy or a peer's notice, since
  /// nobody waits for the rest then. Idempotent.
  void close(bool flush, double flushSeconds);

  bool linked(int peer) const { return fifos_.linked(peer); }
  /// The FIFOs of a linked peer's channel (the caller checked linked() and the channel), opened:
  /// the proxy moves their slots from then on.
  FifoView sendFifo(int peer, int channel);
  FifoView recvFifo(int peer, int channel);
  /// Where such a FIFO lies, without opening it.
  FifoView fifoView(int peer, int channel, bool send) const {
    return fifos_.view(fifos_.index(peer, channel), send);
  }
  /// Rung by the rank's post() and release().
  Waker* waker() { return &waker_; }
  /// False once `peer` is known to be gone (every link of it closed).
  virtual bool peerAlive(int peer);
  /// The proxy's own failure (a malformed frame, a completion error), if any.
  std::optional<Status> failure() const;
  /// The failure notice `peer` sent, if any (kAnyPeer: the one of the peer that got least far).
  std::optional<PeerFailure> peerFailure(int peer) const { return notices_.get(peer); }
  /// Sends every linked peer still up a notice that `failedRank` failed (the first call only).
  void notifyFailure(int failedRank, const PeerFailure& failure);

  // Arming, for FIFOs whose other end is a GPU kernel (the device path's staged FIFOs,
  // staged_path.h): a kernel cannot ring waker(), so the proxy polls while work it was told of
  // is outstanding, and sleeps as usual otherwise.

  /// Adds what the device path will do: per (peer, channel), post `posts` more slots into the
  /// send FIFO and free `releases` more from the receive FIFO. Opens those FIFOs and wakes the
  /// proxy; entries of peers not linked are skipped.
  void arm(const std::vector<gpu::FifoSlotCount>& counts);
  /// Forgets armed work not done (the kernels were stopped); later arming is ignored.
  void disarm();
  /// Bytes of one FIFO in memory, from its control block (what mapping a FIFO covers).
  size_t fifoBytes() const { return fifos_.fifoBytes(); }

 protected:
  enum class Mode : int { kRun, kFlush, kStop };
  /// The notice this rank sends its peers.
  struct Notice {
    int origin = -1;  ///< the rank that failed
    PeerFailure failure;
  };

  /// `label` ("socket transport") starts messages and errors.
  NetworkProxy(ProxyOptions options, std::string_view label);

  // Set-up, before the thread starts.

  /// Lays out the FIFOs and their credit counts. links[peer]: the links (streams, a queue pair)
  /// that will carry its traffic, 0 for a peer not linked.
  Status setUpFifos(const std::vector<int>& links);
  /// The same for a proxy whose links come later (linkOpened()): FIFOs for the peers with
  /// linked[peer], none of them up yet, and none counted gone before its first link.
  Status setUpFifos(const std::vector<int>& links, const std::vector<bool>& linked);
  /// Creates the eventfd behind waker() and the epoll instance, which reports it as `eventTag`.
  Status openWakeup(uint64_t eventTag);
  /// Starts the thread in run().
  Status startThread();

  // The thread.

  virtual void run() = 0;
  /// After the thread stopped, in close().
  virtual void stopped() {}
  /// A receive FIFO was opened for the first time (on the rank's thread).
  virtual void recvOpened() {}

  const ProxyOptions& options() const { return options_; }
  const ProxyFifos& fifos() const { return fifos_; }
  ProxyFifos& fifos() { return fifos_; }
  SendCredits& sendCredits(size_t fifo) { return sendCredits_[fifo]; }
  const SendCredits& sendCredits(size_t fifo) const { return sendCredits_[fifo]; }
  RecvCredits& recvCredits(size_t fifo) { return recvCredits_[fifo]; }
  Mode currentMode(std::memory_order order = std::memory_order_seq_cst) const {
    return mode_.load(order);
  }
  /// close()'s flush limit, once the mode is kFlush.
  double flushSeconds() const { return flushSeconds_; }
  int eventFd() const { return eventFd_.fd(); }
  int epollFd() const { return epoll_.fd(); }
  /// Wakes the rank (if it sleeps) after a slot was posted or freed on its behalf.
  void wakeRank() { wakeIfSleeping(options_.rankWaker); }
  /// Wakes the proxy thread (whether or not it sleeps).
  void wakeProxy();

  /// Whether some link of `peer` is still up.
  bool linkUp(int peer, std::memory_order order = std::memory_order_seq_cst) const {
    return liveLinks_[peer].load(order) > 0;
  }
  /// A link of `peer` came up (after set-up).
  void linkOpened(int peer) {
    everLinked_[peer].store(true, std::memory_order_release);
    liveLinks_[peer].fetch_add(1);
  }
  /// One link of `peer` closed; returns how many are left up.
  int linkClosed(int peer) { return liveLinks_[peer].fetch_sub(1) - 1; }
  /// Every link of `peer` is down; returns whether any was up.
  bool peerDown(int peer) { return liveLinks_[peer].exchange(0) > 0; }

  /// Keeps the proxy's first failure: "<label>: <message>".
  void recordFailure(const std::string& message);
  /// A peer's failure notice arrived: `origin` failed with `code` after `collectivesDone`
  /// collectives, saying `text`. Keeps the first from each peer and wakes the rank.
  void noticeArrived(int peer, int origin, int32_t code, uint32_t collectivesDone,
                     std::string_view text);
  /// Whether notifyFailure() queued a notice the notice loop has not taken yet.
  bool noticePending() const { return noticePending_.load(std::memory_order_acquire); }

  /// The send loop. For each open send FIFO whose peer is up and ready(fifo, peer, channel),
  /// put(fifo, peer, channel, view, seq) sends slot `seq`, in order, while the rank has posted
  /// it and the receiver has room; put returns false when the slot cannot go now. Returns
  /// whether any slot went.
  template <typename Ready, typename Put>
  bool sendPosted(Ready&& ready, Put&& put) {
    bool moved = false;
    const uint32_t nslots = options_.nslots;
    for (int f : fifos_.openedSends()) {
      const int peer = fifos_.peerOf(f);
      const int channel = fifos_.channelOf(f);
      if (!linkUp(peer, std::memory_order_relaxed) || !ready(f, peer, channel)) continue;
      SendCredits& credits = sendCredits_[f];
      const FifoView v = fifos_.view(f, true);
      const uint64_t head = v.control->head.load(std::memory_order_acquire);
      while (credits.mayQueue(head, nslots) && put(f, peer, channel, v, credits.queued)) {
        ++credits.queued;
        moved = true;
      }
    }
    return moved;
  }

  /// The credit loop. For each open receive FIFO whose peer is up and ready(fifo, peer, channel),
  /// and whose rank freed slots since the last credit, send(fifo, peer, channel, tail) tells the
  /// sender the new tail; send returns false when it cannot go now. Returns whether any went.
  template <typename Ready, typename Send>
  bool returnCredits(Ready&& ready, Send&& send) {
    bool moved = false;
    for (int f : fifos_.openedRecvs()) {
      const int peer = fifos_.peerOf(f);
      const int channel = fifos_.channelOf(f);
      if (!linkUp(peer, std::memory_order_relaxed) || !ready(f, peer, channel)) continue;
      RecvCredits& credits = recvCredits_[f];
      const uint64_t tail = fifos_.view(f, false).control->tail.load(std::memory_order_acquire);
      if (tail <= credits.creditSent || !send(f, peer, channel, tail)) continue;
      credits.creditSent = tail;
      moved = true;
    }
    return moved;
  }

  /// The notice loop. Once notifyFailure() has queued the notice, send(peer, notice) passes it
  /// to every linked peer still up, once. Returns whether it ran.
  template <typename Send>
  bool sendNotice(Send&& send) {
    if (!noticePending_.load(std::memory_order_acquire)) return false;
    noticePending_.store(false);
    // Written once, before noticePending_ was raised: safe to read without the lock.
    const Notice& notice = notice_;
    for (int peer = 0; peer < options_.nranks; ++peer) {
      if (linked(peer) && linkUp(peer)) send(peer, notice);
    }
    return true;
  }

  /// Whether the notice (if any) went and every slot the rank posted to a peer still up was
  /// freed: what a flush waits for, besides the proxy's own queues.
  bool sendsFlushed() const;

  /// Whether armed work is outstanding: a send FIFO whose head is short of the posts armed, or a
  /// receive FIFO whose consumer holds slots it has still to free. The proxy thread polls rather
  /// than sleeps while it is.
  bool armedWorkOutstanding() const;

 private:
  ProxyOptions options_;
  std::string label_;
  ProxyFifos fifos_;
  std::vector<SendCredits> sendCredits_;  ///< by FIFO index
  std::vector<RecvCredits> recvCredits_;

  // Shared with the rank's threads.
  Waker waker_;
  OwnedFd eventFd_;
  OwnedFd epoll_;
  std::unique_ptr<std::atomic<int>[]> liveLinks_;    ///< per rank; 0: gone (or never linked)
  std::unique_ptr<std::atomic<bool>[]> everLinked_;  ///< per rank: some link of it came up
  std::atomic<bool> hasFailure_{false};
  mutable std::mutex mu_;
  std::optional<Status> failure_;
  PeerFailures notices_;  ///< received, per peer
  std::atomic<bool> noticePending_{false};
  bool noticeQueued_ = false;  ///< under mu_: notifyFailure ran (once is enough)
  Notice notice_;

  // Armed work (arm()), by FIFO index: the totals the heads of send FIFOs and the tails of
  // receive FIFOs will reach.
  std::unique_ptr<std::atomic<uint64_t>[]> armedPosts_;
  std::unique_ptr<std::atomic<uint64_t>[]> armedReleases_;
  std::atomic<bool> armed_{false};
  std::atomic<bool> disarmed_{false};

  std::atomic<Mode> mode_{Mode::kRun};
  double flushSeconds_ = 0;
  bool closed_ = false;
  std::thread thread_;
};

}  // namespace braid
