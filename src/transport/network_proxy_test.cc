#include "transport/network_proxy.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

namespace braid {
namespace {

// A proxy without a thread or a wire: the test drives its loops and records what they send.
class RecordingProxy final : public NetworkProxy {
 public:
  static std::unique_ptr<RecordingProxy> make(int rank, std::vector<int> links) {
    ProxyOptions options;
    options.rank = rank;
    options.nranks = static_cast<int>(links.size());
    options.maxChannels = 2;
    options.nslots = 2;
    options.slotBytes = 64;
    for (size_t r = 0; r < links.size(); ++r) {
      options.peerNames.push_back("rank " + std::to_string(r) + " (host" + std::to_string(r) + ")");
    }
    std::unique_ptr<RecordingProxy> p(new RecordingProxy(std::move(options)));
    EXPECT_TRUE(p->setUpFifos(links).ok());
    EXPECT_TRUE(p->openWakeup(1).ok());
    return p;
  }
  ~RecordingProxy() override { close(false, 0); }

  using NetworkProxy::fifos;
  using NetworkProxy::linkClosed;
  using NetworkProxy::noticeArrived;
  using NetworkProxy::peerDown;
  using NetworkProxy::recordFailure;
  using NetworkProxy::sendCredits;
  using NetworkProxy::sendsFlushed;

  /// (peer, channel, seq) of each slot the send loop handed over, at most `room` of them.
  std::vector<std::tuple<int, int, uint64_t>> sendPosted(int room) {
    std::vector<std::tuple<int, int, uint64_t>> sent;
    fifos().refreshOpened();
    NetworkProxy::sendPosted([](size_t, int, int) { return true; },
                             [&](size_t, int peer, int channel, const FifoView&, uint64_t seq) {
                               if (static_cast<int>(sent.size()) == room) return false;
                               sent.emplace_back(peer, channel, seq);
                               return true;
                             });
    return sent;
  }
  /// (peer, channel, tail) of each credit the credit loop handed over.
  std::vector<std::tuple<int, int, uint64_t>> returnCredits() {
    std::vector<std::tuple<int, int, uint64_t>> sent;
    fifos().refreshOpened();
    NetworkProxy::returnCredits([](size_t, int, int) { return true; },
                                [&](size_t, int peer, int channel, uint64_t tail) {
                                  sent.emplace_back(peer, channel, tail);
                                  return true;
                                });
    return sent;
  }
  /// The peers the notice loop handed the notice to (nullopt: it did not run).
  std::optional<std::vector<int>> sendNotice() {
    std::vector<int> to;
    if (!NetworkProxy::sendNotice([&](int peer, const Notice& notice) {
          EXPECT_EQ(notice.origin, options().rank);
          to.push_back(peer);
        })) {
      return std::nullopt;
    }
    return to;
  }

