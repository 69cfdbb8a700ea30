// The RDMA transport's proxy thread and every verbs resource it drives (ib_transport.h tells the
// protocol). The proxy starts with no queue pair; the first use of a peer (qp_connector.h) opens
// the pair's queue pair, completion queue and control block (openPeer), connects it from the
// peer's half (connect) and hands it to the thread (peerConnected). The thread then turns posted
// send slots into RDMA writes, completions into posted receive slots and freed send slots, freed
// receive slots into credits, and sleeps on the completion channel plus an eventfd the rank rings
// through the proxy's Waker. The FIFOs, the credit counts and their loops, the thread and the
// failure state are NetworkProxy's (network_proxy.h); this proxy says how slots, credits and
// notices travel as verbs work requests.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/hand_off.h"
#include "base/status.h"
#include "fifo/fifo.h"
#include "transport/ib/ib_device.h"
#include "transport/ib/mr_cache.h"
#include "transport/network_proxy.h"

namespace braid {

/// How long a queue pair waits for each acknowledgement (4.096 us x 2^timeout) and how many
/// times it retries before the next completion fails with a retry-exceeded error.
struct QpRetryLimits {
  uint8_t timeout = 0;  ///< the ibv_qp_attr exponent; 0 waits forever
  uint8_t retryCount = 7;
};
/// The limits that end a write to a peer that stopped answering within peerTimeoutSeconds
/// (BRAID_PEER_TIMEOUT; 0: never): seven retries of the longest wait that fits, at least 67 ms.
QpRetryLimits qpRetryLimits(double peerTimeoutSeconds);

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

class IbProxy final : public NetworkProxy {
 public:
  /// Creates the completion channel and lays out (address space only) the FIFOs of the peers
  /// with linked[peer], then starts the thread; no queue pair yet. Takes the device.
  static Result<std::unique_ptr<IbProxy>> create(ProxyOptions options,
                                                 const std::vector<bool>& linked,
                                                 std::unique_ptr<IbDevice> device);
  ~IbProxy() override;

  // A pair's set-up, on any thread but the proxy's, one thread at a time per peer.

  /// Creates the queue pair with a linked `peer` (in INIT, receives posted), its completion queue
  /// and its registered control block; returns this side's half. Once per peer.
  Result<QpInfo> openPeer(int peer);
  /// This side's half of the pair with `peer` (after openPeer).
  QpInfo localInfo(int peer) const;
  /// Brings the queue pair with `peer` to RTS from the peer's half.
  Status connect(int peer, const QpInfo& remote);
  /// The pair with `peer` is connected at both ends: the thread may write to it from now on.
  void peerConnected(int peer);
  /// The pair with `peer` never came up (the peer left or refused): peerAlive() says so.
  void peerLost(int peer);

  /// False once the queue pair with `peer` failed; asking also makes the proxy probe the peer.
  bool peerAlive(int peer) override;
  const MrCache& mrCache() const { return *cache_; }

 private:
  struct Announce {
    uint64_t addr;
    uint32_t rkey;
    uint32_t valid;
  };
  /// A failure notice as it is written into the peer's control block.
  struct WireNotice {
    int32_t origin;
    int32_t code;
    uint32_t bytes;
    uint32_t collectivesDone;  ///< PeerFailure::collectivesDone
    char text[496];
  };
  /// A send FIFO's registration and where the peer's receive FIFO is (beside its credits).
  struct SendState {
    bool registered = false;
    uint32_t lkey = 0;
    bool announced = false;
    uint64_t remoteAddr = 0;
    uint32_t rkey = 0;
  };
  /// Whether the sender knows where a receive FIFO is (beside its credits).
  struct RecvState {
    bool announced = false;
  };
  /// One connected (or connecting) peer's verbs resources.
  struct Peer {
    ibv_cq* cq = nullptr;
    ibv_qp* qp = nullptr;
    std::vector<char> control;  ///< inbox (the peer writes) then outbox (we send from)
    ibv_mr* controlMr = nullptr;
    uint32_t psn = 0;
    uint64_t remoteControl = 0;
    uint32_t remoteControlRkey = 0;
    int outstanding = 0;  ///< send WRs not yet completed
    std::atomic<bool> probe{false};
    std::chrono::steady_clock::time_point lastProbe{};
  };

  IbProxy(ProxyOptions options, std::unique_ptr<IbDevice> device);
  char* controlBlock(int peer, bool inbox) const;
  /// Whether the thread has taken `peer` in (peerConnected) and its link is up: only then does
  /// the thread touch the peer's resources.
  bool usable(int peer) const { return adopted_[peer] && linkUp(peer, std::memory_order_relaxed); }
  /// On the thread: takes in the peers connected since the last call.
  void takeConnected();

  void run() override;
  /// The sender waits for a receive FIFO's announcement: the proxy sends it at once.
  void recvOpened() override { wakeProxy(); }
  bool refreshOpened();
  bool scanSends();
  /// RDMA-writes slot `seq` of send FIFO `f`; false when the queue pair has no room for it now
  /// (or the post failed: the peer is gone).
  bool writeSlot(size_t f, int peer, int channel, const FifoView& v, uint64_t seq);
  bool scanRecvs();
  bool announce(size_t fifo, int peer, int channel);
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

  std::unique_ptr<IbDevice> device_;
  const VerbsApi& api_;
  std::unique_ptr<MrCache> cache_;
  ibv_comp_channel* channel_ = nullptr;
  int recvDepth_ = 0;
  int sendDepth_ = 0;
  std::vector<std::unique_ptr<Peer>> peers_;  ///< per rank; made by openPeer
  size_t controlStride_ = 0;

  // Peers handed over by peerConnected(), and peers lost before they came up.
  HandOff<int> connected_;
  std::unique_ptr<std::atomic<bool>[]> lost_;
  // The thread's: the peers it took in, whose completion queues it polls.
  std::vector<uint8_t> adopted_;  ///< per rank
  std::vector<int> active_;
  std::vector<SendState> send_;  ///< by FIFO index
  std::vector<RecvState> recv_;
  std::vector<ibv_mr*> fifoMrs_;  ///< released to the cache at destruction
  std::atomic<bool> probePending_{false};
};

#endif  // BRAID_HAVE_IBVERBS

}  // namespace braid
