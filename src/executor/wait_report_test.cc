#include "executor/wait_report.h"

#include <gtest/gtest.h>
#include <time.h>

#include <csignal>
#include <string>

namespace braid {
namespace {

int64_t secondsAgoNs(double seconds) {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec - static_cast<int64_t>(seconds * 1e9);
}

TEST(WaitReport, ShowsEachBlockedRunWithItsWaitUntilCleared) {
  const std::string idle = waitReport();
  EXPECT_NE(idle.find("no call of this process"), std::string::npos) << idle;
  {
    WaitSlot slot;
    EXPECT_FALSE(slot.shown());
    slot.publish({{"rank 1/4", "allreduce(count=8, float, sum) #3 [ring]",
                   "lane 0 at step 2/6 (recvReduceSend waiting on rank 0)"},
                  {"rank 0/2", "send(count=4, float) #1 [p2p]", "lane 0 at step 0/1"}},
                 secondsAgoNs(12.3));
    EXPECT_TRUE(slot.shown());
    const std::string report = waitReport();
    EXPECT_NE(report.find("rank 1/4 (thread "), std::string::npos) << report;
    EXPECT_NE(report.find("in allreduce(count=8, float, sum) #3 [ring]: no progress for 12.3 s, "
                          "lane 0 at step 2/6 (recvReduceSend waiting on rank 0)"),
              std::string::npos)
        << report;
    EXPECT_NE(report.find("rank 0/2 (thread "), std::string::npos) << report;
    slot.clear();
    EXPECT_FALSE(slot.shown());
    EXPECT_EQ(waitReport(), idle);
    slot.publish({{"rank 2/3", "broadcast(count=1, int32, root=0) #9 [tree]", "lane 1"}},
                 secondsAgoNs(1));
  }
  EXPECT_EQ(waitReport(), idle) << "a slot leaves the report when it goes";
}

TEST(WaitReport, SignalsThatCannotBeCaughtAreRefused) {
  EXPECT_EQ(enableWaitReportSignal(SIGKILL).code(), braidInvalidArgument);
  EXPECT_EQ(enableWaitReportSignal(0).code(), braidInvalidArgument);
}

}  // namespace
}  // namespace braid
