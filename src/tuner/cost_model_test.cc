#include "tuner/cost_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "algorithms/algorithms.h"
#include "topology/discover.h"
#include "topology/locality.h"
#include "topology/topology_test_data.h"

namespace braid {
namespace {

ModelConstants constants(double hopUs = 1.0, double crowdedHopUs = 5.0) {
  ModelConstants m;
  Calibration& c = m.calibration;
  c.stepUs = 0.05;
  c.hopUs = hopUs;
  c.crowdedHopUs = crowdedHopUs;
  c.copyCacheGBps = 20;
  c.copyDramGBps = 10;
  c.reduceCacheGBps = 15;
  c.reduceDramGBps = 8;
  c.transferGBps = 25;
  c.cacheMiB = 1e6;  // measured no smaller than the topology's
  c.cpus = 8;
  m.host.cores = 8;
  m.host.llcBytes = 32ull << 20;
  m.host.socketCrossingUs = 0.06;
  m.host.networkLatencyUs = 1.0;
  m.host.networkGBps = 12.5;
  return m;
}

// n ranks on one host, each bound to `coresEach` cores (0: unbound).
std::vector<RankPlacement> oneHost(int n, int coresEach = 1) {
  std::vector<RankPlacement> p(static_cast<size_t>(n));
  for (RankPlacement& x : p) {
    x.hostHash = 42;
    x.locality.cores = coresEach;
    x.locality.package = 0;
  }
  return p;
}

CostModel model(const ModelConstants& c, const std::vector<RankPlacement>& p) {
  Result<CostModel> m = CostModel::create(c, p, {}, 4);
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? std::move(m).value() : CostModel();
}

double predict(const CostModel& m, Algorithm a, uint64_t bytes, uint32_t chunk = 128 << 10,
               int channels = 1) {
  Result<double> t = m.predict(Collective::kAllReduce, a, bytes, chunk, channels);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? t.value() : -1;
}

TEST(CostModel, ConstantsTravelBitExact) {
  ModelConstants c = constants();
  c.calibration.hopUs = 1.0 / 3.0;
  c.host.llcBytes = 123456789;
  c.host.coreCacheBytes = 1234567;
  c.calibration.copyLlcGBps = 12.0 / 7.0;
  uint8_t wire[kModelConstantsWireBytes];
  encodeModelConstants(c, wire);
  EXPECT_EQ(decodeModelConstants(wire), c);
}

TEST(CostModel, TinyMessagesCostTheirSequentialHops) {
  // Hops dominate: ring 2(n-1), rhd 2 log2 n, rd log2 n, direct one round.
  const CostModel m = model(constants(10.0, 10.0), oneHost(8));
  const double ring = predict(m, Algorithm::kRing, 32);
  const double rhd = predict(m, Algorithm::kRhd, 32);
  const double rd = predict(m, Algorithm::kRd, 32);
  const double direct = predict(m, Algorithm::kDirect, 32);
  EXPECT_NEAR(ring / rd, 14.0 / 3.0, 0.5);
  EXPECT_NEAR(rhd / rd, 2.0, 0.3);
  EXPECT_LT(direct, rd);
  EXPECT_GT(direct, 10.0);  // at least one hop
}

TEST(CostModel, LargeMessagesCostTheirBytes) {
  // Bytes dominate: ring and rhd move 2(n-1)/n N per rank, rd log2(n) N, direct (n-1) N.
  const CostModel m = model(constants(0.01, 0.01), oneHost(8));
  const uint64_t n = 256ull << 20;
  const double ring = predict(m, Algorithm::kRing, n, 512 << 10);
  const double rd = predict(m, Algorithm::kRd, n, 512 << 10);
  const double direct = predict(m, Algorithm::kDirect, n, 512 << 10);
  EXPECT_LT(ring, rd);
  EXPECT_LT(rd, direct);
  // At memory rates a rank's share of the ring is at least 2(n-1)/n N / copy rate.
  EXPECT_GT(ring, 1.75 * double(n) / (10 * 1e3));
}

TEST(CostModel, CrowdedHostsAreSlower) {
  // Four ranks bound to one core each on 8 cores, and the same four sharing two cores.
  const CostModel roomy = model(constants(), oneHost(4, 1));
  ModelConstants two = constants();
  two.host.cores = 2;
  const CostModel crowded = model(two, oneHost(4, 0));
  for (Algorithm a : algorithmsFor(Collective::kAllReduce)) {
    // Small messages pay the crowded hand-off (5 us instead of 1) on every hop.
    EXPECT_GT(predict(crowded, a, 64), 1.5 * predict(roomy, a, 64)) << algorithmName(a);
    // Large ones share two cores among four ranks; ranks with less to do (a tree's leaves) leave
    // the cores to the busier ones, so the loss is below the factor of two.
    EXPECT_GT(predict(crowded, a, 1 << 24), 1.2 * predict(roomy, a, 1 << 24)) << algorithmName(a);
  }
  EXPECT_NE(crowded.describe().find("ranks/core up to 2.00"), std::string::npos)
      << crowded.describe();
}

TEST(CostModel, CoreSharersPayTheSwitchFactorOnceTheyOutgrowTheCoreCache) {
  // Three ranks on two cores with 1 MiB core caches: a rank that takes the core after another
  // finds its data evicted only once the core's ranks fill much of the cache together.
  ModelConstants plain = constants();
  plain.host.cores = 2;
  plain.host.coreCacheBytes = 1ull << 20;
  ModelConstants switching = plain;
  switching.calibration.crowdedSwitchFactor = 4;
  const CostModel free = model(plain, oneHost(3, 0));
  const CostModel costly = model(switching, oneHost(3, 0));
  for (Algorithm a : {Algorithm::kRing, Algorithm::kRd, Algorithm::kTree}) {
    EXPECT_DOUBLE_EQ(predict(costly, a, 4 << 10, 4 << 10), predict(free, a, 4 << 10, 4 << 10))
        << algorithmName(a);
    EXPECT_GT(predict(costly, a, 1 << 20), 1.1 * predict(free, a, 1 << 20)) << algorithmName(a);
  }
  // Other collectives pay it at every size.
  const auto broadcast = [](const CostModel& m) {
    Result<double> t = m.predict(Collective::kBroadcast, Algorithm::kRing, 4 << 10, 4 << 10, 1);
    EXPECT_TRUE(t.ok()) << t.status().message();
    return t.ok() ? t.value() : -1;
  };
  EXPECT_GT(broadcast(costly), broadcast(free));
}

TEST(CostModel, RanksBoundToTheSameCoreShareIt) {
  // Four ranks on an 8-core host, each bound to one core: the cores they name, not the count of
  // their bindings, are what they share.
  std::vector<RankPlacement> spread = oneHost(4, 1);
  for (int r = 0; r < 4; ++r) spread[size_t(r)].locality.core = r;
  std::vector<RankPlacement> pairs = oneHost(4, 1);
  for (int r = 0; r < 4; ++r) pairs[size_t(r)].locality.core = 6 + r % 2;
  std::vector<RankPlacement> stacked = oneHost(4, 1);
  for (RankPlacement& p : stacked) p.locality.core = 3;
  const CostModel roomy = model(constants(), spread);
  const CostModel paired = model(constants(), pairs);
  const CostModel one = model(constants(), stacked);
  EXPECT_NE(roomy.describe().find("4 core(s) for them (ranks/core up to 1.00)"), std::string::npos)
      << roomy.describe();
  EXPECT_NE(paired.describe().find("2 core(s) for them (ranks/core up to 2.00)"), std::string::npos)
      << paired.describe();
  EXPECT_NE(one.describe().find("1 core(s) for them (ranks/core up to 4.00)"), std::string::npos)
      << one.describe();
  for (Algorithm a : algorithmsFor(Collective::kAllReduce)) {
    EXPECT_GT(predict(paired, a, 64), 1.5 * predict(roomy, a, 64)) << algorithmName(a);
    EXPECT_GT(predict(one, a, 1 << 20), predict(paired, a, 1 << 20)) << algorithmName(a);
  }
}

TEST(CostModel, FifoSlotsShareTheCacheWithTheBuffers) {
  // Two ranks moving 7 MiB each keep 28 MiB of buffers, under the 32 MiB LLC. Their FIFOs add
  // what their slots hold: with 512 KiB chunks on four channels, 4 slots x 512 KiB x 4 channels
  // per rank, 16 MiB in all, which pushes the working set out of the cache; 32 KiB chunks on one
  // channel add 256 KiB and leave it there.
  ModelConstants c = constants(0.01, 0.01);
  c.calibration.copyDramGBps = 2;  // memory far slower than the caches, so the share shows
  const CostModel m = model(c, oneHost(2));
  const uint64_t bytes = 7ull << 20;
  const double small = predict(m, Algorithm::kRing, bytes, 32 << 10, 1);
  const double large = predict(m, Algorithm::kRing, bytes, 512 << 10, 4);
  // All cached, a byte costs the same either way; only the slots' share of the cache differs.
  EXPECT_GT(large, 1.3 * small);
  // Without the slots the larger chunks would be at least as fast: their steps are fewer.
  ModelConstants big = c;
  big.host.llcBytes = 1ull << 30;
  big.host.coreCacheBytes = 1ull << 30;
  const CostModel roomy = model(big, oneHost(2));
  EXPECT_LE(predict(roomy, Algorithm::kRing, bytes, 512 << 10, 4),
            predict(roomy, Algorithm::kRing, bytes, 32 << 10, 1));
}

TEST(CostModel, RecursiveDoublingOverThreeRanksKeepsTwoRanksBuffersInTheCache) {
  // 8 MiB per rank: two ranks' buffers (32 MiB) fit a 44 MiB cache, three ranks' (48) do not.
  // Recursive doubling at 3 ranks works on two ranks' buffers at a time; a ring on all three.
  ModelConstants c = constants(0.01, 0.01);
  c.calibration.copyDramGBps = 2;  // memory far slower than the caches, so the share shows
  c.host.llcBytes = 44ull << 20;
  ModelConstants roomy = c;
  roomy.host.llcBytes = 1ull << 30;
  const CostModel fits = model(c, oneHost(3));
  const CostModel huge = model(roomy, oneHost(3));
  const uint64_t bytes = 8ull << 20;
  EXPECT_DOUBLE_EQ(predict(fits, Algorithm::kRd, bytes), predict(huge, Algorithm::kRd, bytes));
  EXPECT_GT(predict(fits, Algorithm::kRing, bytes), 1.1 * predict(huge, Algorithm::kRing, bytes));
}

TEST(CostModel, ACacheMeasuredSmallerThanTheTopologysIsTheOneThatCounts) {
  // A virtual machine's topology may claim the whole socket's L3; the calibration measured what
  // the data path gets. 7 MiB per rank at n = 2 fits the claimed 1 GiB but not a measured 4 MiB.
  ModelConstants claimed = constants(0.01, 0.01);
  claimed.calibration.copyDramGBps = 2;
  claimed.host.llcBytes = 1ull << 30;
  ModelConstants measured = claimed;
  measured.calibration.cacheMiB = 4;
  const uint64_t bytes = 7ull << 20;
  const double roomy = predict(model(claimed, oneHost(2)), Algorithm::kRing, bytes);
  const double tight = predict(model(measured, oneHost(2)), Algorithm::kRing, bytes);
  EXPECT_GT(tight, 1.5 * roomy);
  // A measurement larger than the topology's figure changes nothing.
  ModelConstants larger = claimed;
  larger.calibration.cacheMiB = 4096;
  EXPECT_DOUBLE_EQ(predict(model(larger, oneHost(2)), Algorithm::kRing, bytes), roomy);
}

TEST(CostModel, BuffersTheLastLevelCacheHoldsCostItsMeasuredRate) {
  // Two ranks, one 2 MiB core cache each, a 256 MiB LLC whose copy rate was measured at 5 GB/s
  // (a quarter of the core cache's 20). 7 MiB per rank (28 MiB of buffers) lives in the LLC:
  // it pays that rate over the core cache's, where a calibration without the figure served it
  // free. 256 KiB per rank stays in the cores' own caches and costs the same either way.
  ModelConstants unmeasured = constants(0.01, 0.01);
  unmeasured.host.llcBytes = 256ull << 20;
  unmeasured.host.coreCacheBytes = 2ull << 20;
  ModelConstants measured = unmeasured;
  measured.calibration.copyLlcGBps = 5;
  const CostModel before = model(unmeasured, oneHost(2));
  const CostModel after = model(measured, oneHost(2));
  const uint64_t large = 7ull << 20;
  EXPECT_GT(predict(after, Algorithm::kRing, large),
            1.2 * predict(before, Algorithm::kRing, large));
  const uint64_t small = 256ull << 10;
  EXPECT_DOUBLE_EQ(predict(after, Algorithm::kRing, small),
                   predict(before, Algorithm::kRing, small));
  // Beyond the LLC, memory's rate counts as before: the measured LLC rate only adds its share.
  const uint64_t huge = 256ull << 20;
  const double beyond = predict(after, Algorithm::kRing, huge);
  EXPECT_GE(beyond, predict(before, Algorithm::kRing, huge));
  EXPECT_LT(beyond, 1.2 * predict(before, Algorithm::kRing, huge));
}

TEST(CostModel, ChunksInFlightBeyondTheCoreCacheGoAtMemorySpeed) {
  ModelConstants c = constants(0.01, 0.01);
  c.calibration.copyDramGBps = 2;
  c.calibration.reduceDramGBps = 2;
  c.host.coreCacheBytes = 1ull << 20;
  ModelConstants roomy = c;
  roomy.host.coreCacheBytes = 64ull << 20;
  const CostModel tight = model(c, oneHost(4));
  const CostModel wide = model(roomy, oneHost(4));
  const uint64_t bytes = 16ull << 20;
  // A step reads a chunk and writes one: 128 KiB chunks on four channels touch 1 MiB at once
  // and fit a 1 MiB core cache, so the two machines agree.
  EXPECT_DOUBLE_EQ(predict(tight, Algorithm::kRing, bytes, 128 << 10, 4),
                   predict(wide, Algorithm::kRing, bytes, 128 << 10, 4));
  // 512 KiB chunks on four channels touch 4 MiB: three quarters go at memory speed.
  const double overflowing = predict(tight, Algorithm::kRing, bytes, 512 << 10, 4);
  EXPECT_GT(overflowing, 1.3 * predict(wide, Algorithm::kRing, bytes, 512 << 10, 4));
  EXPECT_GT(overflowing, predict(tight, Algorithm::kRing, bytes, 128 << 10, 4));
  // A message of 256 KiB touches 512 KiB at most, whatever the chunk.
  EXPECT_DOUBLE_EQ(predict(tight, Algorithm::kRing, 256 << 10, 512 << 10, 4),
                   predict(wide, Algorithm::kRing, 256 << 10, 512 << 10, 4));
}

TEST(CostModel, ExtrapolationIsContinuous) {
  const CostModel m = model(constants(), oneHost(4));
  for (Algorithm a : algorithmsFor(Collective::kAllReduce)) {
    // Messages above two spans are extrapolated: the ring all-reduce's span is 2 rounds of 4
    // chunks (256 KiB with 32K chunks), the others' 4 chunks (128 KiB).
    const uint64_t edge = a == Algorithm::kRing ? 512 << 10 : 256 << 10;
    const double at = predict(m, a, edge, 32 << 10);
    const double beyond = predict(m, a, edge + 4096, 32 << 10);
    EXPECT_GE(beyond, at * 0.98) << algorithmName(a);
    EXPECT_LT(beyond, at * 1.05) << algorithmName(a);
  }
}

TEST(CostModel, EveryCollectiveAndAlgorithmIsCosted) {
  const CostModel m = model(constants(), oneHost(5));
  for (int c = 0; c < 6; ++c) {
    const auto coll = static_cast<Collective>(c);
    for (Algorithm a : algorithmsFor(coll)) {
      for (uint64_t bytes : {uint64_t{1}, uint64_t{4096}, uint64_t{3} << 20}) {
        Result<double> t = m.predict(coll, a, bytes, 32 << 10, 2);
        ASSERT_TRUE(t.ok()) << collectiveName(coll) << "/" << algorithmName(a) << ": "
                            << t.status().message();
        EXPECT_GT(t.value(), 0);
      }
    }
  }
  EXPECT_FALSE(m.predict(Collective::kSend, Algorithm::kPairwise, 8, 1024, 1).ok());
  EXPECT_FALSE(m.predict(Collective::kAllToAll, Algorithm::kRing, 8, 1024, 1).ok());
}

TEST(CostModel, BadInputsAreErrors) {
  ModelConstants bad = constants();
  bad.calibration.copyDramGBps = 0;
  EXPECT_FALSE(CostModel::create(bad, oneHost(2), {}, 4).ok());
  EXPECT_FALSE(CostModel::create(constants(), oneHost(3), {0, 1}, 4).ok());
  EXPECT_FALSE(CostModel::create(constants(), {}, {}, 4).ok());
  // Ranks on two hosts with no network rate: every crossing would take forever.
  std::vector<RankPlacement> twoHosts = oneHost(4);
  twoHosts[2].hostHash = twoHosts[3].hostHash = 43;
  ModelConstants noNetwork = constants();
  noNetwork.host.networkGBps = 0;
  const Result<CostModel> m = CostModel::create(noNetwork, twoHosts, {}, 4);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), braidInvalidArgument);
  EXPECT_NE(m.status().message().find("network rate"), std::string::npos) << m.status().message();
  EXPECT_TRUE(CostModel::create(noNetwork, oneHost(4), {}, 4).ok());  // one host needs none
}

