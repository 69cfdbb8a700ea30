// Bootstrap: how ranks find each other and exchange small messages over TCP before (and beside)
// the data path.
//
// braidGetUniqueId starts a root listener in the calling process and draws a random 32-byte
// secret; the id carries the root's address and the secret. Each rank opens its own listener,
// connects to the root, proves it holds the secret (HMAC-SHA256 challenge-response in both
// directions, the secret never crosses the wire) and sends its rank and listener address. Once all
// nranks have arrived, the root sends every rank its ring neighbours' addresses (O(n) work for the
// root) and leaves. Ranks then connect in a ring (rank r to r+1) and learn every rank's address:
// round the ring up to 8 ranks; beyond, rank 0 has the whole table from the root and it passes
// down a binomial tree in log2 n rounds (each rank also has its parent's address from the root).
// They open point-to-point connections to any peer's listener on demand for send/recv.
// Once every address is known, allGather and barrier over more than 8 ranks run in log2 n rounds
// of point-to-point messages (rank r to r - 2^k) rather than n-1 steps round the ring; the ring
// still carries failures to every rank. Every connection is authenticated the same way; one that
// fails, stalls or sends a malformed or oversized frame is dropped without disturbing the others.
// Every wait honours the deadline and the abort flag.
//
// split needs no root: the parent all-gathers (color, key, a fresh listener address), members of
// a color derive the group's secret from the parent's (HMAC of a label, the parent's split count
// and the color), order themselves by (key, parent rank) and connect their ring directly.
//
// Files: socket.h (sockets, deadlines, interface choice), auth.h (handshake), unique_id.h (the id
// layout), bootstrap_wire.h (frames), bootstrap_root.cc, bootstrap_service.cc (each rank's
// listener thread), bootstrap.cc (join, collectives, send/recv, split).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "bootstrap/unique_id.h"
#include "braid.h"

namespace braid {

/// How long a bootstrap operation may wait, and a flag that cancels it (braidCommAbort).
/// A wait that runs out returns braidTimeout; one ended by the abort flag returns
/// braidRemoteError with "aborted" in its message.
struct WaitPolicy {
  double timeoutSeconds = 300;  ///< 0 = wait forever
  /// When set and true, waits end with an error. Must outlive the Bootstrap (and its splits).
  const std::atomic<bool>* abort = nullptr;
  /// How long an incoming connection may take to prove the secret and say who it is before this
  /// rank's listener drops it (protects against strangers that connect and stall); <= 0: 5 s.
  double handshakeSeconds = 5;
  /// How long a peer may stop answering before the kernel drops the connection to it
  /// (BRAID_PEER_TIMEOUT: Socket::setPeerTimeout on every connection between ranks); 0: off.
  double peerTimeoutSeconds = 0;
};

/// Makes a unique id and starts the root listener thread that serves its one rendezvous: it
/// exits once every rank has the address table, when the ranks disagree (each is told why), or
/// when timeoutSeconds (0 = never) pass. ifname: BRAID_SOCKET_IFNAME grammar (empty: first
/// non-loopback interface that is up, else loopback). handshakeSeconds: as in WaitPolicy.
Result<braidUniqueId> startBootstrapRoot(const std::string& ifname, double timeoutSeconds,
                                         double handshakeSeconds = 5);
/// Like startBootstrapRoot, for launchers whose ranks agree on the rendezvous beforehand
/// (bootstrap/launcher.cc): listens on `bindAddress` (SO_REUSEADDR; a wildcard address serves every
/// interface) with the given secret, and returns the id naming `advertised`, the address the
/// ranks connect to.
Result<braidUniqueId> startBootstrapRootAt(const SocketAddress& bindAddress,
                                           const SocketAddress& advertised, const Secret& secret,
                                           double timeoutSeconds, double handshakeSeconds = 5);

/// What one rank learns from a split: its place in the new group and the group's bootstrap.
struct SplitResult;

/// One rank's bootstrap. Calls on one Bootstrap must not overlap (one thread at a time); a
/// service thread per Bootstrap accepts and reads incoming connections in the background, so a
/// peer's send never waits for this rank to call recv.
class Bootstrap {
 public:
  /// Joins the rendezvous of `id` as `rank` of `nranks`; returns once the ring is connected.
  /// hostKey: equal for the ranks of one host (0 everywhere: hosts unknown). Beyond 8 ranks on
  /// two hosts or more of at most 32 ranks each, the collectives gather through the lowest rank of
  /// each host (two messages a rank; the hosts' leaders disseminate among themselves) instead of
  /// log2 n rounds at every rank. Groups split or shrunk from this one keep the hosts.
  static Result<std::unique_ptr<Bootstrap>> join(const braidUniqueId& id, int rank, int nranks,
                                                 const std::string& ifname, const WaitPolicy& wait,
                                                 uint64_t hostKey = 0);
  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  int rank() const;
  int nranks() const;
  /// The address this rank's listener accepts connections on ("ip:port"), for logs and tests.
  std::string listenerAddress() const;
  /// A key for authenticating this group's other connections (a network transport's streams):
  /// HMAC-SHA256 of `label` under the group's secret, derived locally by every rank.
  Result<Secret> deriveKey(std::string_view label) const;

