#include "tuner/tuning_table.h"

#include <gtest/gtest.h>

namespace braid {
namespace {

const char* kGood =
    "# a comment\n"
    "braid-tuning-table 1\n"
    "\n"
    "allreduce 4 0 4K direct 32K 1 7.5   # trailing comment\n"
    "allreduce 4 4K inf ring 128K 2\n"
    "allreduce 2 0 inf rd 1024 4 1.25\n"
    "alltoall 4 1 1M pairwise 512K 1\n";

TEST(TuningTable, ParsesAndFinds) {
  Result<TuningTable> t = TuningTable::parse(kGood, "t.txt");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t.value().entries().size(), 4u);
  const TuningEntry* e = t.value().find(Collective::kAllReduce, 4, 4095);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->algo, Algorithm::kDirect);
  EXPECT_EQ(e->chunkBytes, 32u << 10);
  EXPECT_EQ(e->nchannels, 1);
  EXPECT_DOUBLE_EQ(e->timeUs, 7.5);
  EXPECT_EQ(e->line, 4);
  e = t.value().find(Collective::kAllReduce, 4, 4096);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->algo, Algorithm::kRing);
  EXPECT_LT(e->timeUs, 0);
  e = t.value().find(Collective::kAllReduce, 4, uint64_t{1} << 40);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->algo, Algorithm::kRing);
  EXPECT_EQ(t.value().find(Collective::kAllReduce, 3, 64), nullptr);
  EXPECT_EQ(t.value().find(Collective::kAllToAll, 4, 0), nullptr);
  EXPECT_EQ(t.value().find(Collective::kAllToAll, 4, 1 << 20), nullptr);
  EXPECT_EQ(t.value().find(Collective::kBroadcast, 4, 64), nullptr);
}

TEST(TuningTable, FormatRoundTrips) {
  Result<TuningTable> t = TuningTable::parse(kGood, "t.txt");
  ASSERT_TRUE(t.ok());
  const std::string text = t.value().format();
  Result<TuningTable> back = TuningTable::parse(text, "back");
  ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << text;
  EXPECT_EQ(back.value().format(), text);
  ASSERT_EQ(back.value().entries().size(), 4u);
  // Sorted by collective, rank count, size.
  EXPECT_EQ(back.value().entries()[0].nranks, 2);
  EXPECT_NE(text.find("allreduce 4 4K inf ring 128K 2\n"), std::string::npos) << text;
}

TEST(TuningTable, ErrorsNameFileAndLine) {
  struct Case {
    std::string text;
    std::string expect;
  };
  const std::string h = "braid-tuning-table 1\n";
  const std::vector<Case> cases = {
      {"", "f: empty, no 'braid-tuning-table' header"},
      {"allreduce 4 0 inf ring 1K 1\n", "f:1: expected the header"},
      {"braid-tuning-table 9\n", "f:1: unknown format version '9'"},
      {h + "allreduce 4 0 inf ring 1K\n", "f:2: expected 'collective nranks"},
      {h + "allgathr 4 0 inf ring 1K 1\n", "f:2: unknown collective 'allgathr'"},
      {h + "allreduce four 0 inf ring 1K 1\n", "f:2: bad nranks 'four'"},
      {h + "allreduce 4 x inf ring 1K 1\n", "f:2: bad min_bytes"},
      {h + "allreduce 4 8K 4K ring 1K 1\n", "f:2: empty size range [8K, 4K)"},
      {h + "allreduce 4 0 inf torus 1K 1\n", "f:2: unknown algorithm 'torus'"},
      {h + "allgather 4 0 inf tree 1K 1\n", "f:2: algorithm tree does not serve allgather"},
      {h + "allreduce 4 0 inf ring 100 1\n", "f:2: chunk_bytes 100 outside 1K..16M"},
      {h + "allreduce 4 0 inf ring 1K 0\n", "f:2: channels '0' outside 1..32"},
      {h + "allreduce 4 0 inf ring 1K 1 fast\n", "f:2: bad time_us 'fast'"},
      {h + "allreduce 4 0 8K ring 1K 1\n\nallreduce 4 4K 1M rd 1K 1\n",
       "f:4: size range overlaps the one of line 2"},
  };
  for (const Case& c : cases) {
    Result<TuningTable> t = TuningTable::parse(c.text, "f");
    ASSERT_FALSE(t.ok()) << c.text;
    EXPECT_NE(t.status().message().find(c.expect), std::string::npos)
        << "got: " << t.status().message() << "\nwant: " << c.expect;
  }
  // The same range for another rank count or collective is no overlap.
  EXPECT_TRUE(TuningTable::parse(h + "allreduce 4 0 8K ring 1K 1\nallreduce 8 0 8K ring 1K 1\n"
                                     "broadcast 4 0 8K ring 1K 1\n",
                                 "f")
                  .ok());
}

TEST(TuningTable, ReplaceKeepsOtherRankCounts) {
  Result<TuningTable> t = TuningTable::parse(kGood, "t.txt");
  ASSERT_TRUE(t.ok());
  TuningTable table = std::move(t).value();
  TuningEntry e;
  e.minBytes = 0;
  e.toInf = true;
  e.algo = Algorithm::kTree;
  e.chunkBytes = 64 << 10;
  e.nchannels = 2;
  ASSERT_TRUE(table.replace(Collective::kAllReduce, 4, {e}).ok());
  EXPECT_EQ(table.find(Collective::kAllReduce, 4, 8)->algo, Algorithm::kTree);
  EXPECT_EQ(table.find(Collective::kAllReduce, 2, 8)->algo, Algorithm::kRd);
  EXPECT_EQ(table.entries().size(), 3u);
  // Overlapping replacements are refused.
  TuningEntry f = e;
  f.toInf = false;
  f.maxBytes = 100;
  EXPECT_FALSE(table.replace(Collective::kAllReduce, 2, {e, f}).ok());
}

TEST(TuningTable, LoadNamesAMissingFile) {
  Result<TuningTable> t = TuningTable::load("/nonexistent/braid.tuning");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("/nonexistent/braid.tuning"), std::string::npos);
}

}  // namespace
}  // namespace braid
