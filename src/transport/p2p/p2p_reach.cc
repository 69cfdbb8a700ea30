#include "transport/p2p/p2p_reach.h"

#include <algorithm>
#include <unordered_map>

namespace braid {

P2pReach::P2pReach(const std::vector<uint64_t>& hostOf) {
  const size_t n = hostOf.size();
  host_.resize(n);
  local_.resize(n);
  rowStart_.resize(n);
  std::unordered_map<uint64_t, int> number;
  for (size_t r = 0; r < n; ++r) {
    auto [it, added] = number.try_emplace(hostOf[r], static_cast<int>(hosts_.size()));
    if (added) hosts_.emplace_back();
    host_[r] = it->second;
    local_[r] = static_cast<int>(hosts_[size_t(it->second)].size());
    hosts_[size_t(it->second)].push_back(static_cast<int>(r));
  }
  size_t total = 0;
  for (size_t r = 0; r < n; ++r) {
    const size_t width = hosts_[size_t(host_[r])].size();
    rowStart_[r] = total;
    total += width;
    rowBytes_ = std::max(rowBytes_, static_cast<int>(width));
  }
  bits_.assign(total, 0);
}

void P2pReach::setRow(int s, const uint8_t* row) {
  const size_t width = hostRanks(s).size();
  for (size_t i = 0; i < width; ++i) bits_[rowStart_[size_t(s)] + i] = row[i] != 0 ? 1 : 0;
}

void P2pReach::set(int sender, int receiver, bool linked) {
  if (sender < 0 || receiver < 0 || sender >= nranks() || receiver >= nranks()) return;
  if (host_[size_t(sender)] != host_[size_t(receiver)]) return;
  bits_[rowStart_[size_t(sender)] + size_t(local_[size_t(receiver)])] = linked ? 1 : 0;
}

bool P2pReach::links(int sender, int receiver) const {
  if (sender < 0 || receiver < 0 || sender >= nranks() || receiver >= nranks()) return false;
  if (host_[size_t(sender)] != host_[size_t(receiver)]) return false;
  return bits_[rowStart_[size_t(sender)] + size_t(local_[size_t(receiver)])] != 0;
}

std::vector<bool> P2pReach::sendersOf(int receiver) const {
  std::vector<bool> senders(size_t(nranks()), false);
  if (receiver < 0 || receiver >= nranks()) return senders;
  for (int s : hostRanks(receiver)) senders[size_t(s)] = links(s, receiver);
  return senders;
}

bool P2pReach::anyPairUnlinked() const {
  if (hosts_.size() > 1) return true;
  for (int s = 0; s < nranks(); ++s) {
    for (int r : hostRanks(s)) {
      if (r != s && !links(s, r)) return true;
    }
  }
  return false;
}

}  // namespace braid
