// Ranks that disagree: one rank calls a different collective, count, datatype, op or root than the
// others, or skips a call. Every rank must get braidInvalidUsage (a rank whose own part completed
// without hearing from anyone - the root of a broadcast, say - learns it from
// braidCommGetAsyncError and its next call) with both calls described, e.g. "rank 3 called
// broadcast(count=1000, float, root=0) #2 [ring] where rank 0 called allreduce(count=1000, float,
// sum) #2 [ring]", well before the timeout, and the communicator must still be destroyed cleanly.
//
// Detection rests on the descriptor every FIFO slot carries, which the receiver compares with its
// own call. Besides its data, every call that exchanges data passes one empty slot on a channel of
// its own (the call check, addCallCheckLane): a collective to its ring successor and from its ring
// predecessor, a send to its peer, a receive from its peer. A rank whose call differs from its
// predecessor's therefore fails whatever route the algorithm's data takes - trees, recursive
// halving/doubling, direct plans, a broadcast chain against a reduce chain, two broadcast roots
// that never receive: the deviant and its successor see the mismatch themselves (in the call, or
// when a check slot that came late is taken: at their next call or braidCommGetAsyncError), the
// other ranks learn it from their failure notices. A count == 0 call exchanges nothing, check
// included (see ZeroCountSurfacesAtTheNextExchange).
//
// The matrix runs every kind of disagreement under every algorithm, sampled so that the suite
// stays short: every pair of different collectives under every algorithm (the deviant on either
// side of the pair in turn, so both orders of each pair meet across the algorithms), every root
// mismatch, count and datatype mismatches under every (collective, algorithm) the library serves,
// op mismatches under every algorithm of each reduction, a skipped call under every algorithm.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>
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
// What BRAID_ALGO forces in turn; collectives an algorithm does not serve keep their default.
const char* const kAlgorithms[] = {"ring", "tree", "rhd", "rd", "direct", "hier", "hier_rhd"};

