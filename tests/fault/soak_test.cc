// Soak: 100,000 small all-reduces across rank processes, and 1,000 communicator init/destroy
// cycles, with resident memory, open descriptors, threads and /dev/shm entries measured after a
// warm-up and again at the end. Growth must stay within small bounds (the allocator may keep a
// little); anything that leaks per call or per communicator shows up as thousands of times its
// size. Each rank also checks every 1,000th result.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "braid.h"
#include "tests/fault/fault_harness.h"
#include "tests/support/multiprocess.h"

namespace braid::testing {
namespace {

constexpr int kCalls = 100000;
constexpr int kWarmupCalls = 2000;
constexpr int kCycles = 1000;
constexpr int kWarmupCycles = 20;
// Resident memory the allocator may keep on top of what the warm-up settled at.
constexpr size_t kRssSlackKb = 8 * 1024;

std::string growth(const ProcessResources& before, const ProcessResources& after) {
  std::string out;
  // Fewer is fine: a peer that finished first closes its bootstrap connections to this rank.
  if (after.fds.size() > before.fds.size()) {
    out += " descriptors " + std::to_string(before.fds.size()) + " -> " +
           std::to_string(after.fds.size()) + ";";
  }
  if (after.shm.size() > before.shm.size()) {
    out += " /dev/shm entries " + std::to_string(before.shm.size()) + " -> " +
           std::to_string(after.shm.size()) + ";";
  }
  if (after.threads > before.threads) {
    out +=
        " threads " + std::to_string(before.threads) + " -> " + std::to_string(after.threads) + ";";
  }
  if (after.rssKb > before.rssKb + kRssSlackKb) {
    out +=
        " RSS " + std::to_string(before.rssKb) + " kB -> " + std::to_string(after.rssKb) + " kB;";
  }
  return out;
}

TEST(Soak, HundredThousandSmallAllReduces) {
  const int nranks = 3;
  RootProcess root(60);
  ASSERT_TRUE(root.ok()) << root.error();
  const double start = nowSeconds();
  const std::vector<RankOutcome> outcomes = runRanks(
      nranks, root.id(),
      [&](int rank, const braidUniqueId& rid) -> std::string {
        Checks checks("rank " + std::to_string(rank));
        Settings settings{"BRAID_TIMEOUT=60"};
        braidComm_t comm = nullptr;
        if (braidCommInitRankConfig(&comm, nranks, rid, rank, settings.config()) != braidSuccess) {
          return std::string("init failed: ") + braidGetLastError(nullptr);
        }
        std::vector<float> in(16), out(16);
        ProcessResources warm;
        for (int i = 0; i < kCalls && checks.empty(); ++i) {
          if (i == kWarmupCalls) warm = snapshotResources();
          for (size_t k = 0; k < in.size(); ++k) in[k] = float(rank + 1) * float(k + i % 7);
          const braidResult_t rc = braidAllReduce(in.data(), out.data(), in.size(), braidFloat32,
                                                  braidSum, comm, nullptr);
          checks.expect(rc == braidSuccess,
                        "call " + std::to_string(i) + " failed: " + braidGetLastError(comm));
          if (i % 1000 == 0) {
            const float ranksSum = float(nranks * (nranks + 1) / 2);
            for (size_t k = 0; k < out.size(); ++k) {
              checks.expect(out[k] == ranksSum * float(k + i % 7),
                            "call " + std::to_string(i) + " element " + std::to_string(k) + " is " +
                                std::to_string(out[k]));
            }
          }
        }
        const ProcessResources end = snapshotResources();
        const std::string grew = growth(warm, end);
        checks.expect(grew.empty(),
                      "grew over " + std::to_string(kCalls - kWarmupCalls) + " calls:" + grew);
        checks.expect(braidCommDestroy(comm) == braidSuccess, "destroy failed");
        return checks.text();
      },
      /*deadlineSeconds=*/600);
  EXPECT_EQ(failures(outcomes), "");
  std::printf("[ soak     ] %d all-reduces of 16 floats on %d ranks: %.1f s\n", kCalls, nranks,
              secondsSince(start));
}

TEST(Soak, ThousandInitDestroyCycles) {
  const int nranks = 2;
  Settings settings{"BRAID_TIMEOUT=60"};
  ProcessResources warm;
  const double start = nowSeconds();
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    if (cycle == kWarmupCycles) {
      // Root threads of the warm-up rendezvous leave right after it: let them go first.
      usleep(200000);
      warm = snapshotResources();
    }
    std::vector<braidComm_t> comms(nranks, nullptr);
    ASSERT_EQ(braidCommInitAllConfig(comms.data(), nranks, nullptr, settings.config()),
              braidSuccess)
        << "cycle " << cycle << ": " << braidGetLastError(nullptr);
    // One call, so the data path (FIFO pages, plans, scratch) is set up and torn down too.
    std::vector<int> values(nranks), sums(nranks);
    ASSERT_EQ(braidGroupStart(), braidSuccess);
    for (int r = 0; r < nranks; ++r) {
      values[r] = r + 1;
      ASSERT_EQ(braidAllReduce(&values[r], &sums[r], 1, braidInt32, braidSum, comms[r], nullptr),
                braidSuccess);
    }
    ASSERT_EQ(braidGroupEnd(), braidSuccess) << braidGetLastError(nullptr);
    for (int r = 0; r < nranks; ++r) {
      ASSERT_EQ(sums[r], 3) << "cycle " << cycle;
      ASSERT_EQ(braidCommDestroy(comms[r]), braidSuccess) << "cycle " << cycle;
    }
  }
  // Detached root threads close their sockets as they exit, just after each rendezvous.
  std::string grew;
  const double settle = nowSeconds();
  do {
    usleep(20000);
    grew = growth(warm, snapshotResources());
  } while (!grew.empty() && secondsSince(settle) < 5);
  EXPECT_EQ(grew, "") << "over " << kCycles - kWarmupCycles << " init/destroy cycles";
  std::printf("[ soak     ] %d init/destroy cycles of %d ranks: %.1f s\n", kCycles, nranks,
              secondsSince(start));
}

}  // namespace
}  // namespace braid::testing
