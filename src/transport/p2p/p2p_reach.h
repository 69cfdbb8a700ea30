// Which ranks' GPUs write into which ranks' device memory (the p2p transport's matrix). Only ranks
// of one host can, so what is kept, exchanged and scanned is each host's block of the matrix:
// O(n x ranks per host) bytes, never O(n^2), which at thousands of ranks would be gigabytes per
// rank. Pure host code, unit-tested in every build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace braid {

class P2pReach {
 public:
  P2pReach() = default;
  /// hostOf[r]: rank r's host (equal values share a host). No rank links another yet.
  explicit P2pReach(const std::vector<uint64_t>& hostOf);

  int nranks() const { return static_cast<int>(local_.size()); }
  /// Bytes of a rank's row in the exchange: the most ranks any host holds.
  int rowBytes() const { return rowBytes_; }
  /// Every host's ranks, in rank order, hosts in order of their first rank.
  const std::vector<std::vector<int>>& hosts() const { return hosts_; }
  /// The ranks of r's host, in rank order; r's row byte i stands for the i-th of them.
  const std::vector<int>& hostRanks(int r) const { return hosts_[size_t(host_[size_t(r)])]; }

  /// Fills in sender s's row: row[i] != 0 where s reaches the i-th rank of its host. Bytes past
  /// the host's rank count are ignored.
  void setRow(int s, const uint8_t* row);
  /// Marks one pair; a pair on two hosts cannot be linked and is left out.
  void set(int sender, int receiver, bool linked);

  /// Whether sender's data reaches receiver (false for ranks out of range or on two hosts).
  bool links(int sender, int receiver) const;
  /// senders[s] for every rank s: whether s reaches `receiver` (the inbox layout's input).
  std::vector<bool> sendersOf(int receiver) const;
  /// Whether some pair of distinct ranks is not linked: more than one host, or a host whose
  /// ranks do not all reach one another.
  bool anyPairUnlinked() const;

 private:
  std::vector<int> host_;                ///< host number per rank
  std::vector<int> local_;               ///< place of each rank among its host's ranks
  std::vector<std::vector<int>> hosts_;  ///< ranks per host
  std::vector<size_t> rowStart_;         ///< where each rank's row starts in bits_
  std::vector<uint8_t> bits_;            ///< rows, each as long as its host's rank count
  int rowBytes_ = 0;
};

}  // namespace braid
