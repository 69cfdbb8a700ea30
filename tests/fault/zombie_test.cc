// The kill matrix with the victim left unreaped: a rank on this host SIGKILLed during init, in the
// middle of a stream of all-reduces (1 KiB to 4 MiB) or between two calls, under every all-reduce
// algorithm, over shared memory and over TCP. The test process reaps the victim only once every
// survivor has ended, so the victim is a zombie all along, as under launchers that reap late; and
// BRAID_TIMEOUT keeps its default (300 s). Every survivor must fail with braidRemoteError naming
// the victim within a second of its death (the goal of issue #44), asserted with a margin for a
// loaded machine.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "algorithms/algorithms.h"
#include "bootstrap/bootstrap.h"
#include "braid.h"
#include "tests/fault/fault_harness.h"
#include "tests/support/multiprocess.h"
#include "tests/support/sanitizers.h"

namespace braid::testing {
namespace {

// The goal is one second; the bound leaves room for a machine whose two cores other jobs share
// (and for the sanitizers, which slow every step).
constexpr double kGoalSeconds = 1;
constexpr double kMargin = kThreadSanitizer || kAddressSanitizer ? 4 : 1.5;
// A hang must fail the test, not stall the suite: far below BRAID_TIMEOUT's default.
constexpr double kDeadlineSeconds = 40;

enum class KillPoint { kInit, kMidCall, kBetweenCalls };

std::string killPointName(KillPoint point) {
  switch (point) {
    case KillPoint::kInit: return "init";
    case KillPoint::kMidCall: return "midcall";
    case KillPoint::kBetweenCalls: return "betweencalls";
  }
  return "?";
}

struct ZombieParam {
  KillPoint point;
  std::string algo;  ///< all-reduce algorithm, as BRAID_ALGO names it
  bool socket;       ///< BRAID_TRANSPORT=socket: the ranks talk over TCP
  int nranks;
  int victim;
};

void PrintTo(const ZombieParam& p, std::ostream* os) {
  *os << killPointName(p.point) << " " << p.algo << (p.socket ? " socket" : " shm")
      << " n=" << p.nranks << " victim " << p.victim;
}

// All-reduce sizes of the stream: 1 KiB to 4 MiB of floats.
constexpr size_t kCounts[] = {256, 4096, 65536, 1 << 20};
constexpr size_t kMaxCount = 1 << 20;
constexpr int kCalls = 400;
constexpr int kCallsBeforeDeath = 5;

const char* gDiePoint = "ring:step";
int gDieSkip = 0;

void dieAtRingStep(const char* point, const std::string& /*listener*/) {
  if (std::string(point) != gDiePoint || gDieSkip-- > 0) return;
  dieNow(Death::kKill);
}

braidComm_t initRank(const ZombieParam& p, int rank, const braidUniqueId& id, braidResult_t* rc) {
  Settings settings{"BRAID_ALGO=allreduce:" + p.algo};
  if (p.socket) settings.add("BRAID_TRANSPORT=socket");
  braidComm_t comm = nullptr;
  *rc = braidCommInitRankConfig(&comm, p.nranks, id, rank, settings.config());
  return comm;
}

CallSpec allReduceOf(int call) {
  CallSpec spec;
  spec.coll = TestColl::kAllReduce;
  spec.count = kCounts[call % 4];
  return spec;
}

[[noreturn]] void victimBody(const ZombieParam& p, int rank, const braidUniqueId& id,
                             uint32_t seed) {
  std::mt19937 rng(seed);
  if (p.point == KillPoint::kInit) {
    // Somewhere among the ring steps of the set-up (peer information, shared memory, tuner).
    gDieSkip = static_cast<int>(rng() % (3 * (p.nranks - 1)));
    setBootstrapFaultHook(&dieAtRingStep);
  }
  braidResult_t rc;
  braidComm_t comm = initRank(p, rank, id, &rc);
  if (rc == braidSuccess) {
    if (p.point == KillPoint::kMidCall) {
      dieAfter(Death::kKill, std::uniform_real_distribution<double>(0.005, 0.05)(rng));
    }
    CallMaker maker(comm, rank, p.nranks, kMaxCount);
    for (int i = 0; i < kCalls; ++i) {
      if (p.point == KillPoint::kBetweenCalls && i == kCallsBeforeDeath) break;
      if (maker.call(allReduceOf(i)).rc != braidSuccess) break;
    }
  }
  dieNow(Death::kKill);
}

std::string survivorBody(const ZombieParam& p, int rank, const braidUniqueId& id) {
  std::ostringstream name;
  PrintTo(p, &name);
  Checks checks("rank " + std::to_string(rank) + " (" + name.str() + ")");
  braidResult_t rc;
  braidComm_t comm = initRank(p, rank, id, &rc);
  Timed failure;
  double failedAt = 0;
  if (rc != braidSuccess) {
    failure = {rc, braidGetLastError(nullptr), 0};
    failedAt = nowSeconds();
  } else {
    CallMaker maker(comm, rank, p.nranks, kMaxCount);
    // The victim never makes the last call, whatever happened before it.
    for (int i = 0; i <= kCalls && failedAt == 0; ++i) {
      const Timed t = maker.call(allReduceOf(i));
      if (t.rc != braidSuccess) {
        failure = t;
        failedAt = nowSeconds();
      }
    }
  }
  const double diedAt = board().diedAt.load();
  checks.expect(failedAt > 0, "every call succeeded although the victim died");
  checks.expect(diedAt > 0, "the victim never died");
  if (failedAt > 0 && diedAt > 0) {
    const double seconds = failedAt - diedAt;
    const std::string got = std::string(braidGetErrorString(failure.rc)) + " " +
                            std::to_string(seconds) + " s after the death: " + failure.message;
    checks.expect(failure.rc == braidRemoteError, "expected braidRemoteError, got " + got);
    checks.expect(namesDeadRank(failure.message, p.victim),
                  "the message does not name dead rank " + std::to_string(p.victim) + ": " + got);
    checks.expect(seconds <= kGoalSeconds * kMargin, "too slow: " + got);
    // The figure behind the goal, in the test log.
    std::fprintf(stderr, "[%s] rank %d failed %.0f ms after the victim died\n", name.str().c_str(),
                 rank, seconds * 1e3);
  }
  // Stay until every survivor knows (one leaving early must not be what another reports).
  board().failed.fetch_add(1);
  for (const double start = nowSeconds();
       board().failed.load() < p.nranks - 1 && secondsSince(start) < 10;) {
    usleep(1000);
  }
  if (comm != nullptr) {
    checks.expect(braidCommDestroy(comm) == braidSuccess,
                  std::string("braidCommDestroy failed: ") + braidGetLastError(nullptr));
  }
  return checks.text();
}

class ZombieKill : public ::testing::TestWithParam<ZombieParam> {};

TEST_P(ZombieKill, SurvivorsFailWithinASecond) {
  const ZombieParam& p = GetParam();
  const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const uint32_t seed = caseSeed(static_cast<uint32_t>(std::hash<std::string>()(name)));
  resetBoard();
  RootProcess root;
  ASSERT_TRUE(root.ok()) << root.error();
  std::vector<RankOutcome> outcomes = runRanks(
      p.nranks, root.id(),
      [&](int rank, const braidUniqueId& rid) -> std::string {
        board().pids[rank] = static_cast<int>(getpid());
        if (rank == p.victim) victimBody(p, rank, rid, seed);
        return survivorBody(p, rank, rid);
      },
      kDeadlineSeconds, /*unreapedRank=*/p.victim);
  std::string report;
  for (RankOutcome& o : outcomes) {
    if (o.rank == p.victim) {
      if (o.signal != SIGKILL) report += "the victim was not killed: " + o.output + "\n";
      continue;
    }
    if (!o.ok()) report += failures({o});
  }
  EXPECT_EQ(report, "");
}

std::vector<ZombieParam> zombieParams() {
  std::vector<ZombieParam> params;
  int turn = 0;
  for (KillPoint point : {KillPoint::kMidCall, KillPoint::kBetweenCalls, KillPoint::kInit}) {
    for (Algorithm algo : algorithmsFor(Collective::kAllReduce)) {
      for (bool socket : {false, true}) {
        // Victims and sizes take turns, so the matrix covers each without multiplying.
        const int nranks = 2 + (turn % 3);
        const int victim = (turn / 3) % nranks;
        ++turn;
        params.push_back({point, std::string(algorithmName(algo)), socket, nranks, victim});
      }
    }
  }
  return params;
}

INSTANTIATE_TEST_SUITE_P(Matrix, ZombieKill, ::testing::ValuesIn(zombieParams()),
                         [](const ::testing::TestParamInfo<ZombieParam>& info) {
                           const ZombieParam& p = info.param;
                           return killPointName(p.point) + "_" + p.algo +
                                  (p.socket ? "_socket" : "_shm") + "_n" +
                                  std::to_string(p.nranks) + "_victim" + std::to_string(p.victim);
                         });

}  // namespace
}  // namespace braid::testing