class CostModelOnDescribedMachines : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!hwlocAvailable()) GTEST_SKIP() << "built without hwloc";
  }
  static Topology load(const std::string& name) {
    TopologyOptions options;
    options.xmlFile = std::string(BRAID_TEST_DATA_DIR) + "/" + name;
    Result<Topology> t = discoverTopology(options);
    EXPECT_TRUE(t.ok()) << t.status().message();
    return t.ok() ? std::move(t).value() : Topology();
  }
};

TEST_F(CostModelOnDescribedMachines, HostShapesComeFromTheTopology) {
  const HostShape cpu = hostShapeOf(load("cpu_2socket.xml"));
  EXPECT_EQ(cpu.cores, 32);
  EXPECT_GT(cpu.llcBytes, 0u);
  EXPECT_EQ(cpu.coreCacheBytes, 0u);  // the file describes the L3s alone: unknown
  // Two half-crossings of the default inter-socket link (topology.cc).
  EXPECT_NEAR(cpu.socketCrossingUs, 0.06, 1e-9);
  const HostShape gpu = hostShapeOf(load("gpu8_host_a.xml"));
  EXPECT_EQ(gpu.cores, 16);
  // The ConnectX-6 ports: 200 Gbit/s = 25 GB/s.
  EXPECT_NEAR(gpu.networkGBps, 25.0, 1e-9);
  EXPECT_GT(gpu.networkLatencyUs, 0.5);
}

