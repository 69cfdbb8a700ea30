// braidCommAbort from another thread: the call blocked on the communicator returns at once with
// an error that says so, the handle is gone, nothing leaks, and the other ranks - which had not
// even reached the call - fail with braidRemoteError naming the aborted rank instead of hanging.
// A rank that aborts right after a call (no barrier, as NCCL programs do) lets its peers finish
// that call, whatever the algorithm, and fails their next one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "braid.h"
#include "tests/fault/fault_harness.h"
#include "tests/support/multiprocess.h"

namespace braid::testing {
namespace {

constexpr int kRanks = 3;
constexpr double kTimeout = 20;
constexpr double kSlack = 3;
constexpr double kAbortAfter = 0.3;

std::string abortingRank(braidComm_t comm, const ProcessResources& before) {
  Checks checks("rank 0");
  std::thread watchdog([comm] {
    usleep(static_cast<useconds_t>(kAbortAfter * 1e6));
    (void)braidCommAbort(comm);
  });
  float x = 1, y = 0;
  const double start = nowSeconds();
  // Ranks 1 and 2 are held back: this call can only end by the abort.
  const braidResult_t rc = braidAllReduce(&x, &y, 1, braidFloat32, braidSum, comm, nullptr);
  const double seconds = secondsSince(start);
  const std::string message = braidGetLastError(nullptr);
  watchdog.join();
  board().released = 1;
  checks.expect(rc != braidSuccess, "the aborted call succeeded");
  checks.expect(seconds < kAbortAfter + 1, "the aborted call took " + std::to_string(seconds));
  checks.expect(message.find("abort") != std::string::npos &&
                    message.find("allreduce(count=1") != std::string::npos,
                "the message does not say the allreduce was aborted: " + message);
  int count = 0;
  checks.expect(braidCommCount(comm, &count) == braidInvalidUsage,
                "the aborted handle is still usable");
  const std::string leaks = leaksSince(before);
  checks.expect(leaks.empty(), "leaked after abort:" + leaks);
  return checks.text();
}

std::string waitingRank(int rank, braidComm_t comm, const ProcessResources& before) {
  Checks checks("rank " + std::to_string(rank));
  while (board().released.load() == 0) usleep(1000);
  // The aborted call had posted its data before it blocked, so this one may still complete (with
  // the right result); the next one cannot.
  CallMaker maker(comm, rank, kRanks, 1);
  Timed t = maker.call(TestColl::kAllReduce);
  if (t.rc == braidSuccess) t = maker.call(TestColl::kAllReduce);
  const std::string got = std::string(braidGetErrorString(t.rc)) + " after " +
                          std::to_string(t.seconds) + " s: " + t.message;
  checks.expect(t.rc == braidRemoteError, "expected braidRemoteError, got " + got);
  checks.expect(t.seconds < kTimeout + kSlack, "too slow: " + got);
  checks.expect(t.message.find("rank 0 failed") != std::string::npos &&
                    t.message.find("abort") != std::string::npos,
                "the message does not name the aborted rank 0: " + got);
  braidResult_t async = braidSuccess;
  checks.expect(braidCommGetAsyncError(comm, &async) == braidSuccess && async == t.rc,
                std::string("async error ") + braidGetErrorString(async));
  checks.expect(braidCommDestroy(comm) == braidSuccess, "destroy failed");
  const std::string leaks = leaksSince(before);
  checks.expect(leaks.empty(), "leaked after destroy:" + leaks);
  return checks.text();
}

TEST(Abort, FromAnotherThreadUnblocksTheCallAndFailsThePeers) {
  resetBoard();
  RootProcess root(kTimeout + 5);
  ASSERT_TRUE(root.ok()) << root.error();
  const std::vector<RankOutcome> outcomes = runRanks(
      kRanks, root.id(),
      [](int rank, const braidUniqueId& rid) -> std::string {
        const ProcessResources before = snapshotResources();
        Settings settings{"BRAID_TIMEOUT=" + std::to_string(kTimeout)};
        braidComm_t comm = nullptr;
        if (braidCommInitRankConfig(&comm, kRanks, rid, rank, settings.config()) != braidSuccess) {
          return std::string("init failed: ") + braidGetLastError(nullptr);
        }
        return rank == 0 ? abortingRank(comm, before) : waitingRank(rank, comm, before);
      },
      kTimeout + 20);
  EXPECT_EQ(failures(outcomes), "");
}

TEST(Abort, BetweenCallsFailsThePeersNextCall) {
  resetBoard();
  RootProcess root(kTimeout + 5);
  ASSERT_TRUE(root.ok()) << root.error();
  const std::vector<RankOutcome> outcomes = runRanks(
      kRanks, root.id(),
      [](int rank, const braidUniqueId& rid) -> std::string {
        Checks checks("rank " + std::to_string(rank));
        Settings settings{"BRAID_TIMEOUT=" + std::to_string(kTimeout)};
        braidComm_t comm = nullptr;
        if (braidCommInitRankConfig(&comm, kRanks, rid, rank, settings.config()) != braidSuccess) {
          return std::string("init failed: ") + braidGetLastError(nullptr);
        }
        CallMaker maker(comm, rank, kRanks, 1000);
        checks.expect(maker.call(TestColl::kAllReduce).rc == braidSuccess, "first call failed");
        if (rank == 1) {
          // Idle, aborted, and still alive (so no peer can see it exit): it must tell them.
          checks.expect(braidCommAbort(comm) == braidSuccess, "abort failed");
          const double start = nowSeconds();
          while (board().ready.load() < kRanks - 1 && secondsSince(start) < kTimeout + kSlack) {
            usleep(1000);
          }
          return checks.text();
        }
        const Timed t = maker.call(TestColl::kAllReduce);
        board().ready.fetch_add(1);
        const std::string got = std::string(braidGetErrorString(t.rc)) + " after " +
                                std::to_string(t.seconds) + " s: " + t.message;
        checks.expect(t.rc == braidRemoteError, "expected braidRemoteError, got " + got);
        checks.expect(t.seconds < kTimeout + kSlack, "too slow: " + got);
        checks.expect(t.message.find("rank 1 failed") != std::string::npos &&
                          t.message.find("abort") != std::string::npos,
                      "the message does not name the aborted rank 1: " + got);
        checks.expect(braidCommDestroy(comm) == braidSuccess, "destroy failed");
        return checks.text();
      },
      kTimeout + 20);
  EXPECT_EQ(failures(outcomes), "");
}

class AbortRightAfterACall : public ::testing::TestWithParam<std::string> {};

TEST_P(AbortRightAfterACall, LetsThePeersFinishItAndFailsTheirNextCall) {
  constexpr int kRanksHere = 4;
  constexpr int kRounds = 8;
  resetBoard();
  RootProcess root(kTimeout + 5);
  ASSERT_TRUE(root.ok()) << root.error();
  const std::string algo = GetParam();
  const std::vector<RankOutcome> outcomes = runRanks(
      kRanksHere, root.id(),
      [&algo](int rank, const braidUniqueId& rid) -> std::string {
        Checks checks("rank " + std::to_string(rank));
        Settings settings{"BRAID_TIMEOUT=" + std::to_string(kTimeout),
                          "BRAID_ALGO=allreduce:" + algo};
        braidComm_t parent = nullptr;
        if (braidCommInitRankConfig(&parent, kRanksHere, rid, rank, settings.config()) !=
            braidSuccess) {
          return std::string("init failed: ") + braidGetLastError(nullptr);
        }
        for (int round = 0; round < kRounds; ++round) {
          braidComm_t comm = nullptr;
          if (braidCommSplit(parent, 0, rank, &comm) != braidSuccess) {
            checks.expect(false, std::string("split failed: ") + braidGetLastError(nullptr));
            break;
          }
          const int quitter = round % kRanksHere;
          CallMaker maker(comm, rank, kRanksHere, 1 + 1000 * (round % 2));
          const Timed first = maker.call(TestColl::kAllReduce);
          checks.expect(first.rc == braidSuccess,
                        "round " + std::to_string(round) + ": the call before rank " +
                            std::to_string(quitter) + "'s abort failed: " + first.message);
          if (rank == quitter) {
            checks.expect(braidCommAbort(comm) == braidSuccess, "abort failed");
            continue;
          }
          const Timed next = maker.call(TestColl::kAllReduce);
          const std::string got = std::string(braidGetErrorString(next.rc)) + " after " +
                                  std::to_string(next.seconds) + " s: " + next.message;
          checks.expect(next.rc == braidRemoteError &&
                            next.message.find("rank " + std::to_string(quitter) + " failed") !=
                                std::string::npos,
                        "round " + std::to_string(round) +
                            ": expected braidRemoteError naming "
                            "rank " +
                            std::to_string(quitter) + ", got " + got);
          checks.expect(next.seconds < kSlack, "too slow: " + got);
          checks.expect(braidCommDestroy(comm) == braidSuccess, "destroy failed");
        }
        checks.expect(braidCommDestroy(parent) == braidSuccess, "parent destroy failed");
        return checks.text();
      },
      kTimeout + 20);
  EXPECT_EQ(failures(outcomes), "");
}

INSTANTIATE_TEST_SUITE_P(EveryAllReduce, AbortRightAfterACall,
                         ::testing::Values("ring", "tree", "rhd", "rd", "direct", "hier",
                                           "hier_rhd"));

}  // namespace
}  // namespace braid::testing
