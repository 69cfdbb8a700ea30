// Ranks that disagree: one rank calls a different collective, count, datatype, op or root than the
// others, or skips a call. Every rank must get braidInvalidUsage (a rank whose own part completed
// without hearing from anyone - the root of a broadcast, say - learns it from
// braidCommGetAsyncError and its next call) with both calls described, e.g. "rank 3 called
// broadcast(count=1000, float, root=0) #2 [ring] where rank 0 called allreduce(count=1000, float,
// sum) #2 [ring]", well before the timeout, and the communicator must still be destroyed cleanly.
//
// Detection rests on the descriptor every FIFO slot carries: a mismatch is seen when a slot passes
// between two ranks that disagree. With ring plans (and pairwise all-to-all and send/recv) one
// does, except between broadcast and reduce chains (see noSlotNeedCross). Trees, recursive
// halving/doubling and direct plans route data so that often none does (the ranks then wait until
// BRAID_TIMEOUT, or finish with different results). The enabled tests therefore pin ring plans;
// DISABLED_EveryAlgorithm is the whole matrix under every algorithm and passes once each run also
// checks its call against a ring neighbour's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "braid.h"
#include "tests/fault/fault_harness.h"
#include "tests/support/multiprocess.h"

namespace braid::testing {
namespace {

constexpr int kRanks = 4;
constexpr double kTimeout = 10;
constexpr double kSlack = 3;
constexpr const char* kRingPlans =
    "BRAID_ALGO=allreduce:ring;broadcast:ring;reduce:ring;allgather:ring;reducescatter:ring";

struct Mismatch {
  std::string name;
  CallSpec common;  ///< what every rank but the deviant calls
  CallSpec deviant;
  int deviantRank = 3;
  bool skip = false;  ///< the deviant skips `common` and goes straight to `deviant`
  std::string algo = kRingPlans;
};

// Waits (briefly) until comm reports an asynchronous error; returns it.
braidResult_t asyncErrorSoon(braidComm_t comm) {
  const double start = nowSeconds();
  braidResult_t async = braidSuccess;
  while (braidCommGetAsyncError(comm, &async) == braidSuccess && async == braidSuccess &&
         secondsSince(start) < kSlack) {
    usleep(2000);
  }
  return async;
}

std::string rankBody(const Mismatch& m, int rank, const braidUniqueId& id) {
  Checks checks("rank " + std::to_string(rank) + " (" + m.name + ")");
  const ProcessResources before = snapshotResources();
  Settings settings{"BRAID_TIMEOUT=" + std::to_string(kTimeout), m.algo};
  braidComm_t comm = nullptr;
  if (!checks.expect(braidCommInitRankConfig(&comm, kRanks, id, rank, settings.config()) ==
                         braidSuccess,
                     std::string("init failed: ") + braidGetLastError(nullptr))) {
    return checks.text();
  }
  {
    CallMaker maker(comm, rank, kRanks, 4096);
    // Calls that match first, so sequence numbers and connectors are in use. A rank still
    // finishing one of them when another rank finds the mismatch fails there: the communicator
    // is done for as soon as any rank knows, and that rank's error is what every rank reports.
    Timed t;
    for (TestColl coll : {TestColl::kAllReduce, TestColl::kAllGather}) {
      if (t.rc == braidSuccess) t = maker.call(CallSpec{coll, 64});
    }
    const bool isDeviant = rank == m.deviantRank;
    if (t.rc == braidSuccess) t = maker.call(isDeviant ? m.deviant : m.common);
    if (m.skip && !isDeviant && t.rc == braidSuccess) t = maker.call(m.deviant);
    std::string message = t.message;
    braidResult_t rc = t.rc;
    if (rc == braidSuccess) {
      // Its own part needed nobody (a broadcast root's sends fit in the FIFOs): the others'
      // verdict reaches it as an asynchronous error, and its next call fails with it.
      rc = asyncErrorSoon(comm);
      message = braidGetLastError(comm);
      const Timed next = maker.call(CallSpec{TestColl::kAllReduce, 8});
      checks.expect(next.rc == braidInvalidUsage,
                    std::string("the next call returned ") + braidGetErrorString(next.rc));
    }
    const std::string got = std::string(braidGetErrorString(rc)) + " after " +
                            std::to_string(t.seconds) + " s: " + message;
    checks.expect(rc == braidInvalidUsage, "expected braidInvalidUsage, got " + got);
    checks.expect(t.seconds < kTimeout, "not detected before the timeout: " + got);
    for (const CallSpec& spec : {m.common, m.deviant}) {
      checks.expect(message.find(describeSpec(spec)) != std::string::npos,
                    "the message does not describe " + describeSpec(spec) + ": " + got);
    }
    braidResult_t async = braidSuccess;
    checks.expect(braidCommGetAsyncError(comm, &async) == braidSuccess && async == rc,
                  std::string("async error ") + braidGetErrorString(async));
  }
  checks.expect(braidCommDestroy(comm) == braidSuccess, "destroy failed");
  const std::string leaks = leaksSince(before);
  checks.expect(leaks.empty(), "leaked after destroy:" + leaks);
  return checks.text();
}

void runMismatch(const Mismatch& m) {
  RootProcess root(kTimeout + 5);
  ASSERT_TRUE(root.ok()) << root.error();
  const std::vector<RankOutcome> outcomes = runRanks(
      kRanks, root.id(),
      [&](int rank, const braidUniqueId& rid) { return rankBody(m, rank, rid); },
      /*deadlineSeconds=*/kTimeout + 20);
  EXPECT_EQ(failures(outcomes), "") << m.name;
}

const TestColl kAll[] = {TestColl::kAllReduce,     TestColl::kBroadcast, TestColl::kReduce,
                         TestColl::kAllGather,     TestColl::kReduceScatter,
                         TestColl::kAllToAll,      TestColl::kSendRecvRing};

Mismatch collectiveMismatch(TestColl common, TestColl deviant, int deviantRank) {
  Mismatch m;
  m.common = CallSpec{common, 1000};
  m.deviant = CallSpec{deviant, 1000};
  m.deviantRank = deviantRank;
  m.name = "rank " + std::to_string(deviantRank) + " calls " + testCollName(deviant) +
           " where the others call " + testCollName(common);
  return m;
}

// Where even ring plans may pass no slot between ranks that disagree: two broadcast roots each
// send and neither receives (the ranks finish with different data and no error), and a broadcast
// chain and a reduce chain to the same root run in opposite directions (every rank waits for a
// slot that never comes, until BRAID_TIMEOUT). DISABLED_EveryAlgorithm covers them.
bool noSlotNeedCross(const Mismatch& m) {
  const TestColl a = m.common.coll;
  const TestColl b = m.deviant.coll;
  if (a == TestColl::kBroadcast && b == TestColl::kBroadcast) return m.deviant.root == m.deviantRank;
  return (a == TestColl::kBroadcast && b == TestColl::kReduce) ||
         (a == TestColl::kReduce && b == TestColl::kBroadcast);
}

TEST(Mismatch, DifferentCollectives) {
  int turn = 0;
  for (TestColl a : kAll) {
    for (TestColl b : kAll) {
      if (a == b) continue;
      const Mismatch m = collectiveMismatch(a, b, (turn++) % kRanks);
      if (!noSlotNeedCross(m)) runMismatch(m);
    }
  }
}

TEST(Mismatch, DifferentCounts) {
  int turn = 0;
  for (TestColl coll : kAll) {
    Mismatch m;
    m.common = CallSpec{coll, 1000};
    m.deviant = CallSpec{coll, turn % 2 == 0 ? size_t{1001} : size_t{3000}};
    m.deviantRank = (turn++) % kRanks;
    m.name = testCollName(coll) + " count " + std::to_string(m.deviant.count) + " vs 1000";
    runMismatch(m);
  }
}

TEST(Mismatch, DifferentDatatypes) {
  int turn = 0;
  for (TestColl coll : kAll) {
    Mismatch m;
    m.common = CallSpec{coll, 1000, braidFloat32};
    m.deviant = CallSpec{coll, 1000, turn % 2 == 0 ? braidInt32 : braidFloat64};
    m.deviantRank = (turn++) % kRanks;
    m.name = testCollName(coll) + " datatype " + describeSpec(m.deviant);
    runMismatch(m);
  }
}

TEST(Mismatch, DifferentOps) {
  for (TestColl coll : {TestColl::kAllReduce, TestColl::kReduce, TestColl::kReduceScatter}) {
    Mismatch m;
    m.common = CallSpec{coll, 1000, braidFloat32, braidSum};
    m.deviant = CallSpec{coll, 1000, braidFloat32, braidMax};
    m.deviantRank = 2;
    m.name = testCollName(coll) + " max vs sum";
    runMismatch(m);
  }
}

TEST(Mismatch, DifferentRoots) {
  for (TestColl coll : {TestColl::kBroadcast, TestColl::kReduce}) {
    for (int deviantRoot : {1, 3}) {
      Mismatch m;
      m.common = CallSpec{coll, 1000, braidFloat32, braidSum, 0};
      m.deviant = CallSpec{coll, 1000, braidFloat32, braidSum, deviantRoot};
      m.deviantRank = deviantRoot == 3 ? 3 : 2;
      m.name = testCollName(coll) + " root " + std::to_string(deviantRoot) + " vs 0 on rank " +
               std::to_string(m.deviantRank);
      if (!noSlotNeedCross(m)) runMismatch(m);
    }
  }
}

TEST(Mismatch, RankThatSkipsACall) {
  // The deviant skips the all-reduce and goes on to the broadcast the others make next.
  for (int deviant : {0, 2}) {
    Mismatch m;
    m.common = CallSpec{TestColl::kAllReduce, 1000};
    m.deviant = CallSpec{TestColl::kBroadcast, 1000};
    m.skip = true;
    m.deviantRank = deviant;
    m.name = "rank " + std::to_string(deviant) + " skips an allreduce";
    runMismatch(m);
  }
}

// Every kind of disagreement under every algorithm; collectives an algorithm does not serve keep
// their default choice.
TEST(Mismatch, DISABLED_EveryAlgorithm) {
  for (const std::string algo : {"tree", "rhd", "rd", "direct", "ring"}) {
    int turn = 0;
    for (TestColl a : kAll) {
      for (TestColl b : kAll) {
        if (a == b) continue;
        Mismatch m = collectiveMismatch(a, b, (turn++) % kRanks);
        m.algo = "BRAID_ALGO=" + algo;
        m.name += " (" + algo + ")";
        runMismatch(m);
      }
      if (a != TestColl::kBroadcast && a != TestColl::kReduce) continue;
      for (int deviantRoot : {1, 3}) {
        Mismatch m;
        m.common = CallSpec{a, 1000, braidFloat32, braidSum, 0};
        m.deviant = CallSpec{a, 1000, braidFloat32, braidSum, deviantRoot};
        m.deviantRank = deviantRoot == 3 ? 3 : 2;
        m.algo = "BRAID_ALGO=" + algo;
        m.name = testCollName(a) + " root " + std::to_string(deviantRoot) + " (" + algo + ")";
        runMismatch(m);
      }
    }
  }
}

// count == 0 exchanges nothing: the call is a local no-op that never waits for a peer (as
// frameworks expect of an empty bucket), but it takes its sequence number on every rank. A rank
// whose zero-count call met a non-empty one elsewhere is therefore one call ahead, and the next
// call that exchanges data fails on every rank, naming both sequence numbers.
TEST(Mismatch, ZeroCountSurfacesAtTheNextExchange) {
  RootProcess root(kTimeout + 5);
  ASSERT_TRUE(root.ok()) << root.error();
  const int deviant = 3;
  const std::vector<RankOutcome> outcomes = runRanks(
      kRanks, root.id(),
      [&](int rank, const braidUniqueId& rid) -> std::string {
        Checks checks("rank " + std::to_string(rank));
        Settings settings{"BRAID_TIMEOUT=" + std::to_string(kTimeout), kRingPlans};
        braidComm_t comm = nullptr;
        if (braidCommInitRankConfig(&comm, kRanks, rid, rank, settings.config()) != braidSuccess) {
          return std::string("init failed: ") + braidGetLastError(nullptr);
        }
        {
          CallMaker maker(comm, rank, kRanks, 1000);
          for (int i = 0; i < 2; ++i) {
            checks.expect(maker.call(CallSpec{TestColl::kAllReduce, 8}).rc == braidSuccess,
                          "a matching call failed");
          }
          Timed t;
          if (rank == deviant) {
            t = maker.call(CallSpec{TestColl::kAllReduce, 0});
            checks.expect(t.rc == braidSuccess && t.seconds < 1,
                          "a zero-count call did not return at once: " + t.message);
          }
          t = maker.call(CallSpec{TestColl::kAllReduce, 1000});
          const std::string got = std::string(braidGetErrorString(t.rc)) + ": " + t.message;
          checks.expect(t.rc == braidInvalidUsage, "expected braidInvalidUsage, got " + got);
          checks.expect(t.seconds < kTimeout, "not detected before the timeout: " + got);
          for (const char* seq : {") #2", ") #3"}) {
            checks.expect(t.message.find(std::string("allreduce(count=1000, float, sum") + seq) !=
                              std::string::npos,
                          std::string("the message does not name call ") + (seq + 2) + ": " + got);
          }
        }
        checks.expect(braidCommDestroy(comm) == braidSuccess, "destroy failed");
        return checks.text();
      },
      kTimeout + 20);
  EXPECT_EQ(failures(outcomes), "");
}

}  // namespace
}  // namespace braid::testing