TEST_F(CostModelOnDescribedMachines, CrossingHostsCostsTheNetwork) {
  const Topology a = load("gpu8_host_a.xml");
  ModelConstants c = constants();
  c.host = hostShapeOf(a);
  // A network slower than memory, so that its bandwidth, not the halved working set per host,
  // decides the long messages.
  c.host.networkGBps = 2.0;
  std::vector<RankPlacement> oneBox(8);
  std::vector<RankPlacement> twoBoxes(8);
  for (int r = 0; r < 8; ++r) {
    oneBox[r].hostHash = 1;
    oneBox[r].locality = computeLocality(a, a.allPus());
    twoBoxes[r] = oneBox[r];
    twoBoxes[r].hostHash = r < 4 ? 1 : 2;
  }
  const CostModel local = model(c, oneBox);
  const CostModel remote = model(c, twoBoxes);
  for (Algorithm algo : {Algorithm::kRing, Algorithm::kTree, Algorithm::kRhd}) {
    EXPECT_GT(predict(remote, algo, 8), predict(local, algo, 8)) << algorithmName(algo);
    EXPECT_GT(predict(remote, algo, 64 << 20), predict(local, algo, 64 << 20))
        << algorithmName(algo);
  }
}

// Hosts alike, contiguous in rank order, each rank with `cores` cores: the model as a
// communicator makes it (priced from one host's plans where they repeat), and the same machine
// with its ring given as an explicit order (which turns that off: every rank's plans).
struct HostsAlike {
  CostModel periodic;
  CostModel full;
};
HostsAlike hostsAlike(int hosts, int perHost, int cores) {
  std::vector<RankPlacement> p(static_cast<size_t>(hosts * perHost));
  std::vector<int> identity(p.size());
  for (size_t r = 0; r < p.size(); ++r) {
    p[r].hostHash = 100 + r / static_cast<size_t>(perHost);
    p[r].locality.cores = cores;
    p[r].locality.package = 0;
    identity[r] = static_cast<int>(r);
  }
  return {CostModel::create(constants(), p, {}, 4).value(),
          CostModel::create(constants(), p, identity, 4).value()};
}

