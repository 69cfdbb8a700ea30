// Bootstrap: how ranks find each other and exchange small messages over TCP before (and beside)
// the data path.
//
// braidGetUniqueId starts a root listener in the calling process and draws a random 32-byte
// secret; the id carries the root's address and the secret. Each rank opens its own listener,
// connects to the root, proves it holds the secret (HMAC-SHA256 challenge-response in both
// directions, the secret never crosses the wire) and sends its rank and listener address. Once all
// nranks have arrived, the root sends every rank the address table and leaves. Ranks then connect
// in a ring (rank r to r+1) for allGather and barrier, and open point-to-point connections to any
// peer's listener on demand for send/recv. Every connection is authenticated the same way; one that
// fails, stalls or sends a malformed or oversized frame is dropped without disturbing the others.
// Every wait honours the deadline and the abort flag.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "braid.h"
#include "core/status.h"

namespace braid {

/// How long a bootstrap operation may wait, and a flag that cancels it (braidCommAbort).
struct WaitPolicy {
  double timeoutSeconds = 300;                 ///< 0 = wait forever
  const std::atomic<bool>* abort = nullptr;    ///< when set and true, waits end with an error
};

/// Makes a unique id and starts the root listener thread that serves its one rendezvous.
/// ifname: BRAID_SOCKET_IFNAME (empty: first non-loopback interface that is up, else loopback).
Result<braidUniqueId> startBootstrapRoot(const std::string& ifname, double timeoutSeconds);

/// What one rank learns from a split: its place in the new group and the group's bootstrap.
struct SplitResult;

class Bootstrap {
 public:
  /// Joins the rendezvous of `id` as `rank` of `nranks`; returns once the ring is connected.
  static Result<std::unique_ptr<Bootstrap>> join(const braidUniqueId& id, int rank, int nranks,
                                                 const std::string& ifname,
                                                 const WaitPolicy& wait);
  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  int rank() const;
  int nranks() const;

  /// data holds nranks blocks of bytesPerRank; this rank's block is filled, the rest is received.
  Status allGather(void* data, size_t bytesPerRank);
  Status barrier();
  /// Point-to-point messages; a (peer, tag) pair is delivered in order. Sizes must match exactly.
  Status send(int peer, uint32_t tag, const void* data, size_t bytes);
  Status recv(int peer, uint32_t tag, void* data, size_t bytes);

  /// Collective: ranks with the same color >= 0 form a new bootstrap ordered by (key, old rank).
  /// Ranks with color < 0 take part and get a SplitResult with a null bootstrap.
  Result<SplitResult> split(int color, int key);

  class Impl;

 private:
  explicit Bootstrap(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct SplitResult {
  std::unique_ptr<Bootstrap> bootstrap;  ///< null for color < 0
  std::vector<int> parentRanks;          ///< new rank i was parent rank parentRanks[i]
};

}  // namespace braid
