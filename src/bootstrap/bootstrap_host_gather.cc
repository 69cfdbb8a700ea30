// The bootstrap's all-gather through one rank per host: a rank that is not its host's leader
// sends one message and receives one, where dissemination has every rank send and receive
// ceil(log2 n); on hosts of 8 that is about a third of the messages, and their count no longer
// grows with the rank count (docs/scale.md, "Bootstrap collectives through a leader per host").
#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "bootstrap/bootstrap_impl.h"

namespace braid {

HostGroups HostGroups::fromKeys(const std::vector<uint64_t>& hostOfRank) {
  HostGroups groups;
  groups.hostOf.assign(hostOfRank.size(), 0);
  std::unordered_map<uint64_t, int> indexOfKey;
  for (size_t r = 0; r < hostOfRank.size(); ++r) {
    auto [it, added] = indexOfKey.emplace(hostOfRank[r], static_cast<int>(groups.members.size()));
    if (added) groups.members.emplace_back();
    groups.members[size_t(it->second)].push_back(static_cast<int>(r));
    groups.hostOf[r] = it->second;
  }
  size_t largest = 0;
  for (const std::vector<int>& m : groups.members) largest = std::max(largest, m.size());
  groups.gatherByHost = groups.members.size() > 1 && largest <= size_t(kHostGatherMaxRanks);
  return groups;
}

Status Bootstrap::Impl::gatherByHost(uint8_t* data, size_t bytesPerRank, RingOp op,
                                     const Deadline& deadline) {
  const uint32_t seq = static_cast<uint32_t>(ringSeq_++);
  // Round 0 carries blocks to the leaders, 1.. the leaders' dissemination, the last the tables.
  auto tagOf = [seq](uint32_t round) { return kDisseminationTag | ((seq & 0xffu) << 8) | round; };
  constexpr uint32_t kToLeader = 0, kFromLeader = 0xfe;
  const std::string what = rankText(rank_) + ": " + opName(op);
  faultPoint("ring:step", listenAddress_);
  const int host = hosts_.hostOf[size_t(rank_)];
  const std::vector<int>& mine = hosts_.members[size_t(host)];
  const int leader = mine.front();
  const size_t tableBytes = bytesPerRank * size_t(nranks_);
  auto sendTo = [&](int to, uint32_t round, const void* bytes, size_t count,
                    const std::string& step) -> Status {
    Status sent = sendFrame(Purpose::kGather, to, static_cast<uint16_t>(op), tagOf(round), bytes,
                            count, deadline, step + ": send to " + rankText(to));
    return sent.ok() ? sent : namingTheCause(sent, step, deadline);
  };
  auto blockOf = [&](int r) { return data + bytesPerRank * size_t(r); };

  if (rank_ != leader) {
    const std::string step = what + " through host leader " + rankText(leader);
    RETURN_IF_ERROR(sendTo(leader, kToLeader, blockOf(rank_), bytesPerRank, step));
    // The table holds this rank's own block too, as sent.
    return receiveGathered(leader, tagOf(kFromLeader), op, data, tableBytes, step, deadline);
  }

  const std::string gatherStep = what + ": gathering its host";
  for (size_t i = 1; i < mine.size(); ++i) {
    RETURN_IF_ERROR(receiveGathered(mine[i], tagOf(kToLeader), op, blockOf(mine[i]), bytesPerRank,
                                    gatherStep, deadline));
  }
  // Among the leaders, dissemination in whole hosts: `held` is host, host+1, ... each host's
  // blocks in its ranks' order; a round sends the first hosts held and appends what comes back.
  const int hostCount = static_cast<int>(hosts_.members.size());
  auto hostBytes = [&](int h) {
    return bytesPerRank * hosts_.members[size_t(h % hostCount)].size();
  };
  std::vector<uint8_t> held;
  held.reserve(tableBytes);
  for (int r : mine) held.insert(held.end(), blockOf(r), blockOf(r) + bytesPerRank);
  int have = 1;
  size_t heldBytes = held.size();
  for (int round = 0, distance = 1; have < hostCount; ++round, distance *= 2) {
    const int count = std::min(distance, hostCount - have);
    const int to = hosts_.members[size_t((host - distance + hostCount) % hostCount)].front();
    const int from = hosts_.members[size_t((host + distance) % hostCount)].front();
    size_t sendBytes = 0, recvBytes = 0;
    for (int i = 0; i < count; ++i) {
      sendBytes += hostBytes(host + i);
      recvBytes += hostBytes(host + have + i);
    }
    const std::string step = what + " among host leaders, round " + std::to_string(round);
    RETURN_IF_ERROR(sendTo(to, uint32_t(round) + 1, held.data(), sendBytes, step));
    held.resize(heldBytes + recvBytes);
    RETURN_IF_ERROR(receiveGathered(from, tagOf(uint32_t(round) + 1), op, held.data() + heldBytes,
                                    recvBytes, step, deadline));
    heldBytes += recvBytes;
    have += count;
  }
  size_t offset = 0;
  for (int i = 0; i < hostCount && bytesPerRank > 0; ++i) {
    for (int r : hosts_.members[size_t((host + i) % hostCount)]) {
      std::memcpy(blockOf(r), held.data() + offset, bytesPerRank);
      offset += bytesPerRank;
    }
  }
  const std::string scatterStep = what + ": returning the table to its host";
  for (size_t i = 1; i < mine.size(); ++i) {
    RETURN_IF_ERROR(sendTo(mine[i], kFromLeader, data, tableBytes, scatterStep));
  }
  return okStatus();
}

}  // namespace braid
