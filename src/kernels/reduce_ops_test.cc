// The element rules of reduce_ops.h as the host compiles them: wrapping, the NaN and signed-zero
// choices of Max and Min, and Avg's division, whose host form (through double) must agree with
// the plain integer division that device code uses.
#include "kernels/reduce_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace braid::kernels {
namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float quietNanWithPayload(uint32_t payload) {
  const uint32_t bits = 0x7FC00000u | payload;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

TEST(ReduceOps, IntegersWrap) {
  EXPECT_EQ(SumOp::apply<int8_t>(127, 1), -128);
  EXPECT_EQ(SumOp::apply<uint8_t>(255, 1), 0);
  EXPECT_EQ(SumOp::apply<int32_t>(std::numeric_limits<int32_t>::max(), 1),
            std::numeric_limits<int32_t>::min());
  EXPECT_EQ(ProdOp::apply<uint8_t>(16, 16), 0);
  EXPECT_EQ(ProdOp::apply<int8_t>(-128, -1), -128);
  EXPECT_EQ(ProdOp::apply<int32_t>(65536, 65536), 0);
  EXPECT_EQ(ProdOp::apply<int64_t>(std::numeric_limits<int64_t>::min(), -1),
            std::numeric_limits<int64_t>::min());
}

TEST(ReduceOps, MaxMinLetANumberBeatNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(MaxOp::apply(nan, 1.0f), 1.0f);
  EXPECT_EQ(MaxOp::apply(1.0f, nan), 1.0f);
  EXPECT_EQ(MinOp::apply(nan, -1.0f), -1.0f);
  EXPECT_EQ(MinOp::apply(-1.0f, nan), -1.0f);
  EXPECT_EQ(MaxOp::apply(-2.0, std::numeric_limits<double>::quiet_NaN()), -2.0);
}

TEST(ReduceOps, MaxMinOfTwoNansKeepTheFirst) {
  const float a = quietNanWithPayload(1);
  const float b = quietNanWithPayload(2);
  EXPECT_EQ(bitsOf(MaxOp::apply(a, b)), bitsOf(a));
  EXPECT_EQ(bitsOf(MinOp::apply(a, b)), bitsOf(a));
}

TEST(ReduceOps, MaxMinOfEqualOperandsTakeTheSecond) {
  EXPECT_TRUE(std::signbit(MaxOp::apply(0.0f, -0.0f)));
  EXPECT_FALSE(std::signbit(MaxOp::apply(-0.0f, 0.0f)));
  EXPECT_TRUE(std::signbit(MinOp::apply(0.0f, -0.0f)));
  EXPECT_FALSE(std::signbit(MinOp::apply(-0.0f, 0.0f)));
}

// The host divides integers of up to 32 bits through double; C's division is the rule.
template <class T>
void expectAvgDivideIsCDivision() {
  static_assert(kAvgDividesInDouble<T>);
  using Limits = std::numeric_limits<T>;
  std::vector<T> xs = {0, 1, 2, 3, 7, Limits::max(), static_cast<T>(Limits::max() - 1)};
  if constexpr (std::is_signed_v<T>) {
    xs.insert(xs.end(), {-1, -2, -7, Limits::min(), static_cast<T>(Limits::min() + 1)});
  }
  for (int n = 1; n <= 4096; ++n) {
    for (T x : xs) {
      const T expected = static_cast<T>(x / n);
      ASSERT_EQ(avgDivide<T>(x, static_cast<AvgDivisor<T>>(n)), expected) << +x << " / " << n;
    }
  }
}

TEST(ReduceOps, AvgDivideTruncatesLikeC) {
  expectAvgDivideIsCDivision<int8_t>();
  expectAvgDivideIsCDivision<uint8_t>();
  expectAvgDivideIsCDivision<int32_t>();
  expectAvgDivideIsCDivision<uint32_t>();
  EXPECT_EQ(avgDivide<int64_t>(int64_t{-7}, 2), -3);
  EXPECT_EQ(avgDivide<int64_t>(std::numeric_limits<int64_t>::min(), 3),
            std::numeric_limits<int64_t>::min() / 3);
  EXPECT_EQ(avgDivide<uint64_t>(std::numeric_limits<uint64_t>::max(), 3),
            std::numeric_limits<uint64_t>::max() / 3);
}

TEST(ReduceOps, AvgDivideRoundsFloats) {
  EXPECT_EQ(avgDivide<float>(7.0f, 2.0f), 3.5f);
  EXPECT_EQ(avgDivide<double>(1.0, 3.0), 1.0 / 3.0);
}

}  // namespace
}  // namespace braid::kernels
