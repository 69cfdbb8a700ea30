// The link probe: leader choice, turning samples into figures, and the probe itself between
// threads over a real bootstrap on loopback (who takes part, that the stream obeys its byte and
// time limits, that a disabled probe only releases the leaders, and that the bootstrap is left
// clean for what follows).
#include "tuner/link_probe.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <thread>

#include "bootstrap/bootstrap.h"
#include "bootstrap/bootstrap_threads.h"

namespace braid {
namespace {

constexpr double kTimeout = 30;

std::vector<RankPlacement> onHosts(const std::vector<uint64_t>& hostOf) {
  std::vector<RankPlacement> placements(hostOf.size());
  for (size_t r = 0; r < hostOf.size(); ++r) placements[r].hostHash = hostOf[r];
  return placements;
}

TEST(LinkProbe, LeadersAreEachHostsLowestRankInOrderOfAppearance) {
  EXPECT_EQ(hostLeaders(onHosts({5, 5, 9, 5, 7, 9})), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(hostLeaders(onHosts({3})), (std::vector<int>{0}));
  EXPECT_TRUE(hostLeaders({}).empty());
}

TEST(LinkProbe, RankZeroProbesOtherHostsLeadersUpToTheLimit) {
  EXPECT_TRUE(probeTargets(onHosts({1, 1, 1})).empty()) << "one host costs nothing";
  EXPECT_EQ(probeTargets(onHosts({5, 5, 9, 5, 7, 9})), (std::vector<int>{2, 4}));
  std::vector<uint64_t> many;
  for (int h = 0; h < kMaxProbedHosts + 3; ++h) many.insert(many.end(), {uint64_t(h), uint64_t(h)});
  const std::vector<int> targets = probeTargets(onHosts(many));
  ASSERT_EQ(targets.size(), size_t(kMaxProbedHosts));
  for (int i = 0; i < kMaxProbedHosts; ++i) EXPECT_EQ(targets[size_t(i)], 2 * (i + 1));
}

TEST(LinkProbe, LatencyIsHalfTheMedianRoundTrip) {
  EXPECT_DOUBLE_EQ(oneWayLatencyUs({30, 10, 500, 20, 24}), 12.0);  // an outlier does not count
  EXPECT_DOUBLE_EQ(oneWayLatencyUs({40, 10, 20, 30}), 12.5);
  EXPECT_DOUBLE_EQ(oneWayLatencyUs({8}), 4.0);
  EXPECT_DOUBLE_EQ(oneWayLatencyUs({}), 0.0);
}

TEST(LinkProbe, BandwidthDiscountsOneRoundTripAtMostHalfTheTime) {
  // 1 MB in 1100 us of which 100 us are the round trip: 1 GB/s.
  EXPECT_NEAR(streamGBps(1000000, 1100, 100), 1.0, 1e-12);
  // A round trip longer than half the stream (noise) discounts only half.
  EXPECT_NEAR(streamGBps(1000000, 1000, 900), 2.0, 1e-12);
  EXPECT_NEAR(streamGBps(1000000, 2000, 0), 0.5, 1e-12);
  EXPECT_EQ(streamGBps(0, 1000, 10), 0.0);
  EXPECT_EQ(streamGBps(1000, 0, 10), 0.0);
}

TEST(LinkProbe, SlowestLinkTakesTheWorstOfEach) {
  LinkFigures a{10, 18, 5.0, 0, 0, 2};
  LinkFigures b{40, 70, 9.0, 0, 0, 4};
  LinkFigures c{20, 35, 0.05, 0, 0, 6};
  const LinkFigures worst = slowestLink({a, b, c});
  EXPECT_EQ(worst.latencyUs, 40);
  EXPECT_EQ(worst.gbps, 0.05);
  EXPECT_EQ(worst.peer, 6);
  EXPECT_EQ(slowestLink({b}).peer, 4);
}

/// Runs runNetworkProbe on threads joined over loopback, ranks placed on hostOf[rank]; then
/// an all-gather proves the bootstrap still works. Returns each rank's probe (or the error).
std::vector<NetworkProbe> runProbe(const std::vector<uint64_t>& hostOf, bool enabled,
                                   const LinkProbeOptions& options, std::vector<Status>* statuses) {
  const int n = static_cast<int>(hostOf.size());
  std::vector<NetworkProbe> out(hostOf.size());
  *statuses = onBootstrapThreads(n, kTimeout, [&](int r, Bootstrap& b) -> Status {
    out[size_t(r)] = runNetworkProbe(b, r, onHosts(hostOf), enabled, /*rdma=*/false, options);
    std::vector<int> ranks(size_t(n), 0);
    ranks[size_t(r)] = r;
    RETURN_IF_ERROR(b.allGather(ranks.data(), sizeof(int)));
    for (int q = 0; q < n; ++q) {
      if (ranks[size_t(q)] != q) return internalError("all-gather after the probe went wrong");
    }
    return okStatus();
  });
  return out;
}

LinkFigures figures(double latencyUs, double gbps) {
  LinkFigures f;
  f.latencyUs = latencyUs;
  f.gbps = gbps;
  return f;
}

// A later job on the same hosts keeps the first job's figures while today's are within 2x of
// them (so its cost model, and its tuner's grid, are the same), and measures anew past that.
TEST(LinkProbe, KeptFiguresStandWhileTodaysAreWithinTwiceThem) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("braid_link_" + std::to_string(getpid())))
          .string();
  const std::vector<RankPlacement> hosts = onHosts({5, 5, 9, 9});
  std::string why;
  LinkFigures used = keptLinkFigures(dir, hosts, figures(20, 1.0), why);
  EXPECT_EQ(used.latencyUs, 20);
  EXPECT_EQ(why, "; kept for these hosts");