// On hosts alike, contiguous in rank order, the model prices a call from one host's plans
// (simulatePeriodicPlans) instead of every rank's; the same ring given as an explicit order turns
// that off, and both must agree.
TEST(CostModel, OneHostsPlansPriceHostsAlikeAsEveryRanksDo) {
  const HostsAlike models = hostsAlike(4, 3, 1);
  const CostModel* periodic = &models.periodic;
  const CostModel* full = &models.full;
  for (Collective coll : {Collective::kAllReduce, Collective::kAllGather,
                          Collective::kReduceScatter, Collective::kBroadcast}) {
    for (Algorithm algo : {Algorithm::kRing, Algorithm::kTree, Algorithm::kRhd, Algorithm::kHier,
                           Algorithm::kHierRhd}) {
      if (!algorithmServes(algo, coll)) continue;
      for (uint64_t bytes : {uint64_t{4096}, uint64_t{3} << 20, uint64_t{64} << 20}) {
        Result<double> a = periodic->predict(coll, algo, bytes, 128 << 10, 2);
        Result<double> b = full->predict(coll, algo, bytes, 128 << 10, 2);
        ASSERT_EQ(a.ok(), b.ok());
        if (!a.ok()) continue;
        EXPECT_NEAR(*a, *b, 1e-9 * *b)
            << collectiveName(coll) << " " << algorithmName(algo) << " " << bytes << " B";
      }
    }
  }
}

