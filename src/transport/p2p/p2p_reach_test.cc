#include "transport/p2p/p2p_reach.h"

#include <gtest/gtest.h>

#include <vector>

namespace braid {
namespace {

// Ranks 0, 2, 4 on host 7; ranks 1, 3 on host 9.
P2pReach twoHosts() { return P2pReach({7, 9, 7, 9, 7}); }

TEST(P2pReach, RowsAreAsWideAsTheLargestHost) {
  const P2pReach reach = twoHosts();
  EXPECT_EQ(reach.nranks(), 5);
  EXPECT_EQ(reach.rowBytes(), 3);
  EXPECT_EQ(reach.hostRanks(4), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(reach.hostRanks(1), (std::vector<int>{1, 3}));
}

TEST(P2pReach, ARowNamesTheRanksOfItsHostInOrder) {
  P2pReach reach = twoHosts();
  const uint8_t row2[3] = {1, 0, 1};  // rank 2 reaches ranks 0 and 4
  const uint8_t row3[3] = {1, 0, 1};  // rank 3 reaches rank 1; the third byte is past its host
  reach.setRow(2, row2);
  reach.setRow(3, row3);
  EXPECT_TRUE(reach.links(2, 0));
  EXPECT_FALSE(reach.links(2, 2));
  EXPECT_TRUE(reach.links(2, 4));
  EXPECT_TRUE(reach.links(3, 1));
  EXPECT_FALSE(reach.links(3, 3));
  EXPECT_FALSE(reach.links(0, 2)) << "rows are one way";
  EXPECT_EQ(reach.sendersOf(0), (std::vector<bool>{false, false, true, false, false}));
  EXPECT_EQ(reach.sendersOf(1), (std::vector<bool>{false, false, false, true, false}));
}

TEST(P2pReach, RanksOnTwoHostsNeverLink) {
  P2pReach reach = twoHosts();
  reach.set(0, 1, true);
  EXPECT_FALSE(reach.links(0, 1));
  EXPECT_FALSE(reach.links(-1, 0));
  EXPECT_FALSE(reach.links(0, 5));
  EXPECT_TRUE(reach.anyPairUnlinked());
}

TEST(P2pReach, OneHostWhoseRanksAllReachEachOtherHasNoUnlinkedPair) {
  P2pReach reach({3, 3, 3});
  for (int s = 0; s < 3; ++s) {
    for (int r = 0; r < 3; ++r) reach.set(s, r, s != r);
  }
  EXPECT_FALSE(reach.anyPairUnlinked());
  reach.set(2, 1, false);
  EXPECT_TRUE(reach.anyPairUnlinked());
  EXPECT_TRUE(reach.links(1, 2));
}

TEST(P2pReach, ThousandsOfRanksKeepOnlyTheirHostsBlocks) {
  // 4096 ranks in hosts of 8: 8 bytes a rank, where the whole matrix would be 4096.
  std::vector<uint64_t> hosts(4096);
  for (size_t r = 0; r < hosts.size(); ++r) hosts[r] = r / 8;
  P2pReach reach(hosts);
  EXPECT_EQ(reach.rowBytes(), 8);
  const uint8_t all[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  reach.setRow(4095, all);
  EXPECT_TRUE(reach.links(4095, 4088));
  EXPECT_FALSE(reach.links(4095, 4087));
}

}  // namespace
}  // namespace braid
