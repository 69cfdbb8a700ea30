// Shrink: the ranks left after some were lost form a new bootstrap among themselves.
//
// Neither the ring (a failure breaks it) nor the rendezvous root (gone once every rank had the
// address table) can serve, and an excluded rank may be dead, rank 0 included. So the lowest
// remaining rank leads: every other remaining rank opens a fresh listener and sends its address,
// with a digest of the excluded set, to the leader's old listener over a point-to-point
// connection; the leader checks that the sets agree and answers each with the new address table;
// then the ranks connect a new ring under a secret derived from the old one, the number of this
// shrink and the excluded set, exactly as a join does after the root's table. Nothing reaches an
// excluded rank. Waits look at the awaited rank's old listener every half second, so a rank that
// dies during the shrink fails it at once rather than at BRAID_TIMEOUT.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "base/little_endian.h"
#include "base/log.h"
#include "bootstrap/auth.h"
#include "bootstrap/bootstrap_impl.h"

namespace braid {
namespace {

// Point-to-point tags of the exchange, one pair per shrink of a bootstrap: messages of an
// earlier, failed shrink never pass for this one's.
constexpr uint32_t kShrinkJoinTag = 0x53480000;   // "SH", then the shrink's number
constexpr uint32_t kShrinkTableTag = 0x53540000;  // "ST", then the shrink's number

// The join message: digest of the excluded set, then the sender's new listener.
constexpr size_t kJoinBytes = 8 + SocketAddress::kWireBytes;

uint64_t digestOf(const std::vector<int>& excluded) {
  uint64_t h = 1469598103934665603ull;
  for (int r : excluded) h = (h ^ static_cast<uint32_t>(r)) * 1099511628211ull;
  return h ^ excluded.size();
}

}  // namespace

Status Bootstrap::Impl::recvWatching(int peer, uint32_t tag, void* data, size_t bytes,
                                     const std::string& what) {
  ASSIGN_OR_RETURN(const Channel::Frame frame,
                   takeWatchingPeer(p2pIn_[static_cast<size_t>(peer)], peer, tag, opDeadline(),
                                    what, /*watchRing=*/false));
  return frame.copyTo(data, bytes, what, peer);
}

Result<std::unique_ptr<Bootstrap>> Bootstrap::Impl::shrink(const std::vector<int>& excludedIn) {
  std::vector<int> excluded = excludedIn;
  std::sort(excluded.begin(), excluded.end());
  excluded.erase(std::unique(excluded.begin(), excluded.end()), excluded.end());
  const std::string what = rankText(rank_) + ": shrink";
  std::vector<int> kept;
  for (int r = 0; r < nranks_; ++r) {
    if (!std::binary_search(excluded.begin(), excluded.end(), r)) kept.push_back(r);
  }
  if (std::binary_search(excluded.begin(), excluded.end(), rank_)) {
    return invalidUsage(what + ": this rank is among the excluded ones (they do not call shrink)");
  }
  const uint64_t counter = ++shrinkCount_;
  const uint32_t joinTag = kShrinkJoinTag | static_cast<uint32_t>(counter & 0xffff);
  const uint32_t tableTag = kShrinkTableTag | static_cast<uint32_t>(counter & 0xffff);
  const int leader = kept.front();
  const int n = static_cast<int>(kept.size());
  const int newRank = static_cast<int>(std::find(kept.begin(), kept.end(), rank_) - kept.begin());

  SocketAddress near = listenAddress_;
  near.setPort(0);
  ASSIGN_OR_RETURN(Socket listener, Socket::listenOn(near));
  ASSIGN_OR_RETURN(const SocketAddress address, listener.localAddress());

  // The table: a status word (0: agreed; 1: the excluded sets differ), then n addresses.
  std::vector<uint8_t> table(4 + size_t(n) * SocketAddress::kWireBytes, 0);
  const uint64_t digest = digestOf(excluded);
  if (rank_ == leader) {
    address.toWire(table.data() + 4);
    bool agreed = true;
    std::string disagreeing;
    for (int i = 1; i < n; ++i) {
      uint8_t join[kJoinBytes];
      RETURN_IF_ERROR(recvWatching(kept[i], joinTag, join, sizeof(join),
                                   what + ": waiting for " + rankText(kept[i])));
      if (getLe64(join) != digest) {
        agreed = false;
        disagreeing = rankText(kept[i]);
      }
      ASSIGN_OR_RETURN(const SocketAddress theirs, SocketAddress::fromWire(join + 8));
      theirs.toWire(table.data() + 4 + size_t(i) * SocketAddress::kWireBytes);
    }
    putLe32(table.data(), agreed ? 0 : 1);
    for (int i = 1; i < n; ++i) {
      RETURN_IF_ERROR(send(kept[i], tableTag, table.data(), table.size()));
    }
    if (!agreed) {
      return invalidUsage(what + ": " + disagreeing +
                          " passed another set of excluded ranks than " + rankText(rank_) +
                          " (every remaining rank must pass the same set)");
    }
  } else {
    uint8_t join[kJoinBytes];
    putLe64(join, digest);
    address.toWire(join + 8);
    RETURN_IF_ERROR(send(leader, joinTag, join, sizeof(join)));
    RETURN_IF_ERROR(recvWatching(leader, tableTag, table.data(), table.size(),
                                 what + ": waiting for " + rankText(leader) + " (the leader)"));
    if (getLe32(table.data()) != 0) {
      return invalidUsage(what + ": the remaining ranks passed different sets of excluded ranks");
    }
  }
  std::vector<SocketAddress> peers;
  for (int i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(
        SocketAddress a,
        SocketAddress::fromWire(table.data() + 4 + size_t(i) * SocketAddress::kWireBytes));
    peers.push_back(a);
  }
  if (!(peers[static_cast<size_t>(newRank)] == address)) {
    return remoteError(what + ": the leader's table gives this rank's address as " +
                       peers[static_cast<size_t>(newRank)].toString() + ", not " +
                       address.toString());
  }
  ASSIGN_OR_RETURN(const Secret secret, deriveShrinkSecret(secret_, counter, excluded));
  ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl,
                   create(newRank, n, secret, std::move(listener), wait_));
  RETURN_IF_ERROR(impl->connect(std::move(peers), opDeadline()));
  std::vector<uint64_t> hostKeys;
  for (int r : kept) hostKeys.push_back(hostKeyOf(r));
  impl->setHosts(std::move(hostKeys));
  BRAID_LOG(processLogger(), kInfo, kBoot, "rank %d of %d shrank to rank %d of %d", rank_, nranks_,
            newRank, n);
  return std::unique_ptr<Bootstrap>(new Bootstrap(std::move(impl)));
}

}  // namespace braid
