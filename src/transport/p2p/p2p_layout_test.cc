#include "transport/p2p/p2p_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace braid {
namespace {

TEST(P2pInboxLayout, FifosOfSendersAreDisjointAndAligned) {
  // Ranks 0, 2 and 3 send into this inbox, rank 1 (and this rank, 4) do not.
  const std::vector<bool> senders = {true, false, true, true, false};
  const P2pInboxLayout layout(senders, 3, 4, 1000);
  EXPECT_EQ(layout.slotBytes(), 1024u);  // rounded up to the alignment
  EXPECT_TRUE(layout.hasSender(0));
  EXPECT_FALSE(layout.hasSender(1));
  EXPECT_FALSE(layout.hasSender(4));
  EXPECT_FALSE(layout.hasSender(-1));
  EXPECT_FALSE(layout.hasSender(5));
  EXPECT_EQ(layout.dataOffset() % P2pInboxLayout::kAlign, 0u);
  EXPECT_GE(layout.dataOffset(), P2pInboxLayout::kHeadersOffset + 4 * sizeof(SlotHeader));
  EXPECT_EQ(layout.fifoStride(), layout.dataOffset() + 4 * 1024u);

  std::vector<std::pair<size_t, size_t>> ranges;
  for (int s : {0, 2, 3}) {
    for (int ch = 0; ch < 3; ++ch) {
      const size_t at = layout.fifoOffset(s, ch);
      EXPECT_EQ(at % P2pInboxLayout::kAlign, 0u);
      ranges.emplace_back(at, at + layout.fifoStride());
    }
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) EXPECT_LE(ranges[i - 1].second, ranges[i].first);
  EXPECT_EQ(ranges.back().second, layout.totalBytes());  // 3 senders x 3 channels, no holes
}

TEST(P2pInboxLayout, LowLatencyRingsFollowTheSlotsAndLeaveTheRestAsItWas) {
  const std::vector<bool> senders = {true, false, true};
  const P2pInboxLayout plain(senders, 2, 4, 1000);
  const P2pInboxLayout lines(senders, 2, 4, 1000, 512);
  EXPECT_EQ(plain.llLines(), 0u);
  EXPECT_EQ(lines.llLines(), 512u);
  // The slots lie where they did; the credits and the lines come after them.
  EXPECT_EQ(lines.dataOffset(), plain.dataOffset());
  EXPECT_EQ(lines.creditsOffset(), plain.fifoStride());
  EXPECT_EQ(lines.creditsOffset() % 64, 0u);
  const size_t firstLine = lines.creditsOffset() + P2pInboxLayout::kLinesAfterCredits;
  EXPECT_EQ(firstLine % 16, 0u);
  EXPECT_GE(lines.fifoStride(), firstLine + 512 * 16);
  EXPECT_EQ(lines.fifoStride() % P2pInboxLayout::kAlign, 0u);
  EXPECT_EQ(lines.fifoOffset(2, 1), 3 * lines.fifoStride());
}

TEST(P2pInboxLayout, AnInboxWithoutSendersIsStillAllocatable) {
  const P2pInboxLayout layout(std::vector<bool>(3, false), 2, 2, 4096);
  EXPECT_GT(layout.totalBytes(), 0u);
  EXPECT_FALSE(layout.hasSender(0));
}

TEST(P2pInboxLayout, SendersAgreeOnOffsets) {
  // Every rank computes the receiver's layout from the same reachability row.
  const std::vector<bool> senders = {false, true, true, false};
  const P2pInboxLayout a(senders, 2, 8, 65536);
  const P2pInboxLayout b(senders, 2, 8, 65536);
  EXPECT_EQ(a.fifoOffset(2, 1), b.fifoOffset(2, 1));
  EXPECT_EQ(a.fifoOffset(1, 0), 0u);
  EXPECT_EQ(a.fifoOffset(2, 0), 2 * a.fifoStride());
}

}  // namespace
}  // namespace braid
