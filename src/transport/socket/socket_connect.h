// Setting up the socket transport's streams: which interface to listen on, and the mesh of
// authenticated TCP connections between the ranks that talk over TCP.
//
// Every rank listens; for each pair that needs a link the lower rank opens the pair's streams to
// the higher rank's listener. Each connection starts with the bootstrap's HMAC challenge-response
// (auth.h) under a key derived from the communicator's secret, so a process that does not hold
// the secret cannot inject data; then the connecting rank says who it is and which stream this is
// (socketwire::Identify) and the acceptor confirms. Strangers and connections that fail any of
// this are dropped without disturbing the others. Accepting runs on a helper thread while the
// calling thread connects, so no rank waits on another's order of work.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string_view>
#include <thread>
#include <vector>

#include "base/status.h"
#include "bootstrap/socket.h"
#include "bootstrap/unique_id.h"

namespace braid {

/// The interface the socket transport listens on: with `spec` (BRAID_SOCKET_IFNAME grammar) the
/// best matching one; without, the best one that is neither loopback nor a docker bridge, or
/// loopback when nothing else is up.
Result<InterfaceAddress> chooseTransportInterface(const std::vector<InterfaceAddress>& interfaces,
                                                  std::string_view spec);

/// A listener on the interface chooseTransportInterface() picks for `spec`, on a free port.
Result<Socket> listenOnTransportInterface(std::string_view spec);

/// One authenticated stream of a pair.
struct PeerStream {
  int peer = -1;
  int index = 0;
  Socket socket;
};

/// Who connects to whom: streams[p] TCP streams link this rank with p (0: no link).
struct MeshPlan {
  int rank = 0;
  std::vector<SocketAddress> addresses;  ///< every rank's listener
  std::vector<int> streams;              ///< per peer
};

/// Accepts the streams that lower ranks open to this rank until all plan.streams[p] of every
/// p < rank have arrived. A connection that fails the handshake within handshakeSeconds, names a
/// rank or stream it should not, or repeats one, is dropped.
Result<std::vector<PeerStream>> acceptStreams(Socket& listener, const Secret& key,
                                              const MeshPlan& plan, const Deadline& deadline,
                                              double handshakeSeconds);

/// Opens this rank's plan.streams[peer] streams to `peer`; `label` starts the errors.
Result<std::vector<PeerStream>> connectPeer(const Secret& key, const MeshPlan& plan, int peer,
                                            const Deadline& deadline,
                                            std::string_view label = "socket transport");

/// Opens this rank's streams to every higher rank of the plan.
Result<std::vector<PeerStream>> connectStreams(const Secret& key, const MeshPlan& plan,
                                               const Deadline& deadline);

/// acceptStreams (on a helper thread) and connectStreams together, within timeoutSeconds
/// (0: no limit); every stream of the plan.
Result<std::vector<PeerStream>> buildMesh(Socket& listener, const Secret& key, const MeshPlan& plan,
                                          double timeoutSeconds);

/// Accepts, on a thread of its own for as long as it lives, the streams any rank of the plan opens
/// to this rank (connectPeer), handing each to `deliver` (on that thread) once it passed the
/// handshake. Strangers, and streams a rank should not open or opens twice, are dropped.
class StreamAcceptor {
 public:
  using Deliver = std::function<void(PeerStream)>;
  static Result<std::unique_ptr<StreamAcceptor>> start(Socket listener, const Secret& key,
                                                       MeshPlan plan, double handshakeSeconds,
                                                       Deliver deliver);
  /// Stops accepting and closes the listener.
  ~StreamAcceptor();
  StreamAcceptor(const StreamAcceptor&) = delete;
  StreamAcceptor& operator=(const StreamAcceptor&) = delete;

 private:
  StreamAcceptor() = default;
  void run();

  Socket listener_;
  Secret key_{};
  MeshPlan plan_;
  double handshakeSeconds_ = 5;
  Deliver deliver_;
  Socket stop_;  ///< an eventfd: written once to end the thread's wait
  std::thread thread_;
};

}  // namespace braid
