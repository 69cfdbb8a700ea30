#include "transport/peer_failures.h"

#include <gtest/gtest.h>

namespace braid {
namespace {

TEST(PeerFailures, KeepsEachPeersFirstNoticeAndAnswersAnyWithTheLeastAdvanced) {
  PeerFailures notices(4);
  EXPECT_FALSE(notices.any());
  EXPECT_FALSE(notices.get(kAnyPeer));
  notices.record(2, PeerFailure{remoteError("rank 2 aborted"), 5});
  notices.record(2, PeerFailure{remoteError("rank 2 again"), 1});  // not the first: ignored
  notices.record(1, PeerFailure{invalidUsage("rank 1 mismatch"), 3});
  notices.record(7, PeerFailure{remoteError("no such rank"), 0});  // out of range: ignored
  notices.record(-1, PeerFailure{remoteError("no such rank"), 0});
  EXPECT_TRUE(notices.any());
  ASSERT_TRUE(notices.get(2));
  EXPECT_EQ(notices.get(2)->collectivesDone, 5u);
  EXPECT_EQ(notices.get(2)->status.message(), "rank 2 aborted");
  EXPECT_FALSE(notices.get(0));
  EXPECT_FALSE(notices.get(9));
  ASSERT_TRUE(notices.get(kAnyPeer));
  EXPECT_EQ(notices.get(kAnyPeer)->status.code(), braidInvalidUsage);
  EXPECT_EQ(notices.get(kAnyPeer)->collectivesDone, 3u);
}

}  // namespace
}  // namespace braid
