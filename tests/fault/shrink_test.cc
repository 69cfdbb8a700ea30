// Survivors carry on: a rank SIGKILLed (and left a zombie) in the middle of a stream of
// all-reduces, the survivors' calls fail naming it, they shrink the communicator around it with
// braidCommShrink and run 100 further all-reduces on the new one, whose results must be exact.
// Victims include rank 0 (the old rendezvous root's first rank), over shared memory and TCP;
// BRAID_TIMEOUT keeps its default. Also: the excluded sets must agree, and bad arguments.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "braid.h"
#include "tests/fault/fault_harness.h"
#include "tests/support/multiprocess.h"

namespace braid::testing {
namespace {

constexpr double kDeadlineSeconds = 60;
constexpr int kCallsAfterShrink = 100;
constexpr size_t kMaxCount = 1 << 16;

struct ShrinkParam {
  bool socket;
  int nranks;
  int victim;
};

void PrintTo(const ShrinkParam& p, std::ostream* os) {
  *os << (p.socket ? "socket" : "shm") << " n=" << p.nranks << " victim " << p.victim;
}

braidComm_t initRank(const ShrinkParam& p, int rank, const braidUniqueId& id, braidResult_t* rc) {
  Settings settings;
  if (p.socket) settings.add("BRAID_TRANSPORT=socket");
  braidComm_t comm = nullptr;
  *rc = braidCommInitRankConfig(&comm, p.nranks, id, rank, settings.config());
  return comm;
}

/// Integer-valued floats, so that sums in any order are exact.
float valueOf(int rank, int call, size_t i) {
  return static_cast<float>((rank + 1) * 3 + call % 7 + static_cast<int>(i % 13));
}

/// kCallsAfterShrink all-reduces of sizes 0..kMaxCount on comm; "" or the first wrong element.
std::string allReducesExact(braidComm_t comm) {
  int rank = -1, n = 0;
  if (braidCommUserRank(comm, &rank) != braidSuccess || braidCommCount(comm, &n) != braidSuccess) {
    return std::string("rank or count of the new communicator: ") + braidGetLastError(comm);
  }
  std::vector<float> data(kMaxCount);
  for (int call = 0; call < kCallsAfterShrink; ++call) {
    const size_t count =
        call % 10 == 9 ? 0 : std::min(kMaxCount, (size_t{1} << (call % 17)) + call % 3);
    for (size_t i = 0; i < count; ++i) data[i] = valueOf(rank, call, i);
    if (braidAllReduce(data.data(), data.data(), count, braidFloat32, braidSum, comm, nullptr) !=
        braidSuccess) {
      return "all-reduce " + std::to_string(call) +
             " after the shrink failed: " + braidGetLastError(comm);
    }
    for (size_t i = 0; i < count; ++i) {
      float expected = 0;
      for (int r = 0; r < n; ++r) expected += valueOf(r, call, i);
      if (data[i] != expected) {
        return "all-reduce " + std::to_string(call) + " (count " + std::to_string(count) +
               ") after the shrink: element " + std::to_string(i) + " is " +
               std::to_string(data[i]) + ", expected " + std::to_string(expected);
      }
    }
  }
  return "";
}

[[noreturn]] void victimBody(const ShrinkParam& p, int rank, const braidUniqueId& id) {
  braidResult_t rc;
  braidComm_t comm = initRank(p, rank, id, &rc);
  if (rc == braidSuccess) {
    std::mt19937 rng(static_cast<uint32_t>(getpid()));
    dieAfter(Death::kKill, std::uniform_real_distribution<double>(0.01, 0.05)(rng));
    CallMaker maker(comm, rank, p.nranks, kMaxCount);
    for (int i = 0;; ++i) {
      if (maker.call(TestColl::kAllReduce).rc != braidSuccess) break;
    }
  }
  dieNow(Death::kKill);
}

std::string survivorBody(const ShrinkParam& p, int rank, const braidUniqueId& id) {
  Checks checks("rank " + std::to_string(rank));
  braidResult_t rc;
  braidComm_t comm = initRank(p, rank, id, &rc);
  if (!checks.expect(rc == braidSuccess, std::string("init: ") + braidGetLastError(nullptr))) {
    return checks.text();
  }
  CallMaker maker(comm, rank, p.nranks, kMaxCount);
  Timed failure;
  for (int i = 0; failure.rc == braidSuccess && i < 100000; ++i) {
    failure = maker.call(TestColl::kAllReduce);
  }
  checks.expect(failure.rc == braidRemoteError, "expected braidRemoteError, got " +
                                                    std::string(braidGetErrorString(failure.rc)) +
                                                    ": " + failure.message);
  checks.expect(
      namesDeadRank(failure.message, p.victim),
      "the failure does not name rank " + std::to_string(p.victim) + ": " + failure.message);

  const double start = nowSeconds();
  braidComm_t shrunk = nullptr;
  rc = braidCommShrink(comm, &p.victim, 1, &shrunk);
  const double seconds = secondsSince(start);
  if (checks.expect(rc == braidSuccess, std::string("braidCommShrink: ") + braidGetErrorString(rc) +
                                            ": " + braidGetLastError(comm))) {
    std::fprintf(stderr, "rank %d shrank in %.0f ms\n", rank, seconds * 1e3);
    int newRank = -1, newCount = 0;
    braidCommUserRank(shrunk, &newRank);
    braidCommCount(shrunk, &newCount);
    checks.expect(newCount == p.nranks - 1, "new count " + std::to_string(newCount));
    checks.expect(newRank == rank - (rank > p.victim ? 1 : 0),
                  "new rank " + std::to_string(newRank) + " for old rank " + std::to_string(rank));
    const std::string exact = allReducesExact(shrunk);
    checks.expect(exact.empty(), exact);
    checks.expect(braidCommDestroy(shrunk) == braidSuccess,
                  std::string("destroying the new communicator: ") + braidGetLastError(nullptr));
  }
  checks.expect(braidCommAbort(comm) == braidSuccess,
                std::string("aborting the old communicator: ") + braidGetLastError(nullptr));
  return checks.text();
}

class ShrinkAfterKill : public ::testing::TestWithParam<ShrinkParam> {};

TEST_P(ShrinkAfterKill, SurvivorsShrinkAndRunExactAllReduces) {
  const ShrinkParam& p = GetParam();
  resetBoard();
  RootProcess root;
  ASSERT_TRUE(root.ok()) << root.error();
  std::vector<RankOutcome> outcomes = runRanks(
      p.nranks, root.id(),
      [&](int rank, const braidUniqueId& rid) -> std::string {
        if (rank == p.victim) victimBody(p, rank, rid);
        return survivorBody(p, rank, rid);
      },
      kDeadlineSeconds, /*unreapedRank=*/p.victim);
  std::string report;
  for (RankOutcome& o : outcomes) {
    if (o.rank == p.victim) {
      if (o.signal != SIGKILL) report += "the victim was not killed: " + o.output + "\n";
    } else if (!o.ok()) {
      report += failures({o});
    }
  }
  EXPECT_EQ(report, "");
}

INSTANTIATE_TEST_SUITE_P(Cases, ShrinkAfterKill,
                         ::testing::Values(ShrinkParam{false, 3, 0}, ShrinkParam{true, 4, 0},
                                           ShrinkParam{false, 4, 2}, ShrinkParam{true, 3, 2}),
                         [](const ::testing::TestParamInfo<ShrinkParam>& info) {
                           const ShrinkParam& p = info.param;
                           return std::string(p.socket ? "socket" : "shm") + "_n" +
                                  std::to_string(p.nranks) + "_victim" + std::to_string(p.victim);
                         });

TEST(Shrink, LiveRankLeftOutAndTwoShrinksInARow) {
  // Nothing has failed: rank 1 leaves (it does not call shrink), then the remaining three drop
  // rank 0 of theirs (old rank 0) too; each step's all-reduces are exact.
  constexpr int kRanks = 4;
  std::vector<RankOutcome> outcomes = runRanks(
      kRanks,
      [&](int rank, const braidUniqueId& id) -> std::string {
        Checks checks("rank " + std::to_string(rank));
        braidComm_t comm = nullptr;
        if (!checks.expect(braidCommInitRank(&comm, kRanks, id, rank) == braidSuccess,
                           braidGetLastError(nullptr))) {
          return checks.text();
        }
        if (rank == 1) {
          checks.expect(braidCommDestroy(comm) == braidSuccess, braidGetLastError(nullptr));
          return checks.text();
        }
        const int leaving = 1;
        braidComm_t three = nullptr;
        if (!checks.expect(braidCommShrink(comm, &leaving, 1, &three) == braidSuccess,
                           braidGetLastError(comm))) {
          return checks.text();
        }
        std::string exact = allReducesExact(three);
        checks.expect(exact.empty(), "3 ranks: " + exact);
        braidComm_t two = nullptr;
        if (rank != 0) {
          const int first = 0;
          if (checks.expect(braidCommShrink(three, &first, 1, &two) == braidSuccess,
                            braidGetLastError(three))) {
            exact = allReducesExact(two);
            checks.expect(exact.empty(), "2 ranks: " + exact);
            checks.expect(braidCommDestroy(two) == braidSuccess, braidGetLastError(nullptr));
          }
        }
        checks.expect(braidCommDestroy(three) == braidSuccess, braidGetLastError(nullptr));
        checks.expect(braidCommDestroy(comm) == braidSuccess, braidGetLastError(nullptr));
        return checks.text();
      },
      kDeadlineSeconds);
  EXPECT_EQ(failures(outcomes), "");
}

TEST(Shrink, RanksThatDisagreeOnTheExcludedSetAllFail) {
  // Ranks 0 and 1 leave out rank 2, rank 3 leaves out rank 1: same size, different sets.
  constexpr int kRanks = 4;
  std::vector<RankOutcome> outcomes = runRanks(
      kRanks,
      [&](int rank, const braidUniqueId& id) -> std::string {
        Checks checks("rank " + std::to_string(rank));
        braidComm_t comm = nullptr;
        if (!checks.expect(braidCommInitRank(&comm, kRanks, id, rank) == braidSuccess,
                           braidGetLastError(nullptr))) {
          return checks.text();
        }
        if (rank != 2) {
          const int excluded = rank == 3 ? 1 : 2;
          braidComm_t shrunk = nullptr;
          const braidResult_t rc = braidCommShrink(comm, &excluded, 1, &shrunk);
          checks.expect(rc == braidInvalidUsage,
                        std::string("expected braidInvalidUsage, got ") + braidGetErrorString(rc));
          checks.expect(std::string(braidGetLastError(comm)).find("set of excluded ranks") !=
                                std::string::npos ||
                            std::string(braidGetLastError(comm)).find("sets of excluded ranks") !=
                                std::string::npos,
                        std::string("the message does not say why: ") + braidGetLastError(comm));
          checks.expect(shrunk == nullptr, "a communicator came back");
        }
        checks.expect(braidCommAbort(comm) == braidSuccess, braidGetLastError(nullptr));
        return checks.text();
      },
      kDeadlineSeconds);
  EXPECT_EQ(failures(outcomes), "");
}

TEST(Shrink, BadArgumentsAreErrorsNamingTheProblem) {
  std::vector<RankOutcome> outcomes = runRanks(
      2,
      [&](int rank, const braidUniqueId& id) -> std::string {
        Checks checks("rank " + std::to_string(rank));
        braidComm_t comm = nullptr;
        if (!checks.expect(braidCommInitRank(&comm, 2, id, rank) == braidSuccess,
                           braidGetLastError(nullptr))) {
          return checks.text();
        }
        braidComm_t out = nullptr;
        const int self = rank, other = 1 - rank, outside = 2;
        const int both[] = {0, 1};
        auto expectError = [&](braidResult_t rc, const std::string& says) {
          const std::string message = braidGetLastError(nullptr);
          checks.expect(rc == braidInvalidArgument || rc == braidInvalidUsage,
                        says + ": got " + braidGetErrorString(rc));
          checks.expect(message.find(says) != std::string::npos,
                        "no '" + says + "' in '" + message + "'");
        };
        expectError(braidCommShrink(comm, &other, 1, nullptr), "newcomm is NULL");
        expectError(braidCommShrink(nullptr, &other, 1, &out), "comm is NULL");
        expectError(braidCommShrink(comm, nullptr, 1, &out), "excludeRanks is NULL");
        expectError(braidCommShrink(comm, &outside, 1, &out), "excluded rank 2 outside 0..1");
        expectError(braidCommShrink(comm, both, 2, &out), "nexclude 2 outside");
        expectError(braidCommShrink(comm, &other, -1, &out), "nexclude -1 outside");
        expectError(braidCommShrink(comm, &self, 1, &out), "is in excludeRanks");
        checks.expect(out == nullptr, "a communicator came back");
        // The communicator is still fine after all that.
        float x = 1;
        checks.expect(
            braidAllReduce(&x, &x, 1, braidFloat32, braidSum, comm, nullptr) == braidSuccess &&
                x == 2,
            "all-reduce after the bad shrinks");
        checks.expect(braidCommDestroy(comm) == braidSuccess, braidGetLastError(nullptr));
        return checks.text();
      },
      kDeadlineSeconds);
  EXPECT_EQ(failures(outcomes), "");
}

}  // namespace
}  // namespace braid::testing