 private:
  explicit RecordingProxy(ProxyOptions options)
      : NetworkProxy(std::move(options), "test transport") {}
  void run() override {}
};

TEST(NetworkProxy, SendLoopHandsOverPostedSlotsWithinTheCreditWindowInOrder) {
  std::unique_ptr<RecordingProxy> p = RecordingProxy::make(0, {0, 1, 2});
  FifoView to1 = p->sendFifo(1, 1);
  FifoView to2 = p->sendFifo(2, 0);
  EXPECT_TRUE(p->sendPosted(10).empty()) << "nothing posted";
  to1.control->head.store(3);
  to2.control->head.store(1);
  using Sent = std::vector<std::tuple<int, int, uint64_t>>;
  EXPECT_EQ(p->sendPosted(1), (Sent{{1, 1, 0}})) << "no room for more on the wire";
  EXPECT_EQ(p->sendPosted(10), (Sent{{1, 1, 1}, {2, 0, 0}})) << "two slots free at rank 1";
  EXPECT_TRUE(p->sendPosted(10).empty());
  EXPECT_TRUE(p->sendCredits(p->fifos().index(1, 1)).takeCredit(1));
  EXPECT_EQ(p->sendPosted(10), (Sent{{1, 1, 2}}));
  to2.control->head.store(2);
  p->peerDown(2);
  EXPECT_TRUE(p->sendPosted(10).empty()) << "not to a peer that is gone";
}

TEST(NetworkProxy, CreditLoopPassesOnEachTailTheRankFreedOnce) {
  std::unique_ptr<RecordingProxy> p = RecordingProxy::make(1, {1, 0, 1});
  FifoView from0 = p->recvFifo(0, 0);
  FifoView from2 = p->recvFifo(2, 1);
  using Sent = std::vector<std::tuple<int, int, uint64_t>>;
  EXPECT_TRUE(p->returnCredits().empty());
  from0.control->tail.store(1);
  from2.control->tail.store(2);
  EXPECT_EQ(p->returnCredits(), (Sent{{0, 0, 1}, {2, 1, 2}}));
  EXPECT_TRUE(p->returnCredits().empty()) << "already passed on";
  from0.control->tail.store(3);
  EXPECT_EQ(p->returnCredits(), (Sent{{0, 0, 3}}));
}

TEST(NetworkProxy, NoticeGoesOnceToEveryLinkedPeerStillUp) {
  std::unique_ptr<RecordingProxy> p = RecordingProxy::make(0, {0, 2, 0, 1});
  EXPECT_FALSE(p->sendNotice()) << "nothing to tell";
  EXPECT_TRUE(p->sendsFlushed());
  p->peerDown(3);
  p->notifyFailure(0, PeerFailure{remoteError("rank 0 aborted"), 4});
  p->notifyFailure(0, PeerFailure{remoteError("again"), 5});  // the first notice wins
  EXPECT_FALSE(p->sendsFlushed()) << "a flush waits for the notice";
  EXPECT_EQ(p->sendNotice(), std::vector<int>{1});
  EXPECT_FALSE(p->sendNotice()) << "sent once";
  EXPECT_TRUE(p->sendsFlushed());
}

TEST(NetworkProxy, KeepsTheFirstFailureAndEachPeersFirstNotice) {
  std::unique_ptr<RecordingProxy> p = RecordingProxy::make(0, {0, 1, 1});
  EXPECT_FALSE(p->failure());
  p->recordFailure("bad frame");
  p->recordFailure("worse frame");
  ASSERT_TRUE(p->failure());
  EXPECT_EQ(p->failure()->code(), braidRemoteError);
  EXPECT_EQ(p->failure()->message(), "test transport: bad frame");

  p->noticeArrived(2, 2, braidInvalidUsage, 7, "mismatch");
  p->noticeArrived(1, 9, braidSuccess, 3, "gone");  // an origin out of range, no error code
  ASSERT_TRUE(p->peerFailure(2));
  EXPECT_EQ(p->peerFailure(2)->status.code(), braidInvalidUsage);
  EXPECT_EQ(p->peerFailure(2)->status.message(), "rank 2 (host2) failed: mismatch");
  ASSERT_TRUE(p->peerFailure(kAnyPeer));
  EXPECT_EQ(p->peerFailure(kAnyPeer)->status.code(), braidRemoteError);
  EXPECT_EQ(p->peerFailure(kAnyPeer)->status.message(), "rank 9 failed: gone");
  EXPECT_EQ(p->peerFailure(kAnyPeer)->collectivesDone, 3u);
}

TEST(NetworkProxy, APeerIsAliveUntilItsLastLinkCloses) {
  std::unique_ptr<RecordingProxy> p = RecordingProxy::make(0, {0, 2, 0, 1});
  EXPECT_TRUE(p->peerAlive(1));
  EXPECT_TRUE(p->peerAlive(2)) << "not linked: nothing says it is gone";
  EXPECT_EQ(p->linkClosed(1), 1);
  EXPECT_TRUE(p->peerAlive(1)) << "one link left";
  EXPECT_EQ(p->linkClosed(1), 0);
  EXPECT_FALSE(p->peerAlive(1));
  EXPECT_TRUE(p->peerDown(3));
  EXPECT_FALSE(p->peerDown(3)) << "already down";
  EXPECT_FALSE(p->peerAlive(3));
}

}  // namespace
}  // namespace braid
