#include "topology/cpu_set.h"

#include <gtest/gtest.h>

namespace braid {
namespace {

TEST(CpuSet, ParsesAndFormatsKernelLists) {
  Result<CpuSet> s = CpuSet::parseList("0-3,8,10-11\n");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->count(), 7);
  EXPECT_EQ(s->toVector(), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(s->toList(), "0-3,8,10-11");
  EXPECT_EQ(s->first(), 0);

  Result<CpuSet> empty = CpuSet::parseList("\n");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  EXPECT_EQ(empty->first(), -1);
  EXPECT_EQ(empty->toList(), "");
}

TEST(CpuSet, RejectsMalformedLists) {
  for (const char* bad : {"1-", "a", "3-1", "1,,2", "1;2", "-4", "99999999"}) {
    EXPECT_FALSE(CpuSet::parseList(bad).ok()) << bad;
  }
}

TEST(CpuSet, GrowsPastOneWordAndComparesByContent) {
  CpuSet a = CpuSet::of({1, 64, 130});
  EXPECT_TRUE(a.test(130));
  EXPECT_FALSE(a.test(129));
  EXPECT_FALSE(a.test(-1));
  EXPECT_EQ(a.count(), 3);
  a.clear(130);
  // Clearing the high bit shrinks storage, so equality stays a matter of content.
  EXPECT_EQ(a, CpuSet::of({64, 1}));
  EXPECT_EQ(a.toList(), "1,64");
}

TEST(CpuSet, SetAlgebra) {
  const CpuSet low = CpuSet::range(0, 7);
  const CpuSet mid = CpuSet::range(4, 11);
  const CpuSet high = CpuSet::range(64, 70);
  EXPECT_TRUE(CpuSet::range(2, 3).isSubsetOf(low));
  EXPECT_FALSE(mid.isSubsetOf(low));
  EXPECT_TRUE(CpuSet().isSubsetOf(low));
  EXPECT_TRUE(low.intersects(mid));
  EXPECT_FALSE(low.intersects(high));
  EXPECT_EQ((low & mid), CpuSet::range(4, 7));
  EXPECT_TRUE((low & high).empty());
  EXPECT_EQ((low | mid), CpuSet::range(0, 11));
  EXPECT_EQ((low | high).count(), 15);
}

}  // namespace
}  // namespace braid