  /// data holds nranks blocks of bytesPerRank; this rank's block is filled, the rest is received.
  /// Runs nranks-1 steps around the ring, or over more than 8 ranks (once every listener is
  /// known) ceil(log2 nranks) rounds of point-to-point messages. After a failure the ring is torn
  /// down (so the failure reaches every rank quickly) and later collectives return the same
  /// error; a rank still finishing the collective before may learn of it there. graceSeconds
  /// lengthens the wait beyond the timeout, for a block a rank is known to take long to fill.
  Status allGather(void* data, size_t bytesPerRank, double graceSeconds = 0);
  /// Returns once every rank has entered the barrier.
  Status barrier();
  /// Point-to-point messages; a (peer, tag) pair is delivered in order. Sizes must match exactly.
  /// send returns once the message is handed to the kernel; messages for tags nobody has asked
  /// for yet are kept until recv asks. peer may be this rank. Tags 0x42470000-0x4247ffff are
  /// the collectives' own.
  Status send(int peer, uint32_t tag, const void* data, size_t bytes);
  Status recv(int peer, uint32_t tag, void* data, size_t bytes);

  /// Collective: ranks with the same color >= 0 form a new bootstrap ordered by (key, old rank).
  /// Ranks with color < 0 take part and get a SplitResult with a null bootstrap.
  Result<SplitResult> split(int color, int key);

  /// A rank whose connection to this one the kernel dropped because it stopped answering
  /// (WaitPolicy::peerTimeoutSeconds): its host went down or became unreachable. The service
  /// thread watches every incoming connection (the ring's and point-to-point ones) all the
  /// time, so this answers at once, from any thread; nullopt while none did.
  std::optional<int> unansweringPeer() const;

  /// Collective over the ranks not in `excluded` (which do not call it; dead or alive, nothing of
  /// theirs is touched): a new bootstrap of the remaining ranks, in their old order. It uses
  /// neither the ring (a failure may have broken it) nor the rendezvous root (gone since init):
  /// the lowest remaining rank gathers fresh listener addresses over point-to-point connections
  /// (bootstrap_shrink.cc), so it works whichever ranks were lost, rank 0 included. Every caller
  /// must pass the same set; a caller in it, or a set that leaves no rank, is an error.
  Result<std::unique_ptr<Bootstrap>> shrink(const std::vector<int>& excluded);

  class Impl;

 private:
  explicit Bootstrap(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct SplitResult {
  std::unique_ptr<Bootstrap> bootstrap;  ///< null for color < 0
  std::vector<int> parentRanks;          ///< new rank i was parent rank parentRanks[i]
};

/// Fault injection for the fault tests: a function the bootstrap calls at named points of a join
/// ("join:root" once the join frame is sent, "join:table" once the address table arrived,
/// "join:ring" once the ring is connected) and before every ring step ("ring:step"), so a test can
/// kill or hold a rank at an exact moment. `listener` is the calling rank's listener address
/// ("ip:port"). Process-wide; nullptr (the default) turns it off.
using BootstrapFaultHook = void (*)(const char* point, const std::string& listener);
void setBootstrapFaultHook(BootstrapFaultHook hook);

}  // namespace braid
