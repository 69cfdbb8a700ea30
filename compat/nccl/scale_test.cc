#include "scale.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace braid::ncclshim {
namespace {

TEST(NcclScale, HalfConversionRoundsToNearestEven) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);               // halfway to the next step: to infinity
  EXPECT_EQ(floatToHalf(1.0f + 1.0f / 2048), 0x3c00);     // tie, even neighbour
  EXPECT_EQ(floatToHalf(1.0f + 3.0f / 2048), 0x3c02);     // tie, rounds up to even
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie with zero
  EXPECT_EQ(floatToHalf(std::ldexp(3.0f, -26)), 0x0001);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(std::nanf("")))));
  for (uint32_t bits = 0; bits < 0x7c00; ++bits) {  // every finite positive half round-trips
    ASSERT_EQ(floatToHalf(halfToFloat(static_cast<uint16_t>(bits))), bits) << bits;
  }
}

TEST(NcclScale, Bfloat16ConversionRoundsToNearestEven) {
  EXPECT_EQ(floatToBfloat16(1.0f), 0x3f80);
  EXPECT_EQ(bfloat16ToFloat(0x4040), 3.0f);
  EXPECT_EQ(floatToBfloat16(1.0f + 1.0f / 256), 0x3f80);  // tie, even neighbour
  EXPECT_EQ(floatToBfloat16(1.0f + 3.0f / 256), 0x3f82);
  EXPECT_TRUE(std::isnan(bfloat16ToFloat(floatToBfloat16(std::nanf("")))));
}

TEST(NcclScale, ScalesEveryType) {
  const float fin[3] = {1.5f, -2.0f, 0.25f};
  const float fs = 4.0f;
  float fout[3];
  ASSERT_TRUE(scaleElements(fout, fin, 3, ncclFloat32, &fs));
  EXPECT_EQ(fout[0], 6.0f);
  EXPECT_EQ(fout[2], 1.0f);

  const int8_t iin[2] = {100, -3};
  const int8_t is = 2;
  int8_t iout[2];
  ASSERT_TRUE(scaleElements(iout, iin, 2, ncclInt8, &is));
  EXPECT_EQ(iout[0], static_cast<int8_t>(200 - 256));  // wraps as the hardware would
  EXPECT_EQ(iout[1], -6);

  const uint16_t hin[2] = {floatToHalf(1.5f), floatToHalf(-0.5f)};
  const uint16_t hs = floatToHalf(3.0f);
  uint16_t hout[2];
  ASSERT_TRUE(scaleElements(hout, hin, 2, ncclFloat16, &hs));
  EXPECT_EQ(halfToFloat(hout[0]), 4.5f);
  EXPECT_EQ(halfToFloat(hout[1]), -1.5f);

  const uint16_t bin[1] = {floatToBfloat16(2.0f)};
  const uint16_t bs = floatToBfloat16(0.5f);
  uint16_t bout[1];
  ASSERT_TRUE(scaleElements(bout, bin, 1, ncclBfloat16, &bs));
  EXPECT_EQ(bfloat16ToFloat(bout[0]), 1.0f);

  const double din[1] = {0.1};
  const double ds = 10.0;
  double dout[1];
  ASSERT_TRUE(scaleElements(dout, din, 1, ncclFloat64, &ds));
  EXPECT_DOUBLE_EQ(dout[0], 1.0);

  const uint64_t uin[1] = {1ull << 40};
  const uint64_t us = 3;
  uint64_t uout[1];
  ASSERT_TRUE(scaleElements(uout, uin, 1, ncclUint64, &us));
  EXPECT_EQ(uout[0], 3ull << 40);

  EXPECT_FALSE(scaleElements(uout, uin, 1, static_cast<ncclDataType_t>(42), &us));
}

}  // namespace
}  // namespace braid::ncclshim