// Recursive doubling and halving pair ranks that differ in one bit: over a power of two of hosts
// alike, one host's plans mapped by XOR price a call close to every rank's. Not to the bit: the
// full simulation runs a rank first when two have a task at the same moment, so partners on two
// hosts, alike as they are, may take turns differently.
TEST(CostModel, OneHostsPlansPriceXorPartnersNearlyAsEveryRanksDo) {
  const HostsAlike models = hostsAlike(8, 8, 2);
  const CostModel* periodic = &models.periodic;
  const CostModel* full = &models.full;
  int compared = 0;
  for (Collective coll :
       {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter}) {
    for (Algorithm algo : {Algorithm::kRd, Algorithm::kRhd, Algorithm::kHierRhd}) {
      if (!algorithmServes(algo, coll)) continue;
      for (uint64_t bytes : {uint64_t{64}, uint64_t{64} << 10, uint64_t{4} << 20}) {
        Result<double> a = periodic->predict(coll, algo, bytes, 128 << 10, 2);
        Result<double> b = full->predict(coll, algo, bytes, 128 << 10, 2);
        ASSERT_EQ(a.ok(), b.ok()) << collectiveName(coll) << " " << algorithmName(algo);
        if (!a.ok()) continue;
        ++compared;
        EXPECT_NEAR(*a, *b, 0.05 * *b)
            << collectiveName(coll) << " " << algorithmName(algo) << " " << bytes << " B";
      }
    }
  }
  EXPECT_GE(compared, 12);
}

