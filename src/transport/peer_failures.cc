#include "transport/peer_failures.h"

namespace braid {

void PeerFailures::record(int peer, PeerFailure failure) {
  if (peer < 0 || peer >= static_cast<int>(byPeer_.size())) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (byPeer_[peer]) return;
    byPeer_[peer] = std::move(failure);
  }
  any_.store(true, std::memory_order_release);
}

std::optional<PeerFailure> PeerFailures::get(int peer) const {
  if (!any()) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  if (peer != kAnyPeer) {
    if (peer < 0 || peer >= static_cast<int>(byPeer_.size())) return std::nullopt;
    return byPeer_[peer];
  }
  std::optional<PeerFailure> found;
  for (const std::optional<PeerFailure>& f : byPeer_) {
    if (f && (!found || f->collectivesDone < found->collectivesDone)) found = f;
  }
  return found;
}

}  // namespace braid
