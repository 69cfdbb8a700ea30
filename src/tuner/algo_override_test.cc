#include "tuner/algo_override.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/algorithms.h"

namespace braid {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using Algos = std::vector<Algorithm>;

constexpr uint64_t kK = 1024;
constexpr uint64_t kM = 1024 * 1024;
constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

constexpr Collective kOverridable[] = {Collective::kAllReduce,     Collective::kBroadcast,
                                       Collective::kReduce,        Collective::kAllGather,
                                       Collective::kReduceScatter, Collective::kAllToAll};

AlgoOverride parsed(std::string_view text) {
  Result<AlgoOverride> r = AlgoOverride::parse(text);
  EXPECT_TRUE(r.ok()) << "'" << text << "': " << r.status().message();
  return r.ok() ? r.value() : AlgoOverride();
}

/// The error message of a value that must be rejected as an invalid argument.
std::string errorOf(std::string_view text) {
  Result<AlgoOverride> r = AlgoOverride::parse(text);
  EXPECT_FALSE(r.ok()) << "'" << text << "' was accepted";
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), braidInvalidArgument) << r.status().message();
  EXPECT_THAT(r.status().message(), StartsWith("BRAID_ALGO: "));
  return r.status().message();
}

/// The algorithm spelled `name`, if it exists and serves `coll` (guards tests of algorithms that
/// are still being added).
std::optional<Algorithm> servingByName(std::string_view name, Collective coll) {
  for (int a = 0; a < kNumAlgorithms; ++a) {
    const Algorithm algo = static_cast<Algorithm>(a);
    if (algorithmName(algo) == name && algorithmServes(algo, coll)) return algo;
  }
  return std::nullopt;
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

TEST(AlgoOverride, EmptyValueRestrictsNothing) {
  for (std::string_view text : {"", "   ", ";", " ; ;"}) {
    AlgoOverride o = parsed(text);
    EXPECT_FALSE(o.active()) << text;
    for (Collective c : kOverridable) {
      EXPECT_EQ(o.allowed(c, 0), std::nullopt);
      EXPECT_EQ(o.allowed(c, kMax), std::nullopt);
    }
  }
  EXPECT_FALSE(AlgoOverride().active());
  EXPECT_EQ(AlgoOverride().allowed(Collective::kAllReduce, 1), std::nullopt);
}

TEST(AlgoOverride, EveryAlgorithmNameIsRecognised) {
  // Loops over the enum, so algorithms added later are covered too.
  for (int a = 0; a < kNumAlgorithms; ++a) {
    const Algorithm algo = static_cast<Algorithm>(a);
    for (Collective c : kOverridable) {
      const std::string text = std::string(collectiveName(c)) + ":" + upper(algorithmName(algo));
      if (algorithmServes(algo, c)) {
        EXPECT_EQ(parsed(text).allowed(c, 4096), Algos{algo}) << text;
      } else {
        EXPECT_THAT(errorOf(text), HasSubstr("cannot serve " + std::string(collectiveName(c))));
      }
    }
  }
}

TEST(AlgoOverride, GlobalListAppliesWhereEachAlgorithmServes) {
  ASSERT_TRUE(algorithmServes(Algorithm::kRing, Collective::kAllReduce));
  ASSERT_TRUE(algorithmServes(Algorithm::kPairwise, Collective::kAllToAll));
  ASSERT_FALSE(algorithmServes(Algorithm::kPairwise, Collective::kAllReduce));
  AlgoOverride o = parsed("ring,pairwise");
  EXPECT_TRUE(o.active());
  EXPECT_EQ(o.allowed(Collective::kAllReduce, 0), Algos{Algorithm::kRing});
  EXPECT_EQ(o.allowed(Collective::kAllReduce, kMax), Algos{Algorithm::kRing});
  EXPECT_EQ(o.allowed(Collective::kAllToAll, 100), Algos{Algorithm::kPairwise});
  for (Collective c : kOverridable) {
    std::optional<Algos> set = o.allowed(c, 1 * kM);
    ASSERT_TRUE(set.has_value());
    ASSERT_FALSE(set->empty());
    for (Algorithm a : *set) EXPECT_TRUE(algorithmServes(a, c)) << algorithmName(a);
  }
  // '|' separates a plain list too.
  EXPECT_EQ(parsed("ring|pairwise").allowed(Collective::kAllToAll, 1), Algos{Algorithm::kPairwise});
}

TEST(AlgoOverride, PointToPointIsNeverRestricted) {
  AlgoOverride o = parsed("ring,pairwise");
  EXPECT_EQ(o.allowed(Collective::kSend, 64), std::nullopt);
  EXPECT_EQ(o.allowed(Collective::kRecv, 64), std::nullopt);
  EXPECT_THAT(errorOf("send:pairwise"), HasSubstr("unknown collective 'send'"));
}

TEST(AlgoOverride, GlobalListRestrictsOnlyTheCollectivesItServes) {
  // As with NCCL_ALGO: BRAID_ALGO=ring leaves all-to-all to the algorithms that serve it.
  ASSERT_FALSE(algorithmServes(Algorithm::kRing, Collective::kAllToAll));
  AlgoOverride o = parsed("ring");
  EXPECT_EQ(o.allowed(Collective::kBroadcast, 8), Algos{Algorithm::kRing});
  EXPECT_EQ(o.allowed(Collective::kAllReduce, 8), Algos{Algorithm::kRing});
  EXPECT_EQ(o.allowed(Collective::kAllToAll, 8), std::nullopt);
  // Pairwise serves none of the reductions: they stay unrestricted, all-to-all is pinned.
  AlgoOverride p = parsed("pairwise");
  EXPECT_EQ(p.allowed(Collective::kAllReduce, 8), std::nullopt);
  EXPECT_EQ(p.allowed(Collective::kAllToAll, 8), Algos{Algorithm::kPairwise});
  // Naming the collective explicitly is still checked.
  EXPECT_THAT(errorOf("alltoall:ring"), HasSubstr("'ring' cannot serve alltoall"));
}

TEST(AlgoOverride, PerCollectiveTerms) {
  AlgoOverride o = parsed("allreduce:ring;alltoall:pairwise");
  EXPECT_EQ(o.allowed(Collective::kAllReduce, 12345), Algos{Algorithm::kRing});
  EXPECT_EQ(o.allowed(Collective::kAllToAll, 12345), Algos{Algorithm::kPairwise});
  EXPECT_EQ(o.allowed(Collective::kBroadcast, 12345), std::nullopt);
  EXPECT_EQ(o.allowed(Collective::kReduceScatter, 12345), std::nullopt);
  EXPECT_TRUE(o.active());
  // A single per-collective term restricts nothing else.
  AlgoOverride single = parsed("reduce:ring");
  EXPECT_EQ(single.allowed(Collective::kReduce, 1), Algos{Algorithm::kRing});
  EXPECT_EQ(single.allowed(Collective::kAllToAll, 1), std::nullopt);
}

TEST(AlgoOverride, PerCollectiveTermReplacesTheGlobalOne) {
  // allreduce names only small sizes: above them the global ring must not apply.
  AlgoOverride o = parsed("ring;alltoall:pairwise;allreduce:0-1M:ring");
  EXPECT_EQ(o.allowed(Collective::kAllReduce, 1 * kM - 1), Algos{Algorithm::kRing});
  EXPECT_EQ(o.allowed(Collective::kAllReduce, 1 * kM), std::nullopt);
  EXPECT_EQ(o.allowed(Collective::kBroadcast, 1 * kM), Algos{Algorithm::kRing});
  // The order of terms does not matter.
  AlgoOverride reordered = parsed("allreduce:0-1M:ring;alltoall:pairwise;ring");
  EXPECT_EQ(reordered.allowed(Collective::kAllReduce, 1 * kM), std::nullopt);
  EXPECT_EQ(reordered.allowed(Collective::kAllGather, 1 * kM), Algos{Algorithm::kRing});

  if (auto tree = servingByName("tree", Collective::kAllReduce)) {
    AlgoOverride t = parsed("ring;alltoall:pairwise;allreduce:tree");
    EXPECT_EQ(t.allowed(Collective::kAllReduce, 1), Algos{*tree});
    EXPECT_EQ(t.allowed(Collective::kBroadcast, 1), Algos{Algorithm::kRing});
  }
}

TEST(AlgoOverride, ExclusionLists) {
  // Excluding an algorithm that does not serve the collective leaves every serving one.
  AlgoOverride o = parsed("allreduce:^pairwise");
  EXPECT_EQ(o.allowed(Collective::kAllReduce, 1), algorithmsFor(Collective::kAllReduce));

  // The global exclusion applies per collective to the algorithms serving it.
  AlgoOverride g = parsed("^pairwise;alltoall:pairwise");
  for (Collective c : {Collective::kAllReduce, Collective::kBroadcast, Collective::kAllGather}) {
    std::optional<Algos> set = g.allowed(c, 1);
    ASSERT_TRUE(set.has_value());
    EXPECT_THAT(*set, ::testing::Contains(Algorithm::kRing));
    EXPECT_THAT(*set, ::testing::Not(::testing::Contains(Algorithm::kPairwise)));
  }
  EXPECT_EQ(g.allowed(Collective::kAllToAll, 1), Algos{Algorithm::kPairwise});

  // '^' covers the whole list.
  if (algorithmsFor(Collective::kAllReduce) == Algos{Algorithm::kRing}) {
    EXPECT_THAT(errorOf("allreduce:^pairwise,ring"),
                HasSubstr("'^pairwise,ring' leaves no algorithm for allreduce"));
  } else {
    std::optional<Algos> set =
        parsed("allreduce:^pairwise,ring").allowed(Collective::kAllReduce, 1);
    ASSERT_TRUE(set.has_value());
    EXPECT_THAT(*set, ::testing::Not(::testing::Contains(Algorithm::kRing)));
  }
  if (algorithmsFor(Collective::kAllToAll) == Algos{Algorithm::kPairwise}) {
    EXPECT_THAT(errorOf("alltoall:^pairwise"),
                HasSubstr("'^pairwise' leaves no algorithm for alltoall"));
  } else {
    std::optional<Algos> set = parsed("alltoall:^pairwise").allowed(Collective::kAllToAll, 1);
    ASSERT_TRUE(set.has_value());
    EXPECT_THAT(*set, ::testing::Not(::testing::Contains(Algorithm::kPairwise)));
  }

  auto tree = servingByName("tree", Collective::kAllReduce);
  if (tree && algorithmServes(Algorithm::kRing, Collective::kAllReduce)) {
    std::optional<Algos> set = parsed("allreduce:^tree").allowed(Collective::kAllReduce, 1);
    ASSERT_TRUE(set.has_value());
    EXPECT_THAT(*set, ::testing::Contains(Algorithm::kRing));
    EXPECT_THAT(*set, ::testing::Not(::testing::Contains(*tree)));
  }
}

TEST(AlgoOverride, NamesAreCaseInsensitive) {
  AlgoOverride o = parsed("AllReduce:RING;ALLTOALL:Pairwise;Broadcast:0-64k:Ring,64K-INF:rInG");
  EXPECT_EQ(o.allowed(Collective::kAllReduce, 1), Algos{Algorithm::kRing});
  EXPECT_EQ(o.allowed(Collective::kAllToAll, 1), Algos{Algorithm::kPairwise});
  EXPECT_EQ(o.allowed(Collective::kBroadcast, kMax), Algos{Algorithm::kRing});
  EXPECT_EQ(parsed("^PAIRWISE;alltoall:pairwise").allowed(Collective::kReduce, 1),
            parsed("^pairwise;alltoall:pairwise").allowed(Collective::kReduce, 1));
}

TEST(AlgoOverride, NcclCollectiveSpellings) {
  AlgoOverride o =
      parsed("all_reduce:ring;All_Gather:ring;REDUCE_SCATTER:ring;all_to_all:pairwise");
  EXPECT_EQ(o.allowed(Collective::kAllReduce, 1), Algos{Algorithm::kRing});
  EXPECT_EQ(o.allowed(Collective::kAllGather, 1), Algos{Algorithm::kRing});
  EXPECT_EQ(o.allowed(Collective::kReduceScatter, 1), Algos{Algorithm::kRing});
  EXPECT_EQ(o.allowed(Collective::kAllToAll, 1), Algos{Algorithm::kPairwise});
  EXPECT_EQ(o.allowed(Collective::kBroadcast, 1), std::nullopt);
  EXPECT_EQ(o.allowed(Collective::kReduce, 1), std::nullopt);
  EXPECT_THAT(errorOf("allreduce:ring;all_reduce:ring"), HasSubstr("allreduce is named twice"));
}

TEST(AlgoOverride, WhitespaceIsTolerated) {
  AlgoOverride o = parsed(
      "  allreduce :  1K - 64K : ring , 64K - inf : ring | ring ;\t alltoall : ^ ring ; "
      " broadcast : ring , ring ;  ");
  EXPECT_EQ(o.allowed(Collective::kAllReduce, 1 * kK - 1), std::nullopt);
  EXPECT_EQ(o.allowed(Collective::kAllReduce, 1 * kK), Algos{Algorithm::kRing});
  EXPECT_EQ(o.allowed(Collective::kAllReduce, kMax), Algos{Algorithm::kRing});
  std::optional<Algos> a2a = o.allowed(Collective::kAllToAll, 1);
  ASSERT_TRUE(a2a.has_value());
  EXPECT_THAT(*a2a, ::testing::Contains(Algorithm::kPairwise));
  EXPECT_EQ(o.allowed(Collective::kBroadcast, 1), Algos{Algorithm::kRing});
  // Spaces inside a name are not ignored.
  EXPECT_THAT(errorOf("allreduce:ri ng"), HasSubstr("unknown algorithm 'ri ng'"));
}

TEST(AlgoOverride, RangeBoundariesAreHalfOpen) {
  AlgoOverride o = parsed("allreduce:1K-64K:ring");
  EXPECT_EQ(o.allowed(Collective::kAllReduce, 0), std::nullopt);
  EXPECT_EQ(o.allowed(Collective::kAllReduce, 1 * kK - 1), std::nullopt);
  EXPECT_EQ(o.allowed(Collective::kAllReduce, 1 * kK), Algos{Algorithm::kRing});
  EXPECT_EQ(o.allowed(Collective::kAllReduce, 64 * kK - 1), Algos{Algorithm::kRing});
  EXPECT_EQ(o.allowed(Collective::kAllReduce, 64 * kK), std::nullopt);
  EXPECT_EQ(o.allowed(Collective::kBroadcast, 2 * kK), std::nullopt);

  AlgoOverride tiny = parsed("reduce:0-1:ring");
  EXPECT_EQ(tiny.allowed(Collective::kReduce, 0), Algos{Algorithm::kRing});
  EXPECT_EQ(tiny.allowed(Collective::kReduce, 1), std::nullopt);

  AlgoOverride units = parsed("allgather:1M-1G:ring,1G-2G:ring,1T-inf:ring");
  EXPECT_EQ(units.allowed(Collective::kAllGather, 1 * kM - 1), std::nullopt);
  EXPECT_EQ(units.allowed(Collective::kAllGather, 1 * kM), Algos{Algorithm::kRing});
  EXPECT_EQ(units.allowed(Collective::kAllGather, 2 * 1024 * kM - 1), Algos{Algorithm::kRing});
  EXPECT_EQ(units.allowed(Collective::kAllGather, 2 * 1024 * kM), std::nullopt);
  EXPECT_EQ(units.allowed(Collective::kAllGather, (1ull << 40) - 1), std::nullopt);
  EXPECT_EQ(units.allowed(Collective::kAllGather, 1ull << 40), Algos{Algorithm::kRing});
}

TEST(AlgoOverride, InfHasNoUpperBound) {
  AlgoOverride o = parsed("allreduce:64K-inf:ring");
  EXPECT_EQ(o.allowed(Collective::kAllReduce, 64 * kK - 1), std::nullopt);
  EXPECT_EQ(o.allowed(Collective::kAllReduce, 64 * kK), Algos{Algorithm::kRing});
  EXPECT_EQ(o.allowed(Collective::kAllReduce, kMax), Algos{Algorithm::kRing});
  AlgoOverride all = parsed("allreduce:0-INF:ring");
  EXPECT_EQ(all.allowed(Collective::kAllReduce, 0), Algos{Algorithm::kRing});
  EXPECT_EQ(all.allowed(Collective::kAllReduce, kMax), Algos{Algorithm::kRing});
}

TEST(AlgoOverride, SeveralRangesPerCollective) {
  // Adjacent ranges meet exactly; the order they are written in does not matter.
  AlgoOverride o = parsed("allreduce:1M-inf:ring,0-1K:ring|ring,4K-1M:^pairwise");
  EXPECT_EQ(o.allowed(Collective::kAllReduce, 1 * kK - 1), Algos{Algorithm::kRing});
  EXPECT_EQ(o.allowed(Collective::kAllReduce, 1 * kK), std::nullopt);  // the gap [1K, 4K)
  EXPECT_EQ(o.allowed(Collective::kAllReduce, 4 * kK - 1), std::nullopt);
  EXPECT_EQ(o.allowed(Collective::kAllReduce, 4 * kK), algorithmsFor(Collective::kAllReduce));
  EXPECT_EQ(o.allowed(Collective::kAllReduce, 1 * kM), Algos{Algorithm::kRing});

  auto rhd = servingByName("rhd", Collective::kAllReduce);
  auto tree = servingByName("tree", Collective::kAllReduce);
  if (rhd && tree) {
    AlgoOverride r = parsed("allreduce:0-64K:rhd|tree,64K-inf:ring");
    Algos small{*tree, *rhd};
    std::sort(small.begin(), small.end());
    EXPECT_EQ(r.allowed(Collective::kAllReduce, 64 * kK - 1), small);
    EXPECT_EQ(r.allowed(Collective::kAllReduce, 64 * kK), Algos{Algorithm::kRing});
  }
}

TEST(AlgoOverride, GlobalRanges) {
  AlgoOverride o = parsed("0-1M:ring,1M-inf:ring|pairwise;alltoall:pairwise");
  EXPECT_EQ(o.allowed(Collective::kAllReduce, 0), Algos{Algorithm::kRing});
  EXPECT_EQ(o.allowed(Collective::kBroadcast, kMax), Algos{Algorithm::kRing});
  EXPECT_EQ(o.allowed(Collective::kAllToAll, 0), Algos{Algorithm::kPairwise});
  AlgoOverride partial = parsed("0-1M:ring;alltoall:pairwise");
  EXPECT_EQ(partial.allowed(Collective::kAllReduce, 1 * kM - 1), Algos{Algorithm::kRing});
  EXPECT_EQ(partial.allowed(Collective::kAllReduce, 1 * kM), std::nullopt);
}

TEST(AlgoOverride, OverlappingRangesAreRejected) {
  EXPECT_THAT(errorOf("allreduce:0-64K:ring,32K-1M:ring"),
              HasSubstr("overlapping ranges '0-64K' and '32K-1M' in "
                        "'allreduce:0-64K:ring,32K-1M:ring'"));
  EXPECT_THAT(errorOf("allreduce:1M-2M:ring,0-inf:ring"),
              HasSubstr("overlapping ranges '0-inf' and '1M-2M'"));
  EXPECT_THAT(errorOf("allreduce:1K-2K:ring,1K-2K:ring"), HasSubstr("overlapping ranges"));
  // One byte of overlap is enough.
  EXPECT_THAT(errorOf("broadcast:0-1025:ring,1K-inf:ring"),
              HasSubstr("overlapping ranges '0-1025' and '1K-inf'"));
  EXPECT_THAT(errorOf("0-64K:ring,1K-2K:ring;alltoall:pairwise"), HasSubstr("overlapping"));
}

TEST(AlgoOverride, BadRangesAreRejected) {
  EXPECT_THAT(errorOf("allreduce:64K-0:ring"),
              HasSubstr("empty range '64K-0' (ranges are [LO, HI) with LO < HI) in "
                        "'allreduce:64K-0:ring'"));
  EXPECT_THAT(errorOf("allreduce:5-5:ring"), HasSubstr("empty range '5-5'"));
  EXPECT_THAT(errorOf("allreduce:abc-1M:ring"), HasSubstr("bad size 'abc' in range 'abc-1M'"));
  EXPECT_THAT(errorOf("allreduce:0-1Q:ring"), HasSubstr("bad size '1Q' in range '0-1Q'"));
  EXPECT_THAT(errorOf("allreduce:inf-1M:ring"), HasSubstr("bad size 'inf'"));
  EXPECT_THAT(errorOf("allreduce:-1M:ring"), HasSubstr("bad size ''"));
  EXPECT_THAT(errorOf("allreduce:64K:ring"), HasSubstr("bad range '64K'"));
  // A range list is all ranges: a bare name after a range is an error, not a second list.
  EXPECT_THAT(errorOf("allreduce:0-64K:ring,pairwise"),
              HasSubstr("expected LO-HI:ALGOS, got 'pairwise'"));
  EXPECT_THAT(errorOf("allreduce:0-64K:"), HasSubstr("empty algorithm list ''"));
  EXPECT_THAT(errorOf("allreduce:0-64K:ring,"), HasSubstr("expected LO-HI:ALGOS, got ''"));
  EXPECT_THAT(errorOf("allreduce:0-64K:ring:ring"), HasSubstr("unknown algorithm 'ring:ring'"));
}

TEST(AlgoOverride, UnknownAlgorithm) {
  const std::string m = errorOf("allreduce:bogus");
  EXPECT_THAT(m, StartsWith("BRAID_ALGO: unknown algorithm 'bogus' in 'allreduce:bogus' (known: "));
  for (int a = 0; a < kNumAlgorithms; ++a) {
    EXPECT_THAT(m, HasSubstr(std::string(algorithmName(static_cast<Algorithm>(a)))));
  }
  EXPECT_THAT(errorOf("ring,bogus"), HasSubstr("unknown algorithm 'bogus' in 'ring,bogus'"));
  EXPECT_THAT(errorOf("^Bogus"), HasSubstr("unknown algorithm 'Bogus' in '^Bogus'"));
  EXPECT_THAT(errorOf("allreduce:0-1M:ring|bogus"),
              HasSubstr("unknown algorithm 'bogus' in 'allreduce:0-1M:ring|bogus'"));
  EXPECT_THAT(errorOf("allreduce:0-1M:ring,1M-inf:bogus"), HasSubstr("'bogus'"));
}

TEST(AlgoOverride, UnknownCollective) {
  const std::string m = errorOf("allreduc:ring");
  EXPECT_THAT(m, StartsWith("BRAID_ALGO: unknown collective 'allreduc' in 'allreduc:ring' "
                            "(known: allreduce, broadcast, reduce, allgather, reducescatter, "
                            "alltoall)"));
  EXPECT_THAT(errorOf(":ring"), HasSubstr("unknown collective ''"));
  EXPECT_THAT(errorOf("ring;gather:ring"), HasSubstr("unknown collective 'gather'"));
  EXPECT_THAT(errorOf("^ring:ring"), HasSubstr("unknown collective '^ring'"));
}

TEST(AlgoOverride, EmptyAllowedSets) {
  EXPECT_THAT(errorOf("allreduce:"), HasSubstr("empty algorithm list '' in 'allreduce:'"));
  EXPECT_THAT(errorOf("allreduce: ^ "), HasSubstr("empty algorithm list '^'"));
  EXPECT_THAT(errorOf("^"), HasSubstr("empty algorithm list '^' in '^'"));
  EXPECT_THAT(errorOf("ring,,pairwise"),
              HasSubstr("empty algorithm name in list 'ring,,pairwise' in 'ring,,pairwise'"));
  EXPECT_THAT(errorOf("ring,pairwise,"), HasSubstr("empty algorithm name"));
  EXPECT_THAT(errorOf("allreduce:0-1M:ring||ring"), HasSubstr("empty algorithm name"));
}

TEST(AlgoOverride, AlgorithmThatCannotServeANamedCollective) {
  ASSERT_FALSE(algorithmServes(Algorithm::kPairwise, Collective::kAllReduce));
  const std::string m = errorOf("allreduce:pairwise");
  EXPECT_THAT(m,
              StartsWith("BRAID_ALGO: algorithm 'pairwise' cannot serve allreduce (served by: "));
  EXPECT_THAT(m, HasSubstr("ring"));
  EXPECT_THAT(m, HasSubstr("in 'allreduce:pairwise'"));
  // Also when only one of a list, or one range, is unfit.
  EXPECT_THAT(errorOf("allreduce:ring,pairwise"), HasSubstr("'pairwise' cannot serve allreduce"));
  EXPECT_THAT(errorOf("reduce:0-1M:ring,1M-inf:pairwise"),
              HasSubstr("'pairwise' cannot serve reduce"));
  // Several unfit algorithms are all named.
  std::vector<std::string> unfit;
  for (int a = 0; a < kNumAlgorithms; ++a) {
    if (!algorithmServes(static_cast<Algorithm>(a), Collective::kBroadcast)) {
      unfit.emplace_back(algorithmName(static_cast<Algorithm>(a)));
    }
  }
  ASSERT_GE(unfit.size(), 1u);  // pairwise at least
  if (unfit.size() >= 2) {
    EXPECT_THAT(
        errorOf("broadcast:" + unfit[0] + "," + unfit[1]),
        HasSubstr("algorithms '" + unfit[0] + "', '" + unfit[1] + "' cannot serve broadcast"));
  }
  if (!algorithmServes(Algorithm::kRing, Collective::kAllToAll)) {
    EXPECT_THAT(errorOf("alltoall:ring|pairwise"), HasSubstr("'ring' cannot serve alltoall"));
  }
}

TEST(AlgoOverride, AtMostOneTermPerCollectiveAndOneGlobal) {
  EXPECT_THAT(errorOf("ring;pairwise"),
              HasSubstr("two terms without a collective, 'ring' and 'pairwise'"));
  EXPECT_THAT(errorOf("broadcast:ring;broadcast:0-1K:ring"),
              HasSubstr("broadcast is named twice, in 'broadcast:ring' and "
                        "'broadcast:0-1K:ring'"));
}

TEST(AlgoOverride, Describe) {
  const std::string none = AlgoOverride().describe();
  EXPECT_EQ(std::count(none.begin(), none.end(), '\n'), 5);  // six lines
  EXPECT_THAT(none, HasSubstr("allreduce: tuner's choice (no override)"));

  const std::string d =
      parsed("allreduce:0-64K:ring,64K-inf:ring;alltoall:pairwise;reduce:1K-2M:ring").describe();
  EXPECT_EQ(std::count(d.begin(), d.end(), '\n'), 5);
  EXPECT_THAT(d, HasSubstr("allreduce: 0-64K -> ring; 64K-inf -> ring\n"));
  EXPECT_THAT(d, HasSubstr("broadcast: tuner's choice (no override)\n"));
  EXPECT_THAT(d, HasSubstr("reduce: 1K-2M -> ring; other sizes -> tuner's choice\n"));
  EXPECT_THAT(d, HasSubstr("alltoall: pairwise"));
  EXPECT_THAT(parsed("allreduce:0-1000:ring,1001-inf:ring").describe(),
              HasSubstr("allreduce: 0-1000 -> ring; 1001-inf -> ring; other sizes -> "));
}

}  // namespace
}  // namespace braid