// Elements that do not split evenly among the ranks and channels make every rank's plan its own;
// from 64 ranks on they are priced at the next even count, whose plans repeat host by host. From
// 4n elements that is near every rank's plans; below n elements, where most blocks are empty
// and cost nothing, an upper bound.
TEST(CostModel, UnevenBlocksArePricedAtTheNextEvenCount) {
  const HostsAlike models = hostsAlike(12, 8, 2);  // 96 ranks: no power of two
  for (Algorithm algo : {Algorithm::kRing, Algorithm::kHier}) {
    for (uint64_t bytes : {uint64_t{64}, uint64_t{1} << 20, uint64_t{3} << 20}) {
      Result<double> rounded =
          models.periodic.predict(Collective::kAllReduce, algo, bytes, 128 << 10, 2);
      Result<double> full = models.full.predict(Collective::kAllReduce, algo, bytes, 128 << 10, 2);
      ASSERT_TRUE(rounded.ok()) << rounded.status().message();
      ASSERT_TRUE(full.ok()) << full.status().message();
      if (bytes / 4 >= 4 * 96) {
        EXPECT_NEAR(*rounded, *full, 0.06 * *full) << algorithmName(algo) << " " << bytes << " B";
      } else {
        EXPECT_GE(*rounded, *full) << algorithmName(algo) << " " << bytes << " B";
        EXPECT_LE(*rounded, 3.5 * *full) << algorithmName(algo) << " " << bytes << " B";
      }
    }
  }
}

