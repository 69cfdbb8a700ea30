// Bootstrap::Impl, shared by bootstrap.cc (join, split and the operations, on the caller's
// thread) and bootstrap_service.cc (the service thread that accepts and reads every incoming
// connection of this rank's listener).
//
// Threads: the caller owns the outgoing sockets (ring to the next rank, one per send peer). The
// service thread owns the listener and every accepted socket; it files whole frames into
// Channels, which the caller takes from under mu_. Waits on cv_ wake at least every
// kAbortPollMs to look at the deadline and the abort flag.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/bootstrap_wire.h"
#include "bootstrap/socket.h"
#include "bootstrap/unique_id.h"

namespace braid {

/// Why a rank connects to another rank's listener (the identify frame says it). Dissemination
/// rounds have connections of their own, without the keepalive of the others: the ring already
/// watches for silent hosts, and a few thousand idle probed connections more are only more for
/// an overloaded host to drop.
enum class Purpose : uint32_t { kRing = 1, kP2p = 2, kGather = 3 };

/// Ring frames carry the operation in their flags, so ranks in different collectives notice.
enum class RingOp : uint16_t { kAllGather = 1, kBarrier = 2, kSpreadAddresses = 3 };

/// The tags of dissemination frames ("BG", then the collective's number and the round), apart
/// from any a caller of send and recv uses.
constexpr uint32_t kDisseminationTag = 0x42470000;
/// The round number in the tag of spreadAddresses' frames.
constexpr uint32_t kSpreadRound = 0xff;
/// How often a wait for a peer that may have exited looks at its listener.
constexpr double kProbeEverySeconds = 0.5;

/// "rank N", for error texts.
std::string rankText(int rank);
/// A collective's name in error texts.
const char* opName(RingOp op);
/// Calls the fault tests' hook (setBootstrapFaultHook), if one is set, at a named point.
void faultPoint(const char* point, const SocketAddress& listener);

/// The ranks of each host, from the host keys the ranks joined with (Bootstrap::join).
struct HostGroups {
  /// Hosts in the order of their lowest rank; each host's ranks ascending, the first its leader.
  std::vector<std::vector<int>> members;
  std::vector<int> hostOf;  ///< rank -> index into members
  /// Two hosts or more, none of more than kHostGatherMaxRanks: the collectives gather by host.
  bool gatherByHost = false;

  static HostGroups fromKeys(const std::vector<uint64_t>& hostOfRank);
};

/// Frames from one peer (of one purpose) that nobody has taken yet.
struct Channel {
  struct Frame {
    uint16_t flags = 0;
    uint32_t tag = 0;
    std::vector<uint8_t> data;

    /// Copies the payload to `out` when it is `bytes` long; otherwise fails with "<what>: rank
    /// <from> sent N bytes, this rank expects <bytes><hint>".
    Status copyTo(void* out, size_t bytes, const std::string& what, int from,
                  const std::string& hint = "") const;
  };
  bool open = false;         ///< the peer connected and was admitted
  bool closed = false;       ///< and has gone since; `reason` says how
  bool unanswering = false;  ///< closed because it stopped answering (BRAID_PEER_TIMEOUT)
  std::string reason;
  /// Set when the peer said why it gave up (an error frame): the failure it passes on.
  std::optional<Status> upstream;
  std::deque<Frame> frames;
  size_t queuedBytes = 0;
};

/// The handshake limit of a WaitPolicy (a non-positive value means the default).
inline double handshakeSeconds(const WaitPolicy& wait) {
  return wait.handshakeSeconds > 0 ? wait.handshakeSeconds : kDefaultHandshakeSeconds;
}

/// The service thread stops reading a peer whose untaken frames exceed this (backpressure).
constexpr size_t kMaxQueuedBytes = 64u << 20;

class Bootstrap::Impl {
 public:
  /// Takes the listener and starts the service thread.
  static Result<std::unique_ptr<Impl>> create(int rank, int nranks, const Secret& secret,
                                              Socket listener, const WaitPolicy& wait);
  ~Impl();

