// The failure notices a rank's network transport received, kept per sender: each says how far its
// sender got, and one never hides another.
#pragma once

#include <atomic>
#include <mutex>
#include <optional>
#include <vector>

#include "transport/transport.h"

namespace braid {

class PeerFailures {
 public:
  explicit PeerFailures(int nranks) : byPeer_(static_cast<size_t>(nranks)) {}

  /// Keeps `peer`'s first notice; out-of-range peers are ignored.
  void record(int peer, PeerFailure failure);
  /// `peer`'s notice; kAnyPeer: the one from the peer that got least far.
  std::optional<PeerFailure> get(int peer) const;
  /// Whether any notice arrived (lock-free).
  bool any() const { return any_.load(std::memory_order_acquire); }

 private:
  std::atomic<bool> any_{false};
  mutable std::mutex mu_;
  std::vector<std::optional<PeerFailure>> byPeer_;
};

}  // namespace braid