// An all-reduce by rd or rhd over 96 ranks folds 32 of them into neighbours first, hier_rhd
// over 12 hosts 4 hosts into others; priced from machines of 64 ranks or 8 hosts and the fold,
// each lands near the simulation of every rank's plans (here within 10%;
// docs/scale.md#folds-priced-from-a-power-of-two has more machines).
TEST(CostModel, FoldedRanksArePricedNearEveryRanksPlans) {
  const HostsAlike models = hostsAlike(12, 8, 1);
  for (Algorithm algo : {Algorithm::kRd, Algorithm::kRhd, Algorithm::kHierRhd}) {
    for (uint64_t bytes : {uint64_t{8}, uint64_t{64} << 10, uint64_t{8} << 20}) {
      Result<double> folded =
          models.periodic.predictFolded(Collective::kAllReduce, algo, bytes, 128 << 10, 2);
      Result<double> full = models.full.predict(Collective::kAllReduce, algo, bytes, 128 << 10, 2);
      ASSERT_TRUE(folded.ok()) << folded.status().message();
      ASSERT_TRUE(full.ok()) << full.status().message();
      EXPECT_NEAR(*folded, *full, 0.15 * *full) << algorithmName(algo) << " " << bytes << " B";
    }
  }
}

// From 256 ranks on, predict prices those calls so; nothing else is priced that way.
TEST(CostModel, FoldedRanksArePricedFromAPowerOfTwoAtScale) {
  const HostsAlike models = hostsAlike(33, 8, 1);  // 264 ranks (33 hosts): 256 and 8 folded in
  for (Algorithm algo : {Algorithm::kRd, Algorithm::kRhd, Algorithm::kHierRhd}) {
    for (uint64_t bytes : {uint64_t{64}, uint64_t{4} << 20}) {
      Result<double> priced =
          models.periodic.predict(Collective::kAllReduce, algo, bytes, 128 << 10, 2);
      Result<double> folded =
          models.periodic.predictFolded(Collective::kAllReduce, algo, bytes, 128 << 10, 2);
      ASSERT_TRUE(priced.ok()) << priced.status().message();
      ASSERT_TRUE(folded.ok()) << folded.status().message();
      EXPECT_EQ(*priced, *folded) << algorithmName(algo) << " " << bytes << " B";
    }
  }
  EXPECT_FALSE(
      models.periodic.predictFolded(Collective::kAllReduce, Algorithm::kRing, 4096, 128 << 10, 2)
          .ok());
  EXPECT_FALSE(
      models.periodic.predictFolded(Collective::kReduceScatter, Algorithm::kRhd, 64, 128 << 10, 2)
          .ok());
  const HostsAlike power = hostsAlike(8, 8, 1);
  Result<double> none =
      power.periodic.predictFolded(Collective::kAllReduce, Algorithm::kRd, 64, 128 << 10, 2);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("not priced by its fold"), std::string::npos)
      << none.status().message();
  EXPECT_FALSE(models
                   .full  // an explicit ring order: hosts not known alike
                   .predictFolded(Collective::kAllReduce, Algorithm::kRd, 64, 128 << 10, 2)
                   .ok());
}

// Reduce-scatter rhd at 1000 ranks folds ranks in pairs first, so its plans repeat neither by
// shift nor by XOR, and each has O(n) steps: too many to simulate all, so it is no candidate
// there; the ring beside it, whose plans repeat, is priced.
TEST(CostModel, CallsTooCostlyToSimulateAreNotPriced) {
  std::vector<RankPlacement> p(1000);
  for (size_t r = 0; r < p.size(); ++r) {
    p[r].hostHash = 100 + r / 8;
    p[r].locality.cores = 64;
    p[r].locality.package = 0;
  }
  const CostModel model = CostModel::create(constants(), p, {}, 4).value();
  // 8 KiB on 4 channels is simulated whole, 1 MiB on one from spans of it.
  for (auto [bytes, channels] :
       {std::pair{uint64_t{8} << 10, 4}, std::pair{uint64_t{1} << 20, 1}}) {
    Result<double> rhd =
        model.predict(Collective::kReduceScatter, Algorithm::kRhd, bytes, 128 << 10, channels);
    ASSERT_FALSE(rhd.ok()) << bytes << " B";
    EXPECT_NE(rhd.status().message().find("not priced"), std::string::npos)
        << rhd.status().message();
    Result<double> ring =
        model.predict(Collective::kReduceScatter, Algorithm::kRing, bytes, 128 << 10, channels);
    ASSERT_TRUE(ring.ok()) << ring.status().message();
    EXPECT_GT(*ring, 0);
  }
}

}  // namespace
}  // namespace braid
