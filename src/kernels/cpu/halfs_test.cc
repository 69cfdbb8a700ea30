// float16 / bfloat16 conversions: exhaustive over the 16-bit side, swept over the float side,
// checked against the compiler's _Float16 and an independent bfloat16 rounding, and the same
// conversions as the vector kernels of every level perform them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/reduce.h"

namespace braid::kernels {
namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float compilerHalfToFloat(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, 2);
  return static_cast<float>(h);
}

uint16_t compilerFloatToHalf(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

bool isHalfNan(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0; }
bool isBf16Nan(uint16_t b) { return (b & 0x7F80) == 0x7F80 && (b & 0x007F) != 0; }

TEST(HalfConversionTest, EveryHalfWidensExactly) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const float got = halfToFloat(static_cast<uint16_t>(h));
    const float want = compilerHalfToFloat(static_cast<uint16_t>(h));
    if (isHalfNan(static_cast<uint16_t>(h))) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
      ASSERT_EQ(std::signbit(got), (h & 0x8000) != 0) << std::hex << h;
    } else {
      ASSERT_EQ(bitsOf(got), bitsOf(want)) << std::hex << h;  // also tells -0 from +0
    }
  }
}

TEST(HalfConversionTest, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const uint16_t back = floatToHalf(halfToFloat(static_cast<uint16_t>(h)));
    if (isHalfNan(static_cast<uint16_t>(h))) {
      ASSERT_TRUE(isHalfNan(back)) << std::hex << h;
      ASSERT_NE(back & 0x0200, 0) << "NaN not quiet " << std::hex << h;
    } else {
      ASSERT_EQ(back, h) << std::hex << h;
    }
  }
}

TEST(HalfConversionTest, NarrowingMatchesCompilerOverFloatSweep) {
  // Every 251st float bit pattern (all exponents, many mantissas) plus all halfway points.
  for (uint64_t u = 0; u <= 0xFFFFFFFFu; u += 251) {
    const float f = floatOf(static_cast<uint32_t>(u));
    if (std::isnan(f)) continue;
    ASSERT_EQ(floatToHalf(f), compilerFloatToHalf(f)) << std::hex << u;
  }
}

TEST(HalfConversionTest, TiesRoundToEven) {
  for (uint32_t h = 0; h < 0x7C00; ++h) {  // positive finite halves and the midpoint above each
    const double lo = compilerHalfToFloat(static_cast<uint16_t>(h));
    const double hi = h + 1 == 0x7C00 ? 65536.0 : compilerHalfToFloat(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((lo + hi) / 2);  // exact: halves have 11 bits
    const uint16_t even = (h & 1) == 0 ? static_cast<uint16_t>(h) : static_cast<uint16_t>(h + 1);
    ASSERT_EQ(floatToHalf(mid), even) << std::hex << h;
    ASSERT_EQ(floatToHalf(-mid), even | 0x8000) << std::hex << h;
    // Just off the midpoint the tie is broken by distance.
    ASSERT_EQ(floatToHalf(std::nextafter(mid, 0.0f)), h) << std::hex << h;
    ASSERT_EQ(floatToHalf(std::nextafter(mid, 1e9f)), h + 1) << std::hex << h;
  }
}

TEST(HalfConversionTest, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(floatToHalf(0.0f), 0x0000);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalf(inf), 0x7C00);
  EXPECT_EQ(floatToHalf(-inf), 0xFC00);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(floatToHalf(65519.99f), 0x7BFF);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7C00);  // tie between 65504 and 65536: even is infinity
  EXPECT_EQ(floatToHalf(1e10f), 0x7C00);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::max()), 0x7C00);
  // Subnormals: 2^-24 is the smallest; 2^-25 ties to zero, anything above rounds up to it.
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(floatToHalf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(floatToHalf(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 steps ties to even (2)
  EXPECT_EQ(floatToHalf(std::ldexp(1023.0f, -24)), 0x03FF);
  EXPECT_EQ(floatToHalf(std::ldexp(2047.0f, -25)), 0x0400);  // rounds up into the normals
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(floatToHalf(-std::numeric_limits<float>::denorm_min()), 0x8000);
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(halfToFloat(0x7C00), inf);
  EXPECT_EQ(halfToFloat(0xFC00), -inf);
  const uint16_t nan = floatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(isHalfNan(nan));
  EXPECT_TRUE(isHalfNan(floatToHalf(floatOf(0x7F800001u))));  // signalling, tiny payload
  EXPECT_TRUE(isHalfNan(floatToHalf(floatOf(0xFFC00000u))));
  EXPECT_NE(floatToHalf(floatOf(0xFFC00000u)) & 0x8000, 0);
}

/// bfloat16 rounding by distance to both neighbours, in double.
uint16_t referenceBf16(float f) {
  const uint32_t u = bitsOf(f);
  const uint32_t lo = u & 0xFFFF0000u;
  if (lo == u || std::isinf(f)) return static_cast<uint16_t>(u >> 16);
  const int biased = static_cast<int>((u >> 23) & 0xFF);
  const double ulp = std::ldexp(1.0, (biased == 0 ? 1 : biased) - 127 - 7);
  const double mag = std::fabs(static_cast<double>(f));
  const double loMag = std::fabs(static_cast<double>(floatOf(lo)));
  const double below = mag - loMag, above = loMag + ulp - mag;
  const bool up = above < below || (above == below && ((lo >> 16) & 1u) != 0);
  return static_cast<uint16_t>((up ? lo + 0x10000u : lo) >> 16);
}

TEST(Bfloat16ConversionTest, RoundTripsEveryBfloat16) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const float f = bfloat16ToFloat(static_cast<uint16_t>(b));
    ASSERT_EQ(bitsOf(f), b << 16);
    const uint16_t back = floatToBfloat16(f);
    if (isBf16Nan(static_cast<uint16_t>(b))) {
      ASSERT_TRUE(isBf16Nan(back)) << std::hex << b;
      ASSERT_EQ(back & 0x8000, b & 0x8000) << std::hex << b;
    } else {
      ASSERT_EQ(back, b) << std::hex << b;
    }
  }
}