  used = keptLinkFigures(dir, onHosts({9, 5, 9, 5}), figures(35, 0.6), why);  // same host set
  EXPECT_EQ(used.latencyUs, 20);
  EXPECT_EQ(used.gbps, 1.0);
  EXPECT_NE(why.find("the figures kept for these hosts, 20.0 us and 1.000 GB/s"), std::string::npos)
      << why;

  used = keptLinkFigures(dir, hosts, figures(25, 0.4), why);  // bandwidth past 2x: measured
  EXPECT_EQ(used.latencyUs, 25);
  EXPECT_EQ(used.gbps, 0.4);
  EXPECT_EQ(why, "; kept for these hosts");
  EXPECT_EQ(keptLinkFigures(dir, hosts, figures(45, 0.5), why).latencyUs, 25);
  EXPECT_EQ(keptLinkFigures(dir, hosts, figures(51, 0.5), why).latencyUs, 51);

  // Other hosts have figures of their own; without a folder nothing is kept.
  EXPECT_EQ(keptLinkFigures(dir, onHosts({5, 7}), figures(60, 0.5), why).latencyUs, 60);
  EXPECT_EQ(keptLinkFigures("", hosts, figures(80, 0.5), why).latencyUs, 80);
  EXPECT_EQ(keptLinkFigures(dir, hosts, figures(80, 0.5), why).latencyUs, 51);
  std::filesystem::remove_all(dir);
}

TEST(LinkProbe, LeadersMeasureAndOthersStayOut) {
  std::vector<Status> statuses;
  LinkProbeOptions options;
  options.maxStreamBytes = 1 << 20;
  // Hosts: {0, 3} on A, {1, 4} on B, {2} on C.
  const std::vector<NetworkProbe> p = runProbe({7, 8, 9, 7, 8}, true, options, &statuses);
  for (size_t r = 0; r < statuses.size(); ++r) {
    ASSERT_TRUE(statuses[r].ok()) << r << ": " << statuses[r].message();
  }
  ASSERT_TRUE(p[0].figures.has_value()) << p[0].note;
  const LinkFigures& f = *p[0].figures;
  EXPECT_TRUE(f.peer == 1 || f.peer == 2) << f.peer;
  EXPECT_GT(f.latencyUs, 0);
  EXPECT_GE(f.minRoundTripUs, 0);
  EXPECT_LE(f.minRoundTripUs, 2 * f.latencyUs);
  EXPECT_GT(f.gbps, 0);
  EXPECT_GT(f.streamBytes, 0u);
  EXPECT_LE(f.streamBytes, options.maxStreamBytes);
  EXPECT_EQ(f.streamBytes % options.chunkBytes, 0u);
  EXPECT_NE(p[0].note.find("probed 2 links"), std::string::npos) << p[0].note;
  EXPECT_TRUE(p[0].ran);
  for (int r : {1, 2}) {
    EXPECT_TRUE(p[size_t(r)].ran) << r;
    EXPECT_FALSE(p[size_t(r)].figures.has_value()) << r;
    EXPECT_TRUE(p[size_t(r)].note.empty()) << r << ": " << p[size_t(r)].note;
  }
  for (int r : {3, 4}) EXPECT_FALSE(p[size_t(r)].ran) << r;
}

TEST(LinkProbe, StreamStopsAtItsByteLimitOrAfterItsTimeBudget) {
  std::vector<Status> statuses;
  LinkProbeOptions bytesBound;
  bytesBound.chunkBytes = 64 << 10;
  bytesBound.maxStreamBytes = 3 * (64 << 10) + 100;  // room for three chunks, not four
  bytesBound.streamBudgetUs = 1e9;
  std::vector<NetworkProbe> p = runProbe({1, 2}, true, bytesBound, &statuses);
  ASSERT_TRUE(statuses[0].ok() && statuses[1].ok());
  ASSERT_TRUE(p[0].figures.has_value()) << p[0].note;
  EXPECT_EQ(p[0].figures->streamBytes, 3u * (64 << 10));

  LinkProbeOptions timeBound;
  timeBound.streamBudgetUs = 0;  // one chunk, then the budget is spent
  p = runProbe({1, 2}, true, timeBound, &statuses);
  ASSERT_TRUE(statuses[0].ok() && statuses[1].ok());
  ASSERT_TRUE(p[0].figures.has_value()) << p[0].note;
  EXPECT_EQ(p[0].figures->streamBytes, uint64_t{timeBound.chunkBytes});
}

TEST(LinkProbe, DisabledProbeOnlyReleasesTheLeaders) {
  std::vector<Status> statuses;
  const std::vector<NetworkProbe> p = runProbe({1, 2, 3}, false, {}, &statuses);
  for (size_t r = 0; r < statuses.size(); ++r) {
    ASSERT_TRUE(statuses[r].ok()) << r << ": " << statuses[r].message();
  }
  EXPECT_FALSE(p[0].figures.has_value());
  EXPECT_EQ(p[0].note, "BRAID_NET_PROBE=0");
  EXPECT_TRUE(p[1].ran && p[2].ran);
  EXPECT_TRUE(p[1].note.empty() && p[2].note.empty());
}

TEST(LinkProbe, OneHostSendsNothing) {
  std::vector<Status> statuses;
  const std::vector<NetworkProbe> p = runProbe({4, 4, 4}, true, {}, &statuses);
  for (size_t r = 0; r < p.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok()) << statuses[r].message();
    EXPECT_FALSE(p[r].ran);
    EXPECT_FALSE(p[r].figures.has_value());
  }
}

}  // namespace
}  // namespace braid