  /// Records the ranks' listeners (at least the ring neighbours') and connects the ring (to
  /// rank+1, from rank-1).
  Status connect(std::vector<SocketAddress> peers, const Deadline& deadline);
  /// Beyond kRingCollectiveMaxRanks, at join: rank 0's every listener address passes down the
  /// binomial tree of addressParent, each rank receiving the table once and sending it on to its
  /// children (log2 n rounds, O(n) bytes a rank); a failure breaks the ring as allGather does.
  Status spreadAddresses(const Deadline& deadline);
  /// Every rank's listener, once the ring has gathered them (before any other use).
  void setPeers(std::vector<SocketAddress> peers) {
    peers_ = std::move(peers);
    everyAddress_ = std::all_of(peers_.begin(), peers_.end(),
                                [](const SocketAddress& a) { return a.port() != 0; });
  }

  /// Every rank's host key (Bootstrap::join), for the collectives to gather by host.
  void setHosts(std::vector<uint64_t> hostKeys) {
    hostKeys_ = std::move(hostKeys);
    hosts_ = HostGroups::fromKeys(hostKeys_);
  }
  /// The host key of `rank` (0 while the keys are unknown).
  uint64_t hostKeyOf(int rank) const {
    return size_t(rank) < hostKeys_.size() ? hostKeys_[size_t(rank)] : 0;
  }

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  const SocketAddress& listenAddress() const { return listenAddress_; }
  const Secret& secret() const { return secret_; }

  Status allGather(void* data, size_t bytesPerRank, RingOp op, double graceSeconds = 0);
  Status send(int peer, uint32_t tag, const void* data, size_t bytes);
  Status recv(int peer, uint32_t tag, void* data, size_t bytes);
  Result<SplitResult> split(int color, int key);
  Result<std::unique_ptr<Bootstrap>> shrink(const std::vector<int>& excluded);
  std::optional<int> unansweringPeer();

 private:
  Impl(int rank, int nranks, const Secret& secret, Socket listener, const SocketAddress& address,
       const WaitPolicy& wait);

  Deadline opDeadline(double graceSeconds = 0) const {
    const double timeout = wait_.timeoutSeconds;  // 0: no limit, with or without grace
    return Deadline::after(timeout > 0 ? timeout + graceSeconds : 0, wait_.abort);
  }
  /// Connects, authenticates and identifies to a peer's listener; returns once admitted.
  Result<Socket> connectPeer(int peer, Purpose purpose, const Deadline& deadline,
                             const std::string& what);
  /// Waits for a frame on `channel` (the first with `tag`, or any when tag is empty).
  /// watchNext: also end the wait when the next rank of the ring reports a failure.
  /// watchRing: also end it when the previous rank of the ring hangs up or reports a failure.
  Result<Channel::Frame> take(Channel& channel, std::optional<uint32_t> tag,
                              const Deadline& deadline, const std::string& what,
                              bool watchNext = false, bool watchRing = false);
  /// Once the connection to the next rank turned readable (it closed, or sent an error frame
  /// before leaving): what it said, if anything. Marks the connection unusable either way.
  std::optional<Status> nextPartingWords();
  /// The failure to report once the next rank is gone: what it said, or that it closed.
  Status nextGone(const std::string& what);
  Status ringStep(const void* sendData, void* recvData, size_t bytes, RingOp op,
                  const Deadline& deadline);
  /// allGather (or, with no bytes, barrier) in ceil(log2 n) rounds over point-to-point
  /// connections: in round k each rank sends what it holds to rank - 2^k and receives as much
  /// from rank + 2^k. Every wait also ends when the ring reports a failure, which breakRing then
  /// passes on as the ring collectives do.
  Status disseminate(uint8_t* data, size_t bytesPerRank, RingOp op, const Deadline& deadline);
  /// allGather (or, with no bytes, barrier) through one rank per host (bootstrap_host_gather.cc):
  /// each rank sends its block to its host's leader, the leaders disseminate whole hosts' blocks
  /// in ceil(log2 hosts) rounds, and each leader sends the whole table back to its host's ranks.
  Status gatherByHost(uint8_t* data, size_t bytesPerRank, RingOp op, const Deadline& deadline);
  /// The frame with `tag` from `from` over a dissemination connection, into `out` (exactly
  /// `bytes`; a frame of another collective or size is an error naming both).
  Status receiveGathered(int from, uint32_t tag, RingOp op, void* out, size_t bytes,
                         const std::string& step, const Deadline& deadline);
  /// A failure that is only a peer closing its connection may come from another rank's loss:
  /// what the ring brings soon after names that rank instead (prefixed with `step`).
  Status namingTheCause(Status failed, const std::string& step, const Deadline& deadline);
  /// take from `peer`'s channel, looking every kProbeEverySeconds, while the peer has not
  /// connected, whether its listener still exists; watchRing: take's watchNext and watchRing.
  Result<Channel::Frame> takeWatchingPeer(Channel& channel, int peer, uint32_t tag,
                                          const Deadline& deadline, const std::string& what,
                                          bool watchRing);
  /// The failure the ring reports within a short wait (the previous rank's last word or hang-up,
  /// or the next rank's last word), if any.
  std::optional<Status> ringCause(const Deadline& deadline);
  /// Writes one frame to `peer` over this rank's connection of `purpose` (kP2p or kGather) to it,
  /// made on first use.
  Status sendFrame(Purpose purpose, int peer, uint16_t flags, uint32_t tag, const void* data,
                   size_t bytes, const Deadline& deadline, const std::string& what);
  /// Tears the ring down after a failure so that the neighbours fail quickly too: the next rank
  /// is told why (the first failure seen on the ring travels on unchanged), then both ring
  /// connections are shut.
  Status breakRing(Status status);
  /// After breakRing during connect: waits briefly until the previous rank has been told.
  Status farewell(Status status);
  /// While waiting for a rank (the previous one to connect the ring, say): whether its listener
  /// still exists. A refused connection means the process is gone (an error naming it); ok
  /// otherwise.
  Status probePeer(int peer, const std::string& what);
  /// recv through takeWatchingPeer: a peer that exited before connecting fails the wait at once
  /// instead of at the timeout.
  Status recvWatching(int peer, uint32_t tag, void* data, size_t bytes, const std::string& what);
  /// Ends a wait in take(): wakes the caller and the service thread.
  void wakeService();

