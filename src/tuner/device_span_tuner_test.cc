// DeviceSpanTuner: device calls over GPU islands linked by staged hops (no GPU needed: the choice
// is a simulation of plans on the device machine's model).
#include "tuner/device_span_tuner.h"

#include <gtest/gtest.h>

#include <vector>

#include "algorithms/algorithms.h"

namespace braid {
namespace {

TunerOptions optionsFor(int nranks, const std::string& algo = "") {
  TunerOptions o;
  o.nranks = nranks;
  o.maxChannels = 32;
  o.slotBytes = 512 << 10;
  o.nslots = 4;
  o.algo = algo;
  return o;
}

std::unique_ptr<DeviceSpanTuner> make(const std::vector<int>& islands,
                                      const DeviceLinkCosts& costs = {},
                                      const std::string& algo = "") {
  Result<std::unique_ptr<DeviceSpanTuner>> t = DeviceSpanTuner::create(
      optionsFor(static_cast<int>(islands.size()), algo), 256 << 10, islands, {}, costs);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? std::move(t).value() : nullptr;
}

double predicted(const DeviceSpanTuner& t, Algorithm algo, uint64_t bytes) {
  Result<double> us = t.predict(Collective::kAllReduce, algo, bytes, 128 << 10);
  EXPECT_TRUE(us.ok()) << us.status().message();
  return us.ok() ? us.value() : -1;
}

TEST(DeviceSpanTuner, SpansIslandsOnlyWithTwoOrMore) {
  EXPECT_FALSE(DeviceSpanTuner::spansIslands({}));
  EXPECT_FALSE(DeviceSpanTuner::spansIslands({3, 3, 3}));
  EXPECT_TRUE(DeviceSpanTuner::spansIslands({0, 0, 1}));
  EXPECT_TRUE(DeviceSpanTuner::spansIslands({0, 1}));
}

TEST(DeviceSpanTuner, AllReduceAcrossHostsOfSeveralGpusIsHierarchical) {
  // Hosts of two, three and four GPUs, islands numbered as p2p finds them (any values).
  for (const std::vector<int>& islands :
       {std::vector<int>{0, 0, 1, 1}, std::vector<int>{0, 0, 0, 1, 1, 1},
        std::vector<int>{7, 7, 7, 7, 2, 2, 2, 2}}) {
    std::unique_ptr<DeviceSpanTuner> t = make(islands);
    ASSERT_NE(t, nullptr);
    for (uint64_t bytes : {uint64_t{16} << 20, uint64_t{256} << 20, uint64_t{1} << 30}) {
      const Choice c = t->choose(Collective::kAllReduce, bytes);
      EXPECT_EQ(c.algo, Algorithm::kHier)
          << islands.size() << " ranks, " << bytes << " bytes: " << algorithmName(c.algo);
      EXPECT_EQ(c.source, ChoiceSource::kModel);
      EXPECT_GT(c.predictedUs, 0);
      EXPECT_LE(c.chunkBytes, 512u << 10);
      EXPECT_EQ(c.nchannels, 32);  // a channel per 256 KiB, as the device path spreads calls
    }
    // The ring's staged hops carry 2(n-1)/n of the message over one link per island, the
    // hierarchical all-reduce's 2(h-1)/h spread over every GPU of it.
    const uint64_t large = uint64_t{256} << 20;
    EXPECT_LT(predicted(*t, Algorithm::kHier, large),
              0.75 * predicted(*t, Algorithm::kRing, large));
    // Small calls are latency: fewer staged hops than the hierarchy's 2(m-1) + 2(h-1) win.
    const Choice small = t->choose(Collective::kAllReduce, 1024);
    EXPECT_LT(small.predictedUs, predicted(*t, Algorithm::kHier, 1024));
  }
}

TEST(DeviceSpanTuner, IslandsAreNumberedDenselyInRankOrder) {
  std::unique_ptr<DeviceSpanTuner> t = make({5, 5, 2, 2, 9});
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->islands(), (std::vector<int>{0, 0, 1, 1, 2}));
  EXPECT_NE(t->describe().find("3 GPU islands (2+2+1 ranks)"), std::string::npos) << t->describe();
}

TEST(DeviceSpanTuner, StagedHopsCostHostCopiesAndTheNetwork) {
  const uint64_t bytes = uint64_t{64} << 20;
  std::unique_ptr<DeviceSpanTuner> oneHost = make({0, 0, 0, 0});
  std::unique_ptr<DeviceSpanTuner> twoHosts = make({0, 0, 1, 1});
  ASSERT_NE(oneHost, nullptr);
  ASSERT_NE(twoHosts, nullptr);
  // The same ring is far slower once two of its hops are staged.
  EXPECT_GT(predicted(*twoHosts, Algorithm::kRing, bytes),
            3 * predicted(*oneHost, Algorithm::kRing, bytes));

  // A slower network or host link slows the staged calls; GPU-memory hops do not see them.
  DeviceLinkCosts slowNet;
  slowNet.networkGBps /= 4;
  DeviceLinkCosts slowCopy;
  slowCopy.hostCopyGBps = slowCopy.networkGBps / 8;
  const double base = predicted(*twoHosts, Algorithm::kHier, bytes);
  EXPECT_GT(predicted(*make({0, 0, 1, 1}, slowNet), Algorithm::kHier, bytes), 2 * base);
  EXPECT_GT(predicted(*make({0, 0, 1, 1}, slowCopy), Algorithm::kHier, bytes), 2 * base);
  EXPECT_DOUBLE_EQ(predicted(*make({0, 0, 0, 0}, slowNet), Algorithm::kRing, bytes),
                   predicted(*oneHost, Algorithm::kRing, bytes));
  // And network latency what small calls pay.
  DeviceLinkCosts farHosts;
  farHosts.networkLatencyUs *= 10;
  EXPECT_GT(predicted(*make({0, 0, 1, 1}, farHosts), Algorithm::kHier, 4096),
            predicted(*twoHosts, Algorithm::kHier, 4096) + farHosts.networkLatencyUs);
}

TEST(DeviceSpanTuner, EveryCollectiveGetsAPricedChoice) {
  std::unique_ptr<DeviceSpanTuner> t = make({0, 0, 1, 1});
  ASSERT_NE(t, nullptr);
  for (Collective coll :
       {Collective::kAllReduce, Collective::kBroadcast, Collective::kReduce, Collective::kAllGather,
        Collective::kReduceScatter, Collective::kAllToAll}) {
    EXPECT_TRUE(DeviceSpanTuner::models(coll));
    const Choice c = t->choose(coll, 1 << 20);
    EXPECT_TRUE(algorithmServes(c.algo, coll)) << collectiveName(coll);
    EXPECT_GT(c.predictedUs, 0) << collectiveName(coll);
  }
  EXPECT_FALSE(DeviceSpanTuner::models(Collective::kSend));
  EXPECT_FALSE(DeviceSpanTuner::models(Collective::kRecv));
}

TEST(DeviceSpanTuner, RanksAgreeOnEveryChoice) {
  // Two tuners from the same inputs (two ranks) choose alike at every grid point.
  std::unique_ptr<DeviceSpanTuner> a = make({0, 0, 1, 1, 1});
  std::unique_ptr<DeviceSpanTuner> b = make({0, 0, 1, 1, 1});
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  for (int k = 0; k <= 28; k += 2) {
    const Choice x = a->choose(Collective::kAllReduce, uint64_t{1} << k);
    const Choice y = b->choose(Collective::kAllReduce, uint64_t{1} << k);
    EXPECT_EQ(x.algo, y.algo) << k;
    EXPECT_EQ(x.chunkBytes, y.chunkBytes) << k;
    EXPECT_EQ(x.predictedUs, y.predictedUs) << k;
  }
}

TEST(DeviceSpanTuner, HonoursBraidAlgoAndFixedChunks) {
  std::unique_ptr<DeviceSpanTuner> t = make({0, 0, 1, 1}, {}, "allreduce:ring");
  ASSERT_NE(t, nullptr);
  const Choice c = t->choose(Collective::kAllReduce, 16 << 20);
  EXPECT_EQ(c.algo, Algorithm::kRing);
  EXPECT_EQ(c.source, ChoiceSource::kOverride);

  TunerOptions options = optionsFor(4);
  options.chunkBytes = 64 << 10;
  options.nchannels = 2;
  Result<std::unique_ptr<DeviceSpanTuner>> fixed =
      DeviceSpanTuner::create(options, 256 << 10, {0, 0, 1, 1}, {}, {});
  ASSERT_TRUE(fixed.ok()) << fixed.status().message();
  const Choice f = fixed.value()->choose(Collective::kAllReduce, 16 << 20);
  EXPECT_EQ(f.chunkBytes, 64u << 10);
  EXPECT_EQ(f.nchannels, 2);
}

TEST(DeviceSpanTuner, BadInputIsNamed) {
  Result<std::unique_ptr<DeviceSpanTuner>> t =
      DeviceSpanTuner::create(optionsFor(4), 256 << 10, {0, 1}, {}, {});
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("islands of 2 ranks for a communicator of 4"),
            std::string::npos)
      << t.status().message();
  DeviceLinkCosts none;
  none.networkGBps = 0;
  t = DeviceSpanTuner::create(optionsFor(2), 256 << 10, {0, 1}, {}, none);
  EXPECT_FALSE(t.ok());
  t = DeviceSpanTuner::create(optionsFor(2, "allreduce:nosuch"), 256 << 10, {0, 1}, {}, {});
  EXPECT_FALSE(t.ok());
}

}  // namespace
}  // namespace braid
