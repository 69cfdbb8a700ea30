// The device path's staged FIFOs over the RDMA proxy, on the verbs test double (fake_verbs.h),
// with host threads standing in for the kernel (kernels/host_lane_runner.h): every collective x
// algorithm exact at n = 2, 3, 4 through RDMA writes; an armed RDMA proxy polls until the slots
// have gone and then sleeps; ranks without a usable port stage over TCP instead, pair by pair;
// with socket excluded too, the set-up names the peer and both reasons; and BRAID_GDR=1 fails
// where GPUDirect RDMA cannot work.
#include <gtest/gtest.h>

#include <tuple>

#include "base/config.h"
#include "base/log.h"
#include "bootstrap/bootstrap_threads.h"
#include "tests/net/fake_verbs.h"
#include "tests/support/staged_ranks.h"
#include "transport/ib/verbs_api.h"

namespace braid::testing {
namespace {

constexpr double kTimeout = 60;

Config stagedConfig() {
  Config c;
  c.timeoutSeconds = kTimeout;
  c.nslots = 2;
  c.slotBytes = 1024;
  c.socketIfname = "lo";
  return c;
}

void expectAllEmpty(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

class StagedOverFakeRdma : public ::testing::TestWithParam<int> {
 protected:
  void TearDown() override { setVerbsApiForTesting(nullptr); }
};

TEST_P(StagedOverFakeRdma, EveryPlanIsExactOverRdmaWrites) {
  setVerbsApiForTesting(fakeVerbs({FakeDevice{"mlx5_0", {FakePort{}}}}));
  const int n = GetParam();
  StagedRun run;
  run.nranks = n;
  run.specs = everyCollectiveAndAlgorithm(n, 1000, 1024);
  run.config = [](int) { return stagedConfig(); };
  run.over = [](int, int) { return std::string("RDMA"); };
  expectAllEmpty(runStagedCases(run));
  const FakeStats s = fakeStats();
  EXPECT_GT(s.writesWithImm, 0u);
  EXPECT_GT(s.bytes, 0u);
  EXPECT_EQ(s.failedWrites, 0u) << s.lastError;
  EXPECT_EQ(s.qpsEverConnected, n * (n - 1));
  EXPECT_EQ(s.qps, 0) << "queue pairs leaked";
  EXPECT_EQ(s.mrs, 0) << "memory regions leaked";
  EXPECT_EQ(s.contexts, 0);
}

INSTANTIATE_TEST_SUITE_P(Ranks, StagedOverFakeRdma, ::testing::Values(2, 3, 4),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

class StagedFakeFabric : public ::testing::Test {
 protected:
  void TearDown() override { setVerbsApiForTesting(nullptr); }
};

TEST_F(StagedFakeFabric, ArmedRdmaProxyPollsUntilTheSlotsAreDoneThenSleeps) {
  setVerbsApiForTesting(fakeVerbs({FakeDevice{"mlx5_0", {FakePort{}}}}));
  const Config config = stagedConfig();
  const std::vector<Status> statuses =
      onBootstrapThreads(2, kTimeout, [&](int r, Bootstrap& bootstrap) -> Status {
        Logger logger(LogLevel::kWarn, kAllSubsys, "");
        StagedRank rank;
        RETURN_IF_ERROR(setUpStagedRank(r, 2, bootstrap, config, logger, StagedMedia{}, rank));
        if (rank.path->describe(1 - r) != "RDMA") {
          return internalError("staged over " + rank.path->describe(1 - r));
        }
        return checkArmedProxyPolls(r, rank);
      });
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].message();
  }
  EXPECT_GT(fakeStats().writesWithImm, 0u);
}

TEST_F(StagedFakeFabric, RankWithoutAPortStagesOverTcp) {
  // Rank 2 asks for a device the fabric lacks: ranks 0 and 1 stage over RDMA, rank 2 over TCP.
  setVerbsApiForTesting(fakeVerbs({FakeDevice{"mlx5_0", {FakePort{}}}}));
  constexpr int kRanks = 3;
  StagedRun run;
  run.nranks = kRanks;
  run.specs = everyCollectiveAndAlgorithm(kRanks, 273, 1024);
  run.config = [](int r) {
    Config c = stagedConfig();
    if (r == 2) c.ibHca = "mlx9_nonexistent";
    return c;
  };
  run.over = [](int r, int p) { return std::string(r == 2 || p == 2 ? "TCP" : "RDMA"); };
  expectAllEmpty(runStagedCases(run));
  EXPECT_EQ(fakeStats().qpsEverConnected, 2) << "one pair over RDMA";
  EXPECT_EQ(fakeStats().failedWrites, 0u) << fakeStats().lastError;
}

TEST_F(StagedFakeFabric, NoPortAndNoSocketNamesThePeerAndBothReasons) {
  setVerbsApiForTesting(fakeVerbs({}));
  StagedMedia rdmaOnly;
  rdmaOnly.tcp = false;
  const Config config = stagedConfig();
  const std::vector<Status> statuses =
      onBootstrapThreads(2, kTimeout, [&](int r, Bootstrap& bootstrap) -> Status {
        Logger logger(LogLevel::kWarn, kAllSubsys, "");
        StagedRank rank;
        return setUpStagedRank(r, 2, bootstrap, config, logger, rdmaOnly, rank);
      });
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(statuses[r].ok()) << "rank " << r;
    const std::string& why = statuses[r].message();
    EXPECT_NE(why.find("rank " + std::to_string(1 - r)), std::string::npos) << why;
    EXPECT_NE(why.find("no RDMA: "), std::string::npos) << why;
    EXPECT_NE(why.find("BRAID_TRANSPORT excludes socket"), std::string::npos) << why;
  }
}

// BRAID_GDR=1 fails where GPUDirect RDMA cannot work for a peer over RDMA, naming why (the test
// double has no ibv_reg_dmabuf_mr); with only TCP peers there is nothing to refuse, and auto
// stages through host memory.
TEST_F(StagedFakeFabric, GdrRequiredFailsWhereItCannotWork) {
  setVerbsApiForTesting(fakeVerbs({FakeDevice{"mlx5_0", {FakePort{}}}}));
  StagedMedia tcpOnly;
  tcpOnly.rdma = false;
  for (const auto& [gdr, media, wantOk] :
       {std::make_tuple(1, StagedMedia{}, false), std::make_tuple(1, tcpOnly, true),
        std::make_tuple(-1, StagedMedia{}, true), std::make_tuple(0, StagedMedia{}, true)}) {
    Config config = stagedConfig();
    config.gdr = gdr;
    const std::vector<Status> statuses =
        onBootstrapThreads(2, kTimeout, [&](int r, Bootstrap& bootstrap) -> Status {
          Logger logger(LogLevel::kWarn, kAllSubsys, "");
          StagedRank rank;
          RETURN_IF_ERROR(setUpStagedRank(r, 2, bootstrap, config, logger, media, rank));
          if (rank.path->gdr()) return internalError("GPUDirect RDMA chosen without a GPU");
          return okStatus();
        });
    for (int r = 0; r < 2; ++r) {
      const std::string what = "BRAID_GDR=" + std::to_string(gdr) + " rank " + std::to_string(r);
      EXPECT_EQ(statuses[r].ok(), wantOk) << what << ": " << statuses[r].message();
      if (wantOk) continue;
      for (const char* reason : {"BRAID_GDR=1", "no GPU", "ibv_reg_dmabuf_mr"}) {
        EXPECT_NE(statuses[r].message().find(reason), std::string::npos)
            << what << ": " << statuses[r].message();
      }
    }
  }
}

}  // namespace
}  // namespace braid::testing