  // bootstrap_service.cc
  void serve();
  struct Incoming;
  void admit(Admission& admission, std::vector<Incoming>& incoming);
  bool readFrames(Incoming& in);
  void closeIncoming(Incoming& in, const std::string& reason,
                     std::optional<Status> upstream = std::nullopt, bool unanswering = false);

  const int rank_;
  const int nranks_;
  const Secret secret_;
  const WaitPolicy wait_;
  Socket listener_;
  const SocketAddress listenAddress_;
  std::vector<SocketAddress> peers_;
  bool everyAddress_ = false;  ///< peers_ holds every rank's listener, not only the neighbours'
  std::vector<uint64_t> hostKeys_;  ///< by rank; empty until known
  HostGroups hosts_;                ///< from hostKeys_

  // Caller's thread only.
  Socket ringNext_;
  bool nextHungUp_ = false;  ///< ringNext_ was closed from the other end: nothing more goes out
  uint64_t ringSeq_ = 0;
  std::optional<Status> ringBroken_;
  std::optional<Status> ringCause_;  ///< the failure the next rank reported, if any
  std::vector<Socket> p2pOut_;
  std::vector<std::optional<Status>> p2pBroken_;
  std::map<int, Socket> gatherOut_;  ///< dissemination: log2 n peers, not n
  std::map<int, std::optional<Status>> gatherBroken_;
  uint64_t splitCount_ = 0;
  uint64_t shrinkCount_ = 0;

  // Shared with the service thread.
  std::mutex mu_;
  std::condition_variable cv_;
  Channel ringIn_;
  std::vector<Channel> p2pIn_;
  std::map<int, Channel> gatherIn_;  ///< dissemination, by peer (references stay valid)
  int ringInFd_ = -1;                ///< the accepted ring socket, for breakRing's shutdown
  /// Set by breakRing: the previous rank, if it connects the ring only now, is told this
  /// instead of being accepted (so it learns the cause, not just that this rank left).
  std::optional<Status> farewell_;
  bool toldPrevious_ = false;
  /// The ring connection to the next rank, which the service thread watches for the moment it
  /// turns readable (the next rank gives up) to wake take(); -1 once it has.
  int nextToWatch_ = -1;

  Socket wake_;  ///< an eventfd that ends the service thread's poll
  std::atomic<bool> stop_{false};
  std::thread service_;
};

}  // namespace braid