struct Mismatch {
  std::string name;
  CallSpec common;  ///< what every rank but the deviant calls
  CallSpec deviant;
  int deviantRank = 3;
  bool skip = false;  ///< the deviant skips `common` and goes straight to `deviant`
  std::string algo = kRingPlans;
  std::string transport;  ///< a BRAID_TRANSPORT setting, or "" for the default
  int nranks = kRanks;
  int callCheck = 1;  ///< BRAID_CALL_CHECK: 1 takes checks when they come, 2 waits for them
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
  // The call check (on by default) makes detection certain under every algorithm.
  Settings settings{"BRAID_TIMEOUT=" + std::to_string(kTimeout),
                    "BRAID_CALL_CHECK=" + std::to_string(m.callCheck)};
  if (!m.algo.empty()) settings.add(m.algo);
  if (!m.transport.empty()) settings.add(m.transport);
  braidComm_t comm = nullptr;
  if (!checks.expect(
          braidCommInitRankConfig(&comm, m.nranks, id, rank, settings.config()) == braidSuccess,
          std::string("init failed: ") + braidGetLastError(nullptr))) {
    return checks.text();
  }
  {
    CallMaker maker(comm, rank, m.nranks, 4096);
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
      checks.expect(describesSpec(message, spec),
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
      m.nranks, root.id(),
      [&](int rank, const braidUniqueId& rid) { return rankBody(m, rank, rid); },
      /*deadlineSeconds=*/kTimeout + 20);
  EXPECT_EQ(failures(outcomes), "") << m.name;
}

const TestColl kAll[] = {TestColl::kAllReduce,   TestColl::kBroadcast,     TestColl::kReduce,
                         TestColl::kAllGather,   TestColl::kReduceScatter, TestColl::kAllToAll,
                         TestColl::kSendRecvRing};

Mismatch collectiveMismatch(TestColl common, TestColl deviant, int deviantRank) {
  Mismatch m;
  m.common = CallSpec{common, 1000};
  m.deviant = CallSpec{deviant, 1000};
  m.deviantRank = deviantRank;
  m.name = "rank " + std::to_string(deviantRank) + " calls " + testCollName(deviant) +
           " where the others call " + testCollName(common);
  return m;
}

std::string withAlgo(const std::string& name, const std::string& setting) {
  return name + " (" + (setting.empty() ? std::string("default") : setting) + ")";
}

// The position of `algo` in kAlgorithms: what the cases of one algorithm rotate by.
size_t algorithmIndex(const std::string& algo) {
  const auto* at = std::find_if(std::begin(kAlgorithms), std::end(kAlgorithms),
                                [&](const char* a) { return algo == a; });
  return static_cast<size_t>(at - std::begin(kAlgorithms));
}

// Every pair of different collectives under one algorithm.
class MismatchUnder : public ::testing::TestWithParam<const char*> {};

TEST_P(MismatchUnder, DifferentCollectives) {
  const std::string algo = GetParam();
  const size_t algoIndex = algorithmIndex(algo);
  int turn = static_cast<int>(algoIndex);
  for (size_t i = 0; i < std::size(kAll); ++i) {
    for (size_t j = i + 1; j < std::size(kAll); ++j) {
      const bool swap = (algoIndex + i + j) % 2 == 1;
      Mismatch m = collectiveMismatch(kAll[swap ? j : i], kAll[swap ? i : j], (turn++) % kRanks);
      m.algo = "BRAID_ALGO=" + algo;
      m.name = withAlgo(m.name, m.algo);
      runMismatch(m);
    }
  }
}

TEST_P(MismatchUnder, AtTwoRanksAgainstEveryOtherCollective) {
  // At 2 ranks small all-reduces go without the empty check slot (their data does its job), so
  // a rank whose partner calls something else may wait on a slot that never comes: it must find
  // the partner's slots all the same.
  const std::string algo = GetParam();
  int turn = static_cast<int>(algorithmIndex(algo));
  for (TestColl other : kAll) {
    if (other == TestColl::kAllReduce) continue;
    const bool swap = turn % 2 == 1;
    Mismatch m = collectiveMismatch(swap ? other : TestColl::kAllReduce,
                                    swap ? TestColl::kAllReduce : other, (turn++) % 2);
    m.nranks = 2;
    m.algo = "BRAID_ALGO=" + algo;
    m.name = withAlgo("2 ranks: " + m.name, m.algo);
    runMismatch(m);
  }
}

TEST_P(MismatchUnder, RankThatSkipsACall) {
  // The deviant skips the all-reduce and goes on to the broadcast the others make next.
  const std::string algo = GetParam();
  Mismatch m;
  m.common = CallSpec{TestColl::kAllReduce, 1000};
  m.deviant = CallSpec{TestColl::kBroadcast, 1000};
  m.skip = true;
  m.deviantRank = static_cast<int>(algorithmIndex(algo)) % kRanks;
  m.algo = "BRAID_ALGO=" + algo;
  m.name = withAlgo("rank " + std::to_string(m.deviantRank) + " skips an allreduce", m.algo);
  runMismatch(m);
}

INSTANTIATE_TEST_SUITE_P(EveryAlgorithm, MismatchUnder, ::testing::ValuesIn(kAlgorithms),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

TEST(Mismatch, DifferentCounts) {
  int turn = 0;
  for (const CollAlgo& ca : everyCollectiveAndAlgorithm()) {
    Mismatch m;
    m.common = CallSpec{ca.coll, 1000};
    m.deviant = CallSpec{ca.coll, turn % 2 == 0 ? size_t{1001} : size_t{3000}};
    m.deviantRank = (turn++) % kRanks;
    m.algo = algoSetting(ca);
    m.name = withAlgo(
        testCollName(ca.coll) + " count " + std::to_string(m.deviant.count) + " vs 1000", m.algo);
    runMismatch(m);
  }
}

TEST(Mismatch, DifferentDatatypes) {
  int turn = 0;
  for (const CollAlgo& ca : everyCollectiveAndAlgorithm()) {
    Mismatch m;
    m.common = CallSpec{ca.coll, 1000, braidFloat32};
    m.deviant = CallSpec{ca.coll, 1000, turn % 2 == 0 ? braidInt32 : braidFloat64};
    m.deviantRank = (turn++) % kRanks;
    m.algo = algoSetting(ca);
    m.name = withAlgo(testCollName(ca.coll) + " datatype " + describeSpec(m.deviant), m.algo);
    runMismatch(m);
  }
}

TEST(Mismatch, DifferentOps) {
  int turn = 0;
  for (const CollAlgo& ca : everyCollectiveAndAlgorithm()) {
    if (!isReduction(ca.coll)) continue;
    Mismatch m;
    m.common = CallSpec{ca.coll, 1000, braidFloat32, braidSum};
    m.deviant = CallSpec{ca.coll, 1000, braidFloat32, turn % 2 == 0 ? braidMax : braidAvg};
    m.deviantRank = (turn++ + 2) % kRanks;
    m.algo = algoSetting(ca);
    m.name = withAlgo(testCollName(ca.coll) + " " + describeSpec(m.deviant) + " vs sum", m.algo);
    runMismatch(m);
  }
}

// Every root mismatch under every algorithm that serves the rooted collective. Two roots of a
// broadcast both only send, so no data slot need pass between the ranks that disagree.
TEST(Mismatch, DifferentRoots) {
  for (const CollAlgo& ca : everyCollectiveAndAlgorithm()) {
    if (ca.coll != TestColl::kBroadcast && ca.coll != TestColl::kReduce) continue;
    for (int deviantRoot : {1, 3}) {
      Mismatch m;
      m.common = CallSpec{ca.coll, 1000, braidFloat32, braidSum, 0};
      m.deviant = CallSpec{ca.coll, 1000, braidFloat32, braidSum, deviantRoot};
      m.deviantRank = deviantRoot == 3 ? 3 : 2;
      m.algo = algoSetting(ca);
      m.name = withAlgo(testCollName(ca.coll) + " root " + std::to_string(deviantRoot) +
                            " vs 0 on rank " + std::to_string(m.deviantRank),
                        m.algo);
      runMismatch(m);
    }
  }
}

// The call check's empty slots cross TCP as they cross shared memory.
TEST(Mismatch, OverSockets) {
  Mismatch roots;
  roots.common = CallSpec{TestColl::kBroadcast, 1000, braidFloat32, braidSum, 0};
  roots.deviant = CallSpec{TestColl::kBroadcast, 1000, braidFloat32, braidSum, 3};
  roots.algo = "BRAID_ALGO=broadcast:tree";
  Mismatch chains = collectiveMismatch(TestColl::kReduce, TestColl::kBroadcast, 1);
  chains.algo = "BRAID_ALGO=tree";
  Mismatch pairs = collectiveMismatch(TestColl::kSendRecvRing, TestColl::kAllReduce, 2);
  pairs.algo = "BRAID_ALGO=rhd";
  for (Mismatch* m : {&roots, &chains, &pairs}) {
    m->transport = "BRAID_TRANSPORT=socket";
    m->name =
        withAlgo(m->name.empty() ? "broadcast roots 3 and 0" : m->name, m->algo) + " over sockets";
    runMismatch(*m);
  }
}

// Calls that wait for their own check (BRAID_CALL_CHECK=2) fail the same way.
TEST(Mismatch, WaitingForEveryCheck) {
  Mismatch roots;
  roots.common = CallSpec{TestColl::kBroadcast, 1000, braidFloat32, braidSum, 0};
  roots.deviant = CallSpec{TestColl::kBroadcast, 1000, braidFloat32, braidSum, 3};
  roots.algo = "BRAID_ALGO=broadcast:tree";
  roots.name = "broadcast roots 3 and 0";
  Mismatch chains = collectiveMismatch(TestColl::kReduce, TestColl::kBroadcast, 0);
  chains.algo = "BRAID_ALGO=tree";
  for (Mismatch* m : {&roots, &chains}) {
    m->callCheck = 2;
    m->name = withAlgo(m->name, m->algo) + ", BRAID_CALL_CHECK=2";
    runMismatch(*m);
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
