#include "transport/proxy_fifos.h"

#include <gtest/gtest.h>

#include <cstring>

#include "transport/slot_credits.h"

namespace braid {
namespace {

TEST(ProxyFifos, LaysOutBothFifosOfEveryChannelOfLinkedPeersOnly) {
  ProxyFifos fifos;
  ASSERT_TRUE(fifos.allocate({true, false, true}, 2, 4, 128, "test").ok());
  EXPECT_TRUE(fifos.linked(0));
  EXPECT_FALSE(fifos.linked(1));
  EXPECT_TRUE(fifos.linked(2));
  EXPECT_FALSE(fifos.linked(3));
  EXPECT_FALSE(fifos.linked(-1));
  EXPECT_EQ(fifos.slot(2), 1);
  EXPECT_EQ(fifos.count(), 6u);
  EXPECT_EQ(fifos.index(2, 1), 5u);
  EXPECT_EQ(fifos.peerOf(5), 2);
  EXPECT_EQ(fifos.channelOf(5), 1);
  EXPECT_EQ(fifos.fifoBytes() % 4096, 0u);
  // Every FIFO is distinct, starts empty and holds its slots after its headers.
  std::vector<char*> seen;
  for (int peer : {0, 2}) {
    for (int channel = 0; channel < 2; ++channel) {
      for (bool send : {true, false}) {
        const FifoView v = fifos.view(fifos.index(peer, channel), send);
        EXPECT_EQ(v.nslots, 4u);
        EXPECT_EQ(v.slotBytes, 128u);
        EXPECT_EQ(v.control->head.load(), 0u);
        EXPECT_EQ(v.control->tail.load(), 0u);
        EXPECT_EQ(v.data, reinterpret_cast<char*>(v.control) + fifos.metaBytes());
        std::memset(v.data, 1, size_t(v.nslots) * v.slotBytes);  // mapped and writable
        for (char* other : seen) EXPECT_NE(other, reinterpret_cast<char*>(v.control));
        seen.push_back(reinterpret_cast<char*>(v.control));
      }
    }
  }
}

TEST(ProxyFifos, NoLinkedPeerMapsNothing) {
  ProxyFifos fifos;
  ASSERT_TRUE(fifos.allocate({false, false}, 3, 2, 64, "test").ok());
  EXPECT_FALSE(fifos.linked(0));
  EXPECT_EQ(fifos.count(), 6u);
  EXPECT_FALSE(fifos.refreshOpened());
}

TEST(ProxyFifos, TheProxySeesWhatTheRankOpenedOnceItLooks) {
  ProxyFifos fifos;
  ASSERT_TRUE(fifos.allocate({false, true, true}, 2, 2, 64, "test").ok());
  EXPECT_FALSE(fifos.refreshOpened());
  EXPECT_TRUE(fifos.openSend(fifos.index(2, 1)));
  EXPECT_FALSE(fifos.openSend(fifos.index(2, 1))) << "opened once";
  EXPECT_TRUE(fifos.openRecv(fifos.index(1, 0)));
  EXPECT_TRUE(fifos.openSend(fifos.index(1, 0)));
  EXPECT_TRUE(fifos.openedSends().empty()) << "not before the proxy looks";
  EXPECT_TRUE(fifos.refreshOpened());
  EXPECT_EQ(fifos.openedSends(), (std::vector<int>{2, 5}));
  EXPECT_EQ(fifos.openedRecvs(), (std::vector<int>{2}));
  EXPECT_FALSE(fifos.refreshOpened()) << "nothing opened since";
}

TEST(SlotCredits, ASenderQueuesOnlyWhatWasPostedAndFitsTheReceiversFreeSlots) {
  SendCredits credits;
  EXPECT_FALSE(credits.mayQueue(/*head=*/0, /*nslots=*/2)) << "nothing posted";
  int queued = 0;
  while (credits.mayQueue(/*head=*/5, 2)) {
    ++credits.queued;
    ++queued;
  }
  EXPECT_EQ(queued, 2) << "two slots free at the receiver";
  EXPECT_FALSE(credits.takeCredit(3)) << "frees a slot never queued";
  EXPECT_TRUE(credits.takeCredit(1));
  EXPECT_FALSE(credits.takeCredit(0)) << "goes back";
  EXPECT_EQ(credits.creditTail, 1u);
  EXPECT_TRUE(credits.mayQueue(5, 2));
  EXPECT_TRUE(credits.takeCredit(2));
  EXPECT_TRUE(credits.takeCredit(2)) << "a repeated credit changes nothing";
}

}  // namespace
}  // namespace braid
