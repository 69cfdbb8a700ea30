// The RDMA transport's proxy thread and every verbs resource it drives (ib_transport.h tells the
// protocol). Setup (ib_transport.cc) creates the queue pairs through connect(); the thread then
// turns posted send slots into RDMA writes, completions into posted receive slots and freed send
// slots, freed receive slots into credits, and sleeps on the completion channel plus an eventfd
// the rank rings through the proxy's Waker.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/status.h"
#include "fifo/fifo.h"
#include "transport/peer_failures.h"
#include "transport/ib/ib_device.h"
#include "transport/ib/mr_cache.h"

namespace braid {

#if BRAID_HAVE_IBVERBS

/// What each side of a pair tells the other (through the bootstrap) to connect its queue pair.
struct QpInfo {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint16_t lid = 0;
  uint8_t ethernet = 0;
  uint8_t mtu = 0;
  uint8_t gid[16] = {};
  uint64_t controlAddr = 0;  ///< where the peer writes announcements and notices
  uint32_t controlRkey = 0;
  uint32_t nslots = 0;
  uint32_t slotBytes = 0;
  uint32_t maxChannels = 0;
};

/// Immediate data: kind (3 bits), channel (7 bits), value (22 bits).
enum class ImmKind : uint32_t { kData = 1, kCredit = 2, kAnnounce = 3, kNotice = 4, kBye = 5 };
constexpr uint32_t kImmValueBits = 22;
constexpr uint32_t kImmValueMask = (1u << kImmValueBits) - 1;
constexpr uint32_t packImm(ImmKind kind, uint32_t channel, uint32_t value) {
  return (static_cast<uint32_t>(kind) << 29) | ((channel & 0x7f) << kImmValueBits) |
         (value & kImmValueMask);
}

class IbProxy {
 public:
  struct Options {
    int rank = 0;
    int nranks = 1;
    int maxChannels = 1;
    uint32_t nslots = 2;
    uint32_t slotBytes = 0;
    Waker* rankWaker = nullptr;
    const Logger* logger = nullptr;
    std::vector<std::string> peerNames;
    std::vector<bool> linked;  ///< per rank
  };

  /// Creates the completion queue, the queue pairs of the linked peers (in INIT, receives
  /// posted), the FIFO arena and the control blocks. Takes the device.
  static Result<std::unique_ptr<IbProxy>> create(Options options, std::unique_ptr<IbDevice> device);
  ~IbProxy();
  IbProxy(const IbProxy&) = delete;
  IbProxy& operator=(const IbProxy&) = delete;

  /// This side's half of the pair with `peer`.
  QpInfo localInfo(int peer) const;
  /// Brings the queue pair with `peer` to RTS from the peer's half.
  Status connect(int peer, const QpInfo& remote);
  /// Starts the thread (after every pair is connected).
  Status start();
  /// Stops the thread; flush: first until every posted slot is written (at most flushSeconds).
  void close(bool flush, double flushSeconds);

  bool linked(int peer) const {
    return peer >= 0 && peer < options_.nranks && options_.linked[peer];
  }
  FifoView sendFifo(int peer, int channel);
  FifoView recvFifo(int peer, int channel);
  Waker* waker() { return &waker_; }
  /// False once the queue pair with `peer` failed; asking also makes the proxy probe the peer.
  bool peerAlive(int peer);
  std::optional<Status> failure() const;
  /// The failure notice `peer` sent, if any (kAnyPeer: any peer's).
  std::optional<PeerFailure> peerFailure(int peer) const { return notices_->get(peer); }
  void notifyFailure(int failedRank, const PeerFailure& failure);
  const MrCache& mrCache() const { return *cache_; }

 private:
  struct Announce {
    uint64_t addr;
    uint32_t rkey;
    uint32_t valid;
  };
  struct Notice {
    int32_t origin;
    int32_t code;
    uint32_t bytes;
    uint32_t collectivesDone;  ///< PeerFailure::collectivesDone
    char text[496];
  };
  struct SendState {
    bool registered = false;
    uint32_t lkey = 0;
    bool announced = false;
    uint64_t remoteAddr = 0;
    uint32_t rkey = 0;
    uint64_t queued = 0;
    uint64_t released = 0;
    uint64_t creditTail = 0;
  };
  struct RecvState {
    bool announced = false;
    uint64_t posted = 0;
    uint64_t creditSent = 0;
  };
  struct Peer {
    ibv_qp* qp = nullptr;
    uint32_t psn = 0;
    uint64_t remoteControl = 0;
    uint32_t remoteControlRkey = 0;
    int outstanding = 0;  ///< send WRs not yet completed
    std::atomic<bool> alive{true};
    std::atomic<bool> probe{false};
    std::chrono::steady_clock::time_point lastProbe{};
  };

  explicit IbProxy(std::unique_ptr<IbDevice> device);
  size_t fifoIndex(int peer, int channel) const {
    return size_t(peer) * options_.maxChannels + channel;
  }
  FifoView view(size_t index, bool send) const;
  char* controlBlock(int peer, bool inbox) const;
  size_t controlOffset(int peer, bool inbox) const;

  void run();
  bool refreshOpened();
  bool scanSends();
  bool scanRecvs();
  bool sendNotices();
  bool sendProbes();
  void sayGoodbye();
  bool pollCompletions();
  void completion(const ibv_wc& wc);
  void received(int peer, uint32_t imm);
  Status postWrite(int peer, uint64_t wrId, ibv_sge* sge, uint64_t remote, uint32_t rkey,
                   std::optional<uint32_t> imm);
  void peerGone(int peer, const std::string& why);
  bool allGone() const;
  void fail(const Status& status);
  bool flushed() const;
  void wakeRank() { wakeIfSleeping(options_.rankWaker); }

  Options options_;
  std::unique_ptr<IbDevice> device_;
  const VerbsApi& api_;
  std::unique_ptr<MrCache> cache_;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  int recvDepth_ = 0;
  int sendDepth_ = 0;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::vector<int> arenaSlot_;
  size_t metaBytes_ = 0;
  size_t fifoBytes_ = 0;
  char* arena_ = nullptr;
  size_t arenaBytes_ = 0;
  size_t controlStride_ = 0;
  std::vector<char> controls_;  ///< per linked peer: inbox (peer writes) then outbox (we send from)
  ibv_mr* controlMr_ = nullptr;
  std::vector<SendState> send_;
  std::vector<RecvState> recv_;
  std::vector<ibv_mr*> fifoMrs_;  ///< released to the cache at destruction

  Waker waker_;
  int eventFd_ = -1;
  int epollFd_ = -1;
  std::unique_ptr<std::atomic<bool>[]> sendOpened_;
  std::unique_ptr<std::atomic<bool>[]> recvOpened_;
  std::atomic<uint64_t> openedGeneration_{0};
  uint64_t openedSeen_ = 0;
  std::vector<int> openedSends_;
  std::vector<int> openedRecvs_;
  std::atomic<bool> hasFailure_{false};
  mutable std::mutex mu_;
  std::optional<Status> failure_;
  std::unique_ptr<PeerFailures> notices_;  ///< received, per peer
  std::atomic<bool> noticePending_{false};
  bool noticeQueued_ = false;
  Notice notice_{};
  std::atomic<bool> probePending_{false};

  enum class Mode : int { kRun, kFlush, kStop };
  std::atomic<Mode> mode_{Mode::kRun};
  double flushSeconds_ = 0;
  bool closed_ = false;
  std::thread thread_;
};

#endif  // BRAID_HAVE_IBVERBS

}  // namespace braid