TEST(Bfloat16ConversionTest, NarrowingMatchesReferenceOverFloatSweep) {
  for (uint64_t u = 0; u <= 0xFFFFFFFFu; u += 251) {
    const float f = floatOf(static_cast<uint32_t>(u));
    if (std::isnan(f)) {
      ASSERT_TRUE(isBf16Nan(floatToBfloat16(f))) << std::hex << u;
    } else {
      ASSERT_EQ(floatToBfloat16(f), referenceBf16(f)) << std::hex << u;
    }
  }
  // Ties: 1 + 2^-8 is half a bfloat16 ulp above 1 (to 1.0); 1 + 3 * 2^-8 goes up to even.
  EXPECT_EQ(floatToBfloat16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  EXPECT_EQ(floatToBfloat16(1.0f + std::ldexp(3.0f, -8)), 0x3F82);
  EXPECT_EQ(floatToBfloat16(std::numeric_limits<float>::max()), 0x7F80);  // rounds to infinity
  EXPECT_EQ(floatToBfloat16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(floatToBfloat16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(floatToBfloat16(floatOf(0x00018000u)), 0x0002);       // subnormal tie to even
  EXPECT_TRUE(isBf16Nan(floatToBfloat16(floatOf(0x7F800001u))));  // payload only in low bits
  EXPECT_TRUE(isBf16Nan(floatToBfloat16(floatOf(0xFFFFFFFFu))));
}

/// The kernels convert with F16C / AVX-512 instructions where present; Avg over one rank is
/// widen, divide by 1, narrow: a round trip of every value through each level's vector path.
TEST(HalfConversionTest, KernelsOfEveryLevelRoundTripEveryValue) {
  std::vector<uint16_t> all(0x10000), out(0x10000);
  for (uint32_t i = 0; i <= 0xFFFF; ++i) all[i] = static_cast<uint16_t>(i);
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (!cpuIsaSupported(isa)) continue;
    SCOPED_TRACE(cpuIsaName(isa));
    for (braidDataType_t type : {braidFloat16, braidBfloat16}) {
      Reducer(type, braidAvg, 1, isa).finalize(out.data(), all.data(), all.size());
      for (uint32_t i = 0; i <= 0xFFFF; ++i) {
        const bool nan = type == braidFloat16 ? isHalfNan(all[i]) : isBf16Nan(all[i]);
        if (nan) {
          ASSERT_TRUE(type == braidFloat16 ? isHalfNan(out[i]) : isBf16Nan(out[i])) << i;
          // Quieted NaNs keep the top of their payload, identically at every level.
          ASSERT_EQ(out[i], type == braidFloat16 ? floatToHalf(halfToFloat(all[i]))
                                                 : floatToBfloat16(bfloat16ToFloat(all[i])))
              << std::hex << i;
        } else {
          ASSERT_EQ(out[i], all[i]) << std::hex << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace braid::kernels
