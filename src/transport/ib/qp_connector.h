// Connecting the RDMA transport's queue pairs on first use, agreed by the two ranks of a pair
// alone.
//
// Every rank with a usable port listens on a TCP port (its address went out at create()). The
// first time a rank uses a peer (a send or receive FIFO to it), it makes its queue pair, opens one
// authenticated stream to the peer's listener (socket_connect.h: the socket transport's handshake
// under a key of this transport's) and sends its half (QpInfo). The peer's acceptor thread makes
// its own queue pair, brings it to RTR with that half and only then replies with its half; the
// rank brings its queue pair to RTR and RTS and confirms, and the peer writes only once the
// confirmation arrived. So nobody writes before the other's queue pair is ready to receive, and a
// rank that never uses a peer holds no queue pair, completion queue or registration for it.
//
// Both ranks may start at once (each uses the other in the same call): the lower rank's attempt
// wins - the lower rank's acceptor answers the higher rank's attempt with "defer" and the higher
// rank's acceptor serves the lower rank's with the queue pair its own attempt made. A peer that is
// gone (its listener refuses, its stream closes, or its host stops answering for
// BRAID_PEER_TIMEOUT) fails the attempt with an error naming it, and peerAlive() then says so.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "transport/ib/ib_proxy.h"
#include "transport/socket/socket_connect.h"

namespace braid {

#if BRAID_HAVE_IBVERBS

/// How long the exchange may wait and for what.
struct QpConnectorTimes {
  double timeoutSeconds = 0;      ///< BRAID_TIMEOUT: a rank's whole attempt (0: no limit)
  double peerTimeoutSeconds = 0;  ///< BRAID_PEER_TIMEOUT, set on every exchange stream
  const std::atomic<bool>* abort = nullptr;
};

class QpConnector {
 public:
  /// Starts accepting the peers' attempts on `listener`. plan: every rank's listener, and one
  /// stream for each linked peer; names: "rank 3 (host)" per rank.
  static Result<std::unique_ptr<QpConnector>> start(IbProxy* proxy, Socket listener,
                                                    const Secret& key, MeshPlan plan,
                                                    std::vector<std::string> names,
                                                    QpConnectorTimes times);
  /// Stops accepting; an exchange the acceptor is serving ends first.
  ~QpConnector();
  QpConnector(const QpConnector&) = delete;
  QpConnector& operator=(const QpConnector&) = delete;

  /// Connects the queue pair with a linked `peer` unless it is up: returns once this rank may
  /// use it, or with the error that ended the attempt (the same error every later time).
  Status connect(int peer);
  /// Peers whose queue pairs are up so far.
  int connectedPeers() const;

 private:
  enum class State { kNone, kConnecting, kServing, kUp, kFailed };
  struct Pair {
    State state = State::kNone;
    bool opened = false;  ///< the proxy made this side's queue pair
    Status failure;
  };

  QpConnector() = default;
  /// Makes this side's queue pair for `peer` unless made; mu_ held.
  Result<QpInfo> openLocked(int peer);
  /// Sets the pair's final state (the first one wins) and wakes the waiters.
  void finish(int peer, const Status& status);
  /// Waits until the pair with `peer` is up or failed; lock holds mu_.
  Status awaitFinal(int peer, std::unique_lock<std::mutex>& lock);
  /// This rank's attempt: ok with accepted set, or deferred to the peer's attempt.
  Status attempt(int peer, const QpInfo& mine, bool* deferred);
  /// The acceptor thread: starts a thread that serve()s `stream`.
  void serveApart(PeerStream stream);
  /// Answers `stream`'s attempt and sets the pair's final state if this side served it.
  void serve(PeerStream stream);
  /// serve()'s work; the pair's final state is the caller's.
  Status answer(int peer, Socket& socket, bool* answered);

  IbProxy* proxy_ = nullptr;
  Secret key_{};
  MeshPlan plan_;
  std::vector<std::string> names_;
  QpConnectorTimes times_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::vector<Pair> pairs_;  ///< per rank, under mu_
  std::mutex serversMu_;
  std::vector<std::thread> servers_;  ///< one per attempt answered, joined at destruction
  /// Last member: stops before the rest goes.
  std::unique_ptr<StreamAcceptor> acceptor_;
};

#else

/// Without the libibverbs headers no rank links anybody over RDMA: nothing to connect.
class QpConnector {
 public:
  Status connect(int /*peer*/) { return internalError("RDMA transport: built without libibverbs"); }
  int connectedPeers() const { return 0; }
};

#endif  // BRAID_HAVE_IBVERBS

}  // namespace braid
