#include "tuner/tuner.h"

#include <gtest/gtest.h>

#include <thread>

#include "algorithms/algorithms.h"
#include "tuner/thread_gather.h"
#include "tuner/tuner_test_constants.h"

namespace braid {
namespace {

constexpr int kRanks = 4;

CostModel model(int n = kRanks, const ModelConstants& c = tunerTestConstants()) {
  std::vector<RankPlacement> p(static_cast<size_t>(n));
  for (RankPlacement& x : p) x.hostHash = 7;
  Result<CostModel> m = CostModel::create(c, p, {}, 4);
  EXPECT_TRUE(m.ok()) << m.status().message();
  return std::move(m).value();
}

TunerOptions options() {
  TunerOptions o;
  o.nranks = kRanks;
  o.maxChannels = 4;
  o.slotBytes = 512 << 10;
  o.nslots = 4;
  o.tuningFile = "f.txt";
  return o;
}

Tuner tuner(const TunerOptions& o, const TuningTable* table = nullptr,
            const ModelConstants& c = tunerTestConstants()) {
  Result<Tuner> t = Tuner::create(o, model(o.nranks, c), table);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? std::move(t).value() : Tuner();
}

/// A tuner of kRanks ranks whose hand-offs are so slow that the model rates one-hop plans
/// (direct) fastest at every size.
Tuner slowHopTuner() {
  ModelConstants slowHops = tunerTestConstants();
  slowHops.calibration.hopUs = 200;
  slowHops.calibration.crowdedHopUs = 400;
  return tuner(options(), nullptr, slowHops);
}

TuningTable table(const std::string& lines) {
  Result<TuningTable> t = TuningTable::parse("braid-tuning-table 1\n" + lines, "f.txt");
  EXPECT_TRUE(t.ok()) << t.status().message();
  return std::move(t).value();
}

std::vector<Collective> modelled() {
  return {Collective::kAllReduce, Collective::kBroadcast,     Collective::kReduce,
          Collective::kAllGather, Collective::kReduceScatter, Collective::kAllToAll};
}

TEST(Tuner, GridIndexIsTheNearestPowerOfTwo) {
  EXPECT_EQ(Tuner::gridIndex(0), 0);
  EXPECT_EQ(Tuner::gridIndex(1), 0);
  EXPECT_EQ(Tuner::gridIndex(2), 1);
  EXPECT_EQ(Tuner::gridIndex(3), 2);
  EXPECT_EQ(Tuner::gridIndex(5), 2);
  EXPECT_EQ(Tuner::gridIndex(6), 3);
  EXPECT_EQ(Tuner::gridIndex(1 << 20), 20);
  EXPECT_EQ(Tuner::gridIndex(uint64_t{1} << 40), Tuner::kMaxSizeLog);
}

TEST(Tuner, ModelChoicesAreTheArgminOfItsOwnPredictions) {
  const Tuner t = tuner(options());
  int distinct = 0;
  Algorithm previous = Algorithm::kPairwise;
  for (Collective coll : modelled()) {
    for (int k = 0; k <= Tuner::kMaxSizeLog; ++k) {
      const uint64_t bytes = uint64_t{1} << k;
      const Choice c = t.choose(coll, bytes);
      EXPECT_EQ(c.source, ChoiceSource::kModel);
      std::optional<double> mine = t.predictedUs(coll, c.algo, bytes);
      ASSERT_TRUE(mine.has_value()) << collectiveName(coll) << " " << bytes;
      EXPECT_DOUBLE_EQ(c.predictedUs, *mine);
      for (Algorithm a : algorithmsFor(coll)) {
        std::optional<double> other = t.predictedUs(coll, a, bytes);
        if (!other || !modelMayPick(a, coll, bytes, kRanks)) continue;
        EXPECT_LE(*mine, *other) << collectiveName(coll) << " " << bytes << " "
                                 << algorithmName(c.algo) << " vs " << algorithmName(a);
      }
      EXPECT_LE(c.chunkBytes, 512u << 10);
      EXPECT_GE(c.nchannels, 1);
      EXPECT_LE(c.nchannels, 4);
      if (coll == Collective::kAllReduce && c.algo != previous) {
        ++distinct;
        previous = c.algo;
      }
    }
  }
  // Latency and bandwidth algorithms take turns over the sizes.
  EXPECT_GE(distinct, 2);
}

TEST(Tuner, EveryChannelOfAModelChoiceCarriesAtLeast32KiB) {
  for (int n : {2, 3, 4}) {
    TunerOptions o = options();
    o.nranks = n;
    const Tuner t = tuner(o);
    int wide = 0;  // choices with more than one channel
    for (Collective coll : modelled()) {
      for (int k = 0; k <= Tuner::kMaxSizeLog; ++k) {
        const uint64_t bytes = uint64_t{1} << k;
        const Choice c = t.choose(coll, bytes);
        if (c.nchannels > 1) {
          ++wide;
          EXPECT_GE(bytes, uint64_t(c.nchannels) * (32 << 10))
              << n << " ranks, " << collectiveName(coll) << " " << bytes;
        }
      }
    }
    EXPECT_GT(wide, 0) << n << " ranks: large calls still spread over channels";
  }
}

TEST(Tuner, CallsAbove128KiBGetNoSmallerChunk) {
  // A core cache of 64 KiB: only 32 KiB chunks stay in it, so the model favours them at any size.
  ModelConstants smallCache = tunerTestConstants();
  smallCache.host.coreCacheBytes = 64 << 10;
  for (int n : {2, 3, 4}) {
    const CostModel m = model(n, smallCache);
    const uint64_t mb = 1 << 20;
    EXPECT_LT(*m.predict(Collective::kAllReduce, Algorithm::kRing, mb, 32 << 10, 1),
              *m.predict(Collective::kAllReduce, Algorithm::kRing, mb, 128 << 10, 1))
        << n << " ranks";
    TunerOptions o = options();
    o.nranks = n;
    const Tuner t = tuner(o, nullptr, smallCache);
    for (Collective coll : modelled()) {
      for (int k = 18; k <= Tuner::kMaxSizeLog; ++k) {
        EXPECT_GE(t.choose(coll, uint64_t{1} << k).chunkBytes, 128u << 10)
            << n << " ranks, " << collectiveName(coll) << " " << (uint64_t{1} << k);
      }
    }
    // Up to 128 KiB the smallest chunk is still a candidate.
    EXPECT_EQ(t.choose(Collective::kAllReduce, 32 << 10).chunkBytes, 32u << 10) << n;
  }
}

TEST(Tuner, DirectAllReduceIsTheModelsPickOnlyWhileItsCopiesAreSmall) {
  // A rank sends n-1 full copies: at most 64 KiB in all.
  EXPECT_TRUE(modelMayPick(Algorithm::kDirect, Collective::kAllReduce, 16 << 10, 4));
  EXPECT_FALSE(modelMayPick(Algorithm::kDirect, Collective::kAllReduce, 32 << 10, 4));
  EXPECT_TRUE(modelMayPick(Algorithm::kDirect, Collective::kAllReduce, 32 << 10, 3));
  EXPECT_FALSE(modelMayPick(Algorithm::kDirect, Collective::kAllReduce, (32 << 10) + 4, 3));
  EXPECT_TRUE(modelMayPick(Algorithm::kDirect, Collective::kAllReduce, 64 << 10, 2));
  EXPECT_FALSE(modelMayPick(Algorithm::kDirect, Collective::kAllReduce, 128 << 10, 2));
  EXPECT_TRUE(modelMayPick(Algorithm::kRing, Collective::kAllReduce, 1 << 30, 8));
  // Hand-offs so slow that one hop beats every other plan at any size: the tuner still stops
  // picking direct where the copies exceed 64 KiB, and still prices it for BRAID_ALGO.
  const Tuner t = slowHopTuner();
  EXPECT_EQ(t.choose(Collective::kAllReduce, 1 << 10).algo, Algorithm::kDirect);
  for (int k = 15; k <= Tuner::kMaxSizeLog; ++k) {
    const uint64_t bytes = uint64_t{1} << k;
    EXPECT_NE(t.choose(Collective::kAllReduce, bytes).algo, Algorithm::kDirect) << bytes;
    EXPECT_TRUE(t.predictedUs(Collective::kAllReduce, Algorithm::kDirect, bytes).has_value());
  }
}

// Across hosts, from 8 ranks, all-to-all blocks up to 1 KiB go to Bruck's algorithm (rd) in
// ceil(log2 n) rounds rather than pairwise exchange's n-1 messages a rank; larger blocks stay
// with pairwise exchange, and rd is never the model's pick above 1 KiB, on one host either.
TEST(Tuner, SmallAllToAllAcrossHostsGoesToBruck) {
  EXPECT_FALSE(modelMayPick(Algorithm::kPairwise, Collective::kAllToAll, 1024, 8, 2));
  EXPECT_TRUE(modelMayPick(Algorithm::kPairwise, Collective::kAllToAll, 2048, 8, 2));
  EXPECT_TRUE(modelMayPick(Algorithm::kPairwise, Collective::kAllToAll, 8, 7, 2));
  EXPECT_TRUE(modelMayPick(Algorithm::kPairwise, Collective::kAllToAll, 8, 64, 1));
  EXPECT_TRUE(modelMayPick(Algorithm::kRd, Collective::kAllToAll, 1024, 2, 1));
  EXPECT_FALSE(modelMayPick(Algorithm::kRd, Collective::kAllToAll, 2048, 64, 4));
  EXPECT_TRUE(modelMayPick(Algorithm::kRd, Collective::kReduceScatter, 1024, 16, 2));
  EXPECT_FALSE(modelMayPick(Algorithm::kRd, Collective::kReduceScatter, 2048, 16, 2));
  EXPECT_FALSE(modelMayPick(Algorithm::kRd, Collective::kReduceScatter, 64, 16, 1));
  EXPECT_FALSE(modelMayPick(Algorithm::kRd, Collective::kAllGather, 1024, 16, 1));
  EXPECT_TRUE(modelMayPick(Algorithm::kRd, Collective::kAllGather, 2048, 16, 1));
  EXPECT_TRUE(modelMayPick(Algorithm::kRd, Collective::kAllGather, 64, 16, 2));
  EXPECT_TRUE(modelMayPick(Algorithm::kRd, Collective::kAllGather, 64, 64, 1));
  constexpr int n = 16;
  std::vector<RankPlacement> p(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) p[size_t(r)].hostHash = 100 + uint64_t(r / 8);
  ModelConstants c = tunerTestConstants();
  c.host.networkLatencyUs = 5;
  c.host.networkGBps = 12.5;
  Result<CostModel> twoHosts = CostModel::create(c, p, {}, 4);
  ASSERT_TRUE(twoHosts.ok()) << twoHosts.status().message();
  TunerOptions o = options();
  o.nranks = n;
  Result<Tuner> t = Tuner::create(o, *twoHosts, nullptr);
  ASSERT_TRUE(t.ok()) << t.status().message();
  for (uint64_t bytes : {uint64_t{4}, uint64_t{256}, uint64_t{1024}}) {
    EXPECT_EQ(t->choose(Collective::kAllToAll, bytes).algo, Algorithm::kRd) << bytes;
  }
  for (uint64_t bytes : {uint64_t{4096}, uint64_t{1} << 20}) {
    EXPECT_EQ(t->choose(Collective::kAllToAll, bytes).algo, Algorithm::kPairwise) << bytes;
    EXPECT_FALSE(t->predictedUs(Collective::kAllToAll, Algorithm::kRd, bytes).has_value());
  }
  const Tuner oneHost = tuner(options());
  EXPECT_FALSE(oneHost.predictedUs(Collective::kAllToAll, Algorithm::kRd, 4096).has_value());
}

TEST(Tuner, DirectRootedCallsAreTheModelsPickOnlyUpToAFewMegabytes) {
  // Hand-offs so slow that one hop instead of several outweighs the root's extra copies: the
  // model rates direct broadcast fastest at 1 MB and at 16 MB; the tuner picks it at the first
  // and not at the second.
  const Tuner t = slowHopTuner();
  for (uint64_t bytes : {uint64_t{1} << 20, uint64_t{16} << 20}) {
    const double directUs = *t.predictedUs(Collective::kBroadcast, Algorithm::kDirect, bytes);
    for (Algorithm a : {Algorithm::kRing, Algorithm::kTree}) {
      EXPECT_LT(directUs, *t.predictedUs(Collective::kBroadcast, a, bytes))
          << algorithmName(a) << " " << bytes;
    }
  }
  EXPECT_EQ(t.choose(Collective::kBroadcast, 1 << 20).algo, Algorithm::kDirect);
  for (Collective coll : {Collective::kBroadcast, Collective::kReduce}) {
    EXPECT_TRUE(modelMayPick(Algorithm::kDirect, coll, 4 << 20, kRanks));
    for (int k = 23; k <= Tuner::kMaxSizeLog; ++k) {
      const uint64_t bytes = uint64_t{1} << k;
      EXPECT_FALSE(modelMayPick(Algorithm::kDirect, coll, bytes, kRanks));
      EXPECT_NE(t.choose(coll, bytes).algo, Algorithm::kDirect) << collectiveName(coll) << bytes;
      // The model still prices it, for BRAID_ALGO and braid-perf --algo all.
      EXPECT_TRUE(t.predictedUs(coll, Algorithm::kDirect, bytes).has_value());
    }
  }
  // All-gather (each rank sends n-1 copies of a 1/n block) is not limited.
  EXPECT_TRUE(modelMayPick(Algorithm::kDirect, Collective::kAllGather, 64 << 20, kRanks));
  TunerOptions o = options();
  o.algo = "broadcast:direct";
  const Choice forced = tuner(o).choose(Collective::kBroadcast, 64 << 20);
  EXPECT_EQ(forced.algo, Algorithm::kDirect);
  EXPECT_EQ(forced.source, ChoiceSource::kOverride);
}

TEST(Tuner, PointToPointIsFixed) {
  const Tuner t = tuner(options());
  for (Collective coll : {Collective::kSend, Collective::kRecv}) {
    const Choice c = t.choose(coll, 1 << 20);
    EXPECT_EQ(c.algo, Algorithm::kPairwise);
    EXPECT_EQ(c.nchannels, 1);
    EXPECT_EQ(c.source, ChoiceSource::kFixed);
  }
}

TEST(Tuner, TuningTableIsHonouredWhereItSpeaks) {
  const TuningTable tt = table(
      "allreduce 4 1K 64K tree 64K 2 11\n"
      "allreduce 8 0 inf direct 64K 1\n"  // another rank count: not for this communicator
      "broadcast 4 0 inf ring 32K 3\n");
  const Tuner plain = tuner(options());
  const Tuner t = tuner(options(), &tt);
  Choice c = t.choose(Collective::kAllReduce, 4096);
  EXPECT_EQ(c.algo, Algorithm::kTree);
  EXPECT_EQ(c.chunkBytes, 64u << 10);
  EXPECT_EQ(c.nchannels, 2);
  EXPECT_EQ(c.source, ChoiceSource::kTable);
  // Outside the table's ranges the model decides, as without a table.
  for (uint64_t bytes : {uint64_t{512}, uint64_t{64} << 10, uint64_t{1} << 30}) {
    c = t.choose(Collective::kAllReduce, bytes);
    EXPECT_EQ(c.source, ChoiceSource::kModel) << bytes;
    EXPECT_EQ(c.algo, plain.choose(Collective::kAllReduce, bytes).algo) << bytes;
  }
  c = t.choose(Collective::kBroadcast, 1 << 20);
  EXPECT_EQ(c.algo, Algorithm::kRing);
  EXPECT_EQ(c.nchannels, 3);
  EXPECT_NE(t.digest(), plain.digest());
  EXPECT_NE(t.describe().find("lines of f.txt"), std::string::npos);
}

TEST(Tuner, TableLinesThatCannotRunHereAreErrorsNamingTheLine) {
  struct Case {
    std::string lines;
    TunerOptions options;
    std::string expect;
  };
  TunerOptions twoChannels = options();
  twoChannels.maxChannels = 2;
  TunerOptions oneSlot = options();
  oneSlot.nslots = 1;
  const std::vector<Case> cases = {
      {"allreduce 4 0 1K rd 32K 1\nallreduce 4 1K inf ring 128K 4\n", twoChannels,
       "BRAID_TUNING_FILE f.txt:3: 4 channels exceed the 2 this communicator set up"},
      {"allreduce 4 0 inf ring 1M 1\n", options(),
       "BRAID_TUNING_FILE f.txt:2: chunk of 1048576 bytes exceeds the FIFO slot of 524288"},
      {"allgather 4 0 inf ring 64K 1\n", oneSlot,
       "BRAID_TUNING_FILE f.txt:2: ring for allgather needs BRAID_NSLOTS >= 2 (it is 1)"},
  };
  for (const Case& c : cases) {
    const TuningTable tt = table(c.lines);
    Result<Tuner> t = Tuner::create(c.options, model(), &tt);
    ASSERT_FALSE(t.ok()) << c.lines;
    EXPECT_NE(t.status().message().find(c.expect), std::string::npos) << t.status().message();
  }
  // The same lines for another rank count do not concern this communicator.
  const TuningTable other = table("allreduce 8 0 inf ring 1M 1\n");
  EXPECT_TRUE(Tuner::create(options(), model(), &other).ok());
}

TEST(Tuner, BraidAlgoBeatsTableAndModel) {
  const TuningTable tt = table("allreduce 4 0 inf tree 64K 2\n");
  TunerOptions o = options();
  o.algo = "allreduce:rhd";
  const Tuner t = tuner(o, &tt);
  for (uint64_t bytes : {uint64_t{8}, uint64_t{1} << 16, uint64_t{1} << 26}) {
    const Choice forced = t.choose(Collective::kAllReduce, bytes);
    EXPECT_EQ(forced.algo, Algorithm::kRhd) << bytes;
    EXPECT_EQ(forced.source, ChoiceSource::kOverride);
    // Its chunk and channels are the model's best for rhd.
    EXPECT_DOUBLE_EQ(forced.predictedUs,
                     *t.predictedUs(Collective::kAllReduce, Algorithm::kRhd, bytes));
    // BRAID_ALGO aside, the table speaks.
    const Choice unforced = t.chooseUnforced(Collective::kAllReduce, bytes);
    EXPECT_EQ(unforced.algo, Algorithm::kTree);
    EXPECT_EQ(unforced.source, ChoiceSource::kTable);
  }
  // An exclusion leaves the model the fastest of the rest.
  const Tuner plain = tuner(options());
  const Algorithm best = plain.choose(Collective::kAllReduce, 8).algo;
  o = options();
  o.algo = "allreduce:^" + std::string(algorithmName(best));
  const Tuner excluding = tuner(o);
  const Choice c = excluding.choose(Collective::kAllReduce, 8);
  EXPECT_NE(c.algo, best);
  for (Algorithm a : algorithmsFor(Collective::kAllReduce)) {
    if (a == best) continue;
    EXPECT_LE(c.predictedUs, *excluding.predictedUs(Collective::kAllReduce, a, 8));
  }
  // A table choice BRAID_ALGO allows stands.
  o = options();
  o.algo = "allreduce:tree|ring";
  const Tuner allowing = tuner(o, &tt);
  EXPECT_EQ(allowing.choose(Collective::kAllReduce, 8).algo, Algorithm::kTree);
  EXPECT_EQ(allowing.choose(Collective::kAllReduce, 8).source, ChoiceSource::kTable);
}

TEST(Tuner, ForcedChunkAndChannelsApplyToEveryChoice) {
  TunerOptions o = options();
  o.chunkBytes = 64 << 10;
  o.nchannels = 2;
  o.maxChannels = 2;
  const TuningTable tt = table("allreduce 4 0 1M ring 256K 1\n");
  const Tuner t = tuner(o, &tt);
  for (Collective coll : modelled()) {
    for (uint64_t bytes : {uint64_t{8}, uint64_t{1} << 20, uint64_t{1} << 28}) {
      const Choice c = t.choose(coll, bytes);
      EXPECT_EQ(c.chunkBytes, 64u << 10);
      EXPECT_EQ(c.nchannels, 2);
    }
  }
  EXPECT_EQ(t.choose(Collective::kAllReduce, 8).algo, Algorithm::kRing);
}

TEST(Tuner, MalformedOrImpossibleBraidAlgoIsAnError) {
  TunerOptions o = options();
  o.algo = "allreduce:bogus";
  EXPECT_FALSE(Tuner::create(o, model(), nullptr).ok());
  o.algo = "allgather:ring";
  o.nslots = 1;
  Result<Tuner> t = Tuner::create(o, model(), nullptr);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("BRAID_NSLOTS >= 2"), std::string::npos);
}

TEST(Tuner, SameInputsSameDigestAndTable) {
  const Tuner a = tuner(options());
  const Tuner b = tuner(options());
  EXPECT_EQ(a.digest(), b.digest());
  EXPECT_EQ(a.formatTable(), b.formatTable());
  for (Collective coll : modelled()) {
    EXPECT_NE(a.formatTable().find(std::string(collectiveName(coll)) + " "), std::string::npos);
  }
  TunerOptions o = options();
  o.maxChannels = 1;
  EXPECT_NE(tuner(o).digest(), a.digest());
}

TEST(Tuner, CellOwnersAreRanksAndAPairsLongSizesShareOne) {
  for (int n = 1; n <= 5; ++n) {
    std::vector<int> cells(static_cast<size_t>(n), 0);
    for (int pair = 0; pair < 40; ++pair) {
      const int longOwner = Tuner::cellOwner(pair, 0, true, n);
      for (int k = 0; k <= Tuner::kMaxSizeLog; ++k) {
        for (bool longSize : {false, true}) {
          const int owner = Tuner::cellOwner(pair, k, longSize, n);
          ASSERT_GE(owner, 0);
          ASSERT_LT(owner, n);
          if (!longSize) ++cells[static_cast<size_t>(owner)];
          if (longSize) {
            EXPECT_EQ(owner, longOwner) << n << " ranks, pair " << pair << ", 2^" << k;
          }
        }
      }
    }
    for (int r = 0; r < n; ++r) EXPECT_GT(cells[static_cast<size_t>(r)], 0) << n << " ranks";
  }
}

// Split between a few ranks, or between more ranks than the grid has cells (most own none); from
// 32 ranks on the long sizes take two rounds of their own, or one where every rank has a core and
// there are ranks for every candidate, and the grid is still the same.
TEST(Tuner, RanksThatSplitTheGridBuildTheOneARankBuildsAlone) {
  ModelConstants ownCores = tunerTestConstants();
  ownCores.host.cores = kRanks;
  for (const ModelConstants& constants : {tunerTestConstants(), ownCores}) {
    const bool crowded = constants.host.cores < kRanks;
    Tuner::forgetGrids();
    const Tuner alone = tuner(options(), nullptr, constants);
    std::vector<size_t> gathers;
    for (int sharers : {kRanks, 40, 300}) {
      Tuner::forgetGrids();
      ThreadGather gather(sharers);
      std::vector<Tuner> split(static_cast<size_t>(sharers));
      std::vector<std::string> errors(static_cast<size_t>(sharers));
      std::vector<std::thread> threads;
      for (int r = 0; r < sharers; ++r) {
        threads.emplace_back([&, r] {
          Result<Tuner> t =
              Tuner::create(options(), model(kRanks, constants), nullptr, gather.share(r));
          if (t.ok()) {
            split[size_t(r)] = std::move(t).value();
          } else {
            errors[size_t(r)] = t.status().message();
          }
        });
      }
      for (std::thread& t : threads) t.join();
      const std::string what = std::to_string(sharers) + " sharers" + (crowded ? ", crowded" : "");
      for (int r = 0; r < sharers; ++r) {
        ASSERT_EQ(errors[size_t(r)], "") << what << ", rank " << r;
        EXPECT_EQ(split[size_t(r)].digest(), alone.digest()) << what << ", rank " << r;
        EXPECT_EQ(split[size_t(r)].formatTable(), alone.formatTable()) << what << ", rank " << r;
      }
      gathers.push_back(gather.cpuSeconds()[0].size());
    }
    // Cells alone below 32 sharers; then the two staged rounds, or one where ranks have cores.
    EXPECT_EQ(gathers[0], 1u);
    EXPECT_EQ(gathers[1], 3u);
    EXPECT_EQ(gathers[2], crowded ? 3u : 2u);
  }
  Tuner::forgetGrids();
}

// A rank sends the cells it owns, not a whole grid: at thousands of ranks what each receives
// stays near one grid's size instead of thousands of grids.
TEST(Tuner, ARankSendsOnlyTheCellsItOwns) {
  constexpr size_t kWholeGridBytes = 6 * 33 * 8 * 16;  // collectives x sizes x algorithms x cell
  for (int sharers : {2, 64, 1024}) {
    Tuner::forgetGrids();
    size_t sent = 0;
    GridShare share;
    share.rank = sharers - 1;
    share.nranks = sharers;
    share.allGather = [&](uint8_t*, size_t bytesPerRank) {
      sent = bytesPerRank;
      return okStatus();
    };
    ASSERT_TRUE(Tuner::create(options(), model(), nullptr, share).ok());
    EXPECT_GT(sent, 0u);
    EXPECT_EQ(sent % 16, 0u);
    // The busiest rank's cells: its share of the sizes, and a pair's long sizes.
    EXPECT_LE(sent, kWholeGridBytes / size_t(sharers) + 16 * 16) << sharers << " sharers";
  }
  Tuner::forgetGrids();
}

TEST(Tuner, ARankCostsOnlyItsCellsAndTakesTheOthersAsSent) {
  Tuner::forgetGrids();
  const Tuner alone = tuner(options());
  Tuner::forgetGrids();
  // Rank 0 of 2, its peer sending all zeros: the peer's cells read 0 us.
  int calls = 0;
  GridShare share;
  share.rank = 0;
  share.nranks = 2;
  share.allGather = [&](uint8_t*, size_t) {
    ++calls;
    return okStatus();
  };
  Result<Tuner> half = Tuner::create(options(), model(), nullptr, share);
  ASSERT_TRUE(half.ok()) << half.status().message();
  EXPECT_EQ(calls, 1);
  const Algorithm first = algorithmsFor(Collective::kAllReduce).front();  // pair 0
  ASSERT_EQ(Tuner::cellOwner(0, 10, false, 2), 0);
  ASSERT_EQ(Tuner::cellOwner(0, 11, false, 2), 1);
  EXPECT_EQ(half->predictedUs(Collective::kAllReduce, first, 1 << 10),
            alone.predictedUs(Collective::kAllReduce, first, 1 << 10));
  EXPECT_GT(alone.predictedUs(Collective::kAllReduce, first, 1 << 11).value_or(0), 0);
  EXPECT_EQ(half->predictedUs(Collective::kAllReduce, first, 1 << 11), 0.0);
  Tuner::forgetGrids();
}

TEST(Tuner, ARankWhoseProcessHoldsTheGridStillSharesIt) {
  Tuner::forgetGrids();
  const Tuner alone = tuner(options());  // now cached
  int calls = 0;
  GridShare share;
  share.rank = 1;
  share.nranks = 2;
  share.allGather = [&](uint8_t*, size_t) {
    ++calls;
    return okStatus();
  };
  Result<Tuner> again = Tuner::create(options(), model(), nullptr, share);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(calls, 1) << "its peers wait for its cells";
  EXPECT_EQ(again->digest(), alone.digest());
}

TEST(Tuner, AFailedGridShareIsAnErrorSayingSo) {
  Tuner::forgetGrids();
  GridShare share;
  share.rank = 0;
  share.nranks = 3;
  share.allGather = [](uint8_t*, size_t) { return remoteError("rank 2 left"); };
  Result<Tuner> t = Tuner::create(options(), model(), nullptr, share);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), braidRemoteError);
  EXPECT_NE(t.status().message().find("sharing the tuner's grid"), std::string::npos)
      << t.status().message();
  EXPECT_NE(t.status().message().find("rank 2 left"), std::string::npos) << t.status().message();
}

}  // namespace
}  // namespace braid
