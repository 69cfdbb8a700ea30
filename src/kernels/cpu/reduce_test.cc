// Reducer and copy kernels against an independent scalar reference, for every instruction-set level
// the CPU supports x every datatype x every op. The reference computes integers in __int128 and
// keeps the low bits, float16 through the compiler's _Float16, bfloat16 by comparing the two
// neighbouring values in double: none of it shares code with the kernels.
#include "kernels/cpu/reduce.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "base/dtype.h"
#include "kernels/cpu/kernel_table.h"

namespace braid::kernels {
namespace {

constexpr CpuIsa kAllIsas[] = {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512};

// ---- Reference arithmetic -------------------------------------------------------------------

/// The low bits of r as T (two's complement wrap-around).
template <class T>
T wrapTo(unsigned __int128 r) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(r));
}

template <class T>
T refInt(braidRedOp_t op, T x, T y, bool final, int nranks) {
  const __int128 a = x, b = y;
  switch (op) {
    case braidSum: return wrapTo<T>(a + b);
    case braidProd:  // modulo 2^128, whose low bits are those of the true product
      return wrapTo<T>(static_cast<unsigned __int128>(a) * static_cast<unsigned __int128>(b));
    case braidMax: return a > b ? x : y;
    case braidMin: return a < b ? x : y;
    case braidAvg: {
      const T sum = wrapTo<T>(a + b);
      // Division of exact values truncates toward zero, the same quotient C gives in T's type.
      return final ? static_cast<T>(static_cast<__int128>(sum) / nranks) : sum;
    }
  }
  return 0;
}

template <class F>
F refFloat(braidRedOp_t op, F x, F y, bool final, int nranks) {
  switch (op) {
    case braidSum: return x + y;
    case braidProd: return x * y;
    case braidMax: return std::fmax(x, y);
    case braidMin: return std::fmin(x, y);
    case braidAvg: return final ? (x + y) / static_cast<F>(nranks) : x + y;
  }
  return 0;
}

float refHalfToFloat(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, 2);
  return static_cast<float>(h);
}

uint16_t refFloatToHalf(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

float refBf16ToFloat(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// Round to nearest even by measuring the distance to both bfloat16 neighbours in double.
uint16_t refFloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  const uint32_t lo = u & 0xFFFF0000u;  // toward zero
  if (lo == u || std::isinf(f)) return static_cast<uint16_t>(u >> 16);
  const int biased = static_cast<int>((u >> 23) & 0xFF);
  const double ulp = std::ldexp(1.0, (biased == 0 ? 1 : biased) - 127 - 7);
  const float loValue = refBf16ToFloat(static_cast<uint16_t>(lo >> 16));
  const double loMag = std::fabs(static_cast<double>(loValue));
  const double below = std::fabs(static_cast<double>(f)) - loMag;
  const double above = loMag + ulp - std::fabs(static_cast<double>(f));
  const bool up = above < below || (above == below && ((lo >> 16) & 1u) != 0);
  return static_cast<uint16_t>((up ? lo + 0x10000u : lo) >> 16);
}

/// The expected element for one (x, y); the element bytes are those of `type`.
void refElement(braidDataType_t type, braidRedOp_t op, int nranks, bool final, const void* x,
                const void* y, void* out) {
  auto apply = [&](auto tag) {
    using T = decltype(tag);
    T a, b, r;
    std::memcpy(&a, x, sizeof(T));
    std::memcpy(&b, y, sizeof(T));
    if constexpr (std::is_integral_v<T>) {
      r = refInt<T>(op, a, b, final, nranks);
    } else {
      r = refFloat<T>(op, a, b, final, nranks);
    }
    std::memcpy(out, &r, sizeof(T));
  };
  switch (type) {
    case braidInt8: return apply(int8_t{});
    case braidUint8: return apply(uint8_t{});
    case braidInt32: return apply(int32_t{});
    case braidUint32: return apply(uint32_t{});
    case braidInt64: return apply(int64_t{});
    case braidUint64: return apply(uint64_t{});
    case braidFloat32: return apply(float{});
    case braidFloat64: return apply(double{});
    case braidFloat16:
    case braidBfloat16: {
      uint16_t a, b;
      std::memcpy(&a, x, 2);
      std::memcpy(&b, y, 2);
      const bool half = type == braidFloat16;
      const float fa = half ? refHalfToFloat(a) : refBf16ToFloat(a);
      const float fb = half ? refHalfToFloat(b) : refBf16ToFloat(b);
      const float r = refFloat<float>(op, fa, fb, final, nranks);
      const uint16_t bits = half ? refFloatToHalf(r) : refFloatToBf16(r);
      std::memcpy(out, &bits, 2);
      return;
    }
  }
}

/// Equal values: integers bitwise; floats by ==, so -0 matches +0, and any NaN matches any NaN.
bool sameElement(braidDataType_t type, const void* x, const void* y) {
  auto asDouble = [&](const void* p) -> double {
    switch (type) {
      case braidFloat32: {
        float f;
        std::memcpy(&f, p, 4);
        return f;
      }
      case braidFloat64: {
        double d;
        std::memcpy(&d, p, 8);
        return d;
      }
      case braidFloat16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        return refHalfToFloat(h);
      }
      default: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        return refBf16ToFloat(h);
      }
    }
  };
  if (!isFloatingType(type)) return std::memcmp(x, y, dataTypeSize(type)) == 0;
  const double a = asDouble(x), b = asDouble(y);
  return (std::isnan(a) && std::isnan(b)) || a == b;
}

std::string hexElement(braidDataType_t type, const unsigned char* p) {
  std::string s = "0x";
  static const char* kDigits = "0123456789abcdef";
  for (size_t i = dataTypeSize(type); i-- > 0;) {
    s += kDigits[p[i] >> 4];
    s += kDigits[p[i] & 15];
  }
  return s;
}

// ---- Inputs ---------------------------------------------------------------------------------

/// Random elements over the type's whole range for integers (so sums and products wrap), and
/// mostly moderate floats with specials (NaN, infinities, signed zeros, subnormals) mixed in.
std::vector<unsigned char> randomElements(braidDataType_t type, size_t count,
                                          std::mt19937_64& rng) {
  const size_t size = dataTypeSize(type);
  std::vector<unsigned char> bytes(count * size);
  std::uniform_real_distribution<double> moderate(-100.0, 100.0);
  const double kSpecials[] = {std::numeric_limits<double>::quiet_NaN(),
                              std::numeric_limits<double>::infinity(),
                              -std::numeric_limits<double>::infinity(),
                              0.0,
                              -0.0,
                              1e-40,
                              -3e-8};
  for (size_t i = 0; i < count; ++i) {
    unsigned char* p = bytes.data() + i * size;
    if (!isFloatingType(type)) {
      const uint64_t r = rng();
      std::memcpy(p, &r, size);
      continue;
    }
    double v = moderate(rng);
    if (rng() % 8 == 0) v = kSpecials[rng() % std::size(kSpecials)];
    switch (type) {
      case braidFloat32: {
        const float f = static_cast<float>(v);
        std::memcpy(p, &f, 4);
        break;
      }
      case braidFloat64: std::memcpy(p, &v, 8); break;
      case braidFloat16: {
        const uint16_t h = refFloatToHalf(static_cast<float>(v));
        std::memcpy(p, &h, 2);
        break;
      }
      default: {
        const uint16_t b = refFloatToBf16(static_cast<float>(v));
        std::memcpy(p, &b, 2);
        break;
      }
    }
  }
  return bytes;
}

// ---- Parametrised over level x datatype x op ------------------------------------------------

using Param = std::tuple<CpuIsa, braidDataType_t, braidRedOp_t>;

class ReduceTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    if (!cpuIsaSupported(isa())) GTEST_SKIP() << cpuIsaName(isa()) << " not supported here";
  }
  CpuIsa isa() const { return std::get<0>(GetParam()); }
  braidDataType_t type() const { return std::get<1>(GetParam()); }
  braidRedOp_t op() const { return std::get<2>(GetParam()); }
  size_t size() const { return dataTypeSize(type()); }

  enum class Call { kReduce, kReduceFinal, kFinalize };

  /// Runs `call` on count elements with dst/a/b displaced by the given byte offsets from
  /// guarded buffers, and checks every element and that nothing outside dst changed.
  void check(Call call, size_t count, size_t dstOff, size_t aOff, size_t bOff, int nranks,
             uint64_t seed) {
    SCOPED_TRACE(::testing::Message() << "count " << count << " offsets " << dstOff << "/" << aOff
                                      << "/" << bOff << " nranks " << nranks);
    std::mt19937_64 rng(seed);
    const size_t bytes = count * size();
    constexpr size_t kGuard = 64;
    std::vector<unsigned char> a = randomElements(type(), count, rng);
    std::vector<unsigned char> b = randomElements(type(), count, rng);
    std::vector<unsigned char> abuf(bytes + 2 * kGuard), bbuf(bytes + 2 * kGuard);
    std::vector<unsigned char> dbuf(bytes + 2 * kGuard, 0xA5);
    if (bytes > 0) {
      std::memcpy(abuf.data() + kGuard + aOff, a.data(), bytes);
      std::memcpy(bbuf.data() + kGuard + bOff, b.data(), bytes);
    }
    unsigned char* dst = dbuf.data() + kGuard + dstOff;
    const Reducer reducer(type(), op(), nranks, isa());
    ASSERT_TRUE(reducer.valid());
    switch (call) {
      case Call::kReduce:
        reducer.reduce(dst, abuf.data() + kGuard + aOff, bbuf.data() + kGuard + bOff, count);
        break;
      case Call::kReduceFinal:
        reducer.reduceFinal(dst, abuf.data() + kGuard + aOff, bbuf.data() + kGuard + bOff, count);
        break;
      case Call::kFinalize: reducer.finalize(dst, abuf.data() + kGuard + aOff, count); break;
    }
    expectElements(call, a, b, count, nranks, dst);
    for (size_t i = 0; i < dbuf.size(); ++i) {
      const bool inside = i >= kGuard + dstOff && i < kGuard + dstOff + bytes;
      if (!inside) {
        ASSERT_EQ(dbuf[i], 0xA5) << "write outside dst at byte " << i;
      }
    }
  }

  /// Compares dst against the reference of (a, b) under `call`.
  void expectElements(Call call, const std::vector<unsigned char>& a,
                      const std::vector<unsigned char>& b, size_t count, int nranks,
                      const unsigned char* dst) {
    std::vector<unsigned char> want(size());
    int failures = 0;
    for (size_t i = 0; i < count && failures < 5; ++i) {
      const unsigned char* x = a.data() + i * size();
      const unsigned char* y = b.data() + i * size();
      if (call == Call::kFinalize) {
        // post(x): x itself, or for Avg x / nranks, which is (x + 0) / nranks.
        std::vector<unsigned char> zero(size(), 0);
        refElement(type(), op() == braidAvg ? braidAvg : braidSum, nranks, true, x, zero.data(),
                   want.data());
        if (op() != braidAvg) std::memcpy(want.data(), x, size());
      } else {
        refElement(type(), op(), nranks, call == Call::kReduceFinal, x, y, want.data());
      }
      if (!sameElement(type(), dst + i * size(), want.data())) {
        ++failures;
        ADD_FAILURE() << "element " << i << ": got " << hexElement(type(), dst + i * size())
                      << " want " << hexElement(type(), want.data()) << " from "
                      << hexElement(type(), x) << ", " << hexElement(type(), y);
      }
    }
  }
};

constexpr size_t kLengths[] = {0, 1, 3, 15, 16, 17, 1000, 4099};

TEST_P(ReduceTest, ReduceAllLengthsAligned) {
  for (size_t n : kLengths) check(Call::kReduce, n, 0, 0, 0, 3, n);
}

TEST_P(ReduceTest, ReduceMisalignedByOneElement) {
  const size_t e = size();
  for (size_t n : kLengths) {
    check(Call::kReduce, n, e, e, e, 3, n + 1);
    check(Call::kReduce, n, e, 0, e, 3, n + 2);
    check(Call::kReduce, n, 0, e, 0, 3, n + 3);
  }
}

TEST_P(ReduceTest, ReduceMisalignedByOneByte) {
  for (size_t n : {size_t{17}, size_t{1000}}) check(Call::kReduce, n, 1, 3, 2, 3, n + 4);
}

TEST_P(ReduceTest, ReduceFinal) {
  for (size_t n : kLengths) check(Call::kReduceFinal, n, size(), 0, size(), 3, n + 5);
  for (int nranks : {1, 2, 7, 200}) check(Call::kReduceFinal, 1000, 0, 0, 0, nranks, 77);
}

TEST_P(ReduceTest, Finalize) {
  for (size_t n : kLengths) check(Call::kFinalize, n, 0, size(), 0, 5, n + 6);
  check(Call::kFinalize, 1000, 0, 0, 0, 1, 78);
}

TEST_P(ReduceTest, InPlace) {
  // dst == a, dst == b, and finalize with dst == src: the expected values come from copies.
  std::mt19937_64 rng(11);
  const Reducer reducer(type(), op(), 4, isa());
  for (size_t n : {size_t{17}, size_t{4099}}) {
    std::vector<unsigned char> a = randomElements(type(), n, rng);
    std::vector<unsigned char> b = randomElements(type(), n, rng);
    std::vector<unsigned char> want(n * size()), work = a;
    for (size_t i = 0; i < n; ++i) {
      refElement(type(), op(), 4, true, a.data() + i * size(), b.data() + i * size(),
                 want.data() + i * size());
    }
    reducer.reduceFinal(work.data(), work.data(), b.data(), n);  // dst == a
    for (size_t i = 0; i < n; ++i) {
      ASSERT_TRUE(sameElement(type(), work.data() + i * size(), want.data() + i * size())) << i;
    }
    work = b;
    reducer.reduceFinal(work.data(), a.data(), work.data(), n);  // dst == b
    for (size_t i = 0; i < n; ++i) {
      ASSERT_TRUE(sameElement(type(), work.data() + i * size(), want.data() + i * size())) << i;
    }
    work = a;
    reducer.reduce(work.data(), work.data(), work.data(), n);  // dst == a == b
    for (size_t i = 0; i < n; ++i) {
      refElement(type(), op(), 4, false, a.data() + i * size(), a.data() + i * size(),
                 want.data() + i * size());
      ASSERT_TRUE(sameElement(type(), work.data() + i * size(), want.data() + i * size())) << i;
    }
  }
}

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  return std::string(cpuIsaName(std::get<0>(info.param))) + "_" +
         std::string(dataTypeName(std::get<1>(info.param))) + "_" +
         std::string(redOpName(std::get<2>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(
    AllLevelsTypesOps, ReduceTest,
    ::testing::Combine(::testing::ValuesIn(kAllIsas),
                       ::testing::Values(braidInt8, braidUint8, braidInt32, braidUint32, braidInt64,
                                         braidUint64, braidFloat16, braidFloat32, braidFloat64,
                                         braidBfloat16),
                       ::testing::Values(braidSum, braidProd, braidMax, braidMin, braidAvg)),
    paramName);

// ---- Hand-picked values, per level ----------------------------------------------------------

class ReduceValuesTest : public ::testing::TestWithParam<CpuIsa> {
 protected:
  void SetUp() override {
    if (!cpuIsaSupported(GetParam())) GTEST_SKIP() << cpuIsaName(GetParam()) << " not supported";
  }
  /// dst = op(a, b) over the given values (final or not), returned.
  template <class T>
  std::vector<T> run(braidDataType_t type, braidRedOp_t op, int nranks, bool final,
                     const std::vector<T>& a, const std::vector<T>& b) {
    std::vector<T> dst(a.size());
    const Reducer reducer(type, op, nranks, GetParam());
    if (final) {
      reducer.reduceFinal(dst.data(), a.data(), b.data(), a.size());
    } else {
      reducer.reduce(dst.data(), a.data(), b.data(), a.size());
    }
    return dst;
  }
};

TEST_P(ReduceValuesTest, IntegersWrapAround) {
  using I8 = std::vector<int8_t>;
  EXPECT_EQ(run(braidInt8, braidSum, 1, false, I8{127, -128, 100}, I8{1, -1, 100}),
            (I8{-128, 127, -56}));
  EXPECT_EQ(run(braidInt8, braidProd, 1, false, I8{16, -128, 11}, I8{16, -1, 13}),
            (I8{0, -128, static_cast<int8_t>(143 - 256)}));
  using U8 = std::vector<uint8_t>;
  EXPECT_EQ(run(braidUint8, braidSum, 1, false, U8{255, 200}, U8{1, 100}), (U8{0, 44}));
  using I32 = std::vector<int32_t>;
  constexpr int32_t kMax32 = std::numeric_limits<int32_t>::max();
  constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(run(braidInt32, braidSum, 1, false, I32{kMax32, kMin32}, I32{1, -1}),
            (I32{kMin32, kMax32}));
  EXPECT_EQ(run(braidInt32, braidProd, 1, false, I32{65536, kMin32}, I32{65536, -1}),
            (I32{0, kMin32}));
  using U32 = std::vector<uint32_t>;
  EXPECT_EQ(run(braidUint32, braidProd, 1, false, U32{0xFFFFFFFFu}, U32{0xFFFFFFFFu}), U32{1});
  using I64 = std::vector<int64_t>;
  constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(run(braidInt64, braidSum, 1, false, I64{kMax64, kMin64}, I64{1, -1}),
            (I64{kMin64, kMax64}));
  EXPECT_EQ(run(braidInt64, braidProd, 1, false, I64{int64_t{1} << 32, kMin64},
                I64{int64_t{1} << 32, -1}),
            (I64{0, kMin64}));
  using U64 = std::vector<uint64_t>;
  EXPECT_EQ(run(braidUint64, braidSum, 1, false, U64{~uint64_t{0}}, U64{2}), U64{1});
}

TEST_P(ReduceValuesTest, AvgTruncatesIntegersTowardZero) {
  using I32 = std::vector<int32_t>;
  EXPECT_EQ(run(braidInt32, braidAvg, 2, true, I32{-7, 7, -1, -6}, I32{0, 0, 0, 0}),
            (I32{-3, 3, 0, -3}));
  EXPECT_EQ(run(braidInt32, braidAvg, 3, true, I32{-2147483647 - 1}, I32{0}), I32{-715827882});
  using I8 = std::vector<int8_t>;
  // -128 + -1 wraps to 127 before the division; nranks beyond int8's range divides in int.
  EXPECT_EQ(run(braidInt8, braidAvg, 2, true, I8{-128, -100}, I8{-1, -1}), (I8{63, -50}));
  // (The sums wrap to 56 and -56; dividing by int8_t(200) == -56 instead would give -1 and 1.)
  EXPECT_EQ(run(braidInt8, braidAvg, 200, true, I8{-100, 100}, I8{-100, 100}), (I8{0, 0}));
  using U8 = std::vector<uint8_t>;
  EXPECT_EQ(run(braidUint8, braidAvg, 3, true, U8{200}, U8{55}), U8{85});
  using U32 = std::vector<uint32_t>;
  EXPECT_EQ(run(braidUint32, braidAvg, 3, true, U32{0xFFFFFFFFu}, U32{0}), U32{0x55555555u});
  using I64 = std::vector<int64_t>;
  EXPECT_EQ(
      run(braidInt64, braidAvg, 3, true, I64{std::numeric_limits<int64_t>::min(), -5}, I64{0, 0}),
      (I64{-3074457345618258602, -1}));
  using U64 = std::vector<uint64_t>;
  EXPECT_EQ(run(braidUint64, braidAvg, 2, true, U64{~uint64_t{0}}, U64{0}), U64{~uint64_t{0} >> 1});
  // Not final: Avg is a plain sum.
  EXPECT_EQ(run(braidInt32, braidAvg, 2, false, I32{-7}, I32{2}), I32{-5});
}

TEST_P(ReduceValuesTest, MaxMinWithNanAndInfinity) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  using F = std::vector<float>;
  // Eight cases, repeated to 39 elements so that vector bodies and scalar tails both see each.
  const F xs = {nan, 1.0f, nan, inf, -inf, -inf, 2.0f, nan};
  const F ys = {1.0f, nan, nan, 5.0f, 3.0f, inf, -inf, -inf};
  const F maxes = {1.0f, 1.0f, nan, inf, 3.0f, inf, 2.0f, -inf};
  const F mins = {1.0f, 1.0f, nan, 5.0f, -inf, -inf, -inf, -inf};
  F a, b;
  for (size_t i = 0; i < 39; ++i) {
    a.push_back(xs[i % 8]);
    b.push_back(ys[i % 8]);
  }
  const F mx = run(braidFloat32, braidMax, 1, false, a, b);
  const F mn = run(braidFloat32, braidMin, 1, false, a, b);
  for (size_t i = 0; i < a.size(); ++i) {
    if (i % 8 == 2) {
      EXPECT_TRUE(std::isnan(mx[i]) && std::isnan(mn[i])) << i;
    } else {
      EXPECT_EQ(mx[i], maxes[i % 8]) << i;
      EXPECT_EQ(mn[i], mins[i % 8]) << i;
    }
  }
  const double dnan = std::numeric_limits<double>::quiet_NaN();
  using D = std::vector<double>;
  const D dm = run(braidFloat64, braidMax, 1, false, D{dnan, 2.0, dnan}, D{-1.0, dnan, dnan});
  EXPECT_EQ(dm[0], -1.0);
  EXPECT_EQ(dm[1], 2.0);
  EXPECT_TRUE(std::isnan(dm[2]));
  // float16 NaN (0x7E00) against 1.0 (0x3C00) and -inf (0xFC00); bfloat16 NaN (0x7FC0) vs 2.0.
  using H = std::vector<uint16_t>;
  EXPECT_EQ(run(braidFloat16, braidMax, 1, false, H{0x7E00, 0xFC00}, H{0x3C00, 0x7E00}),
            (H{0x3C00, 0xFC00}));
  EXPECT_EQ(run(braidFloat16, braidMin, 1, false, H{0x7E00, 0x7C00}, H{0x3C00, 0x7E00}),
            (H{0x3C00, 0x7C00}));
  EXPECT_EQ(run(braidBfloat16, braidMax, 1, false, H{0x7FC0, 0x4000}, H{0x4000, 0x7FC0}),
            (H{0x4000, 0x4000}));
}

TEST_P(ReduceValuesTest, HalfSumRoundsOnceToNearestEven) {
  using H = std::vector<uint16_t>;
  // 1 + 2^-11 is half an ulp above 1: a tie, to even (1.0). 1 + 3*2^-11 ties up to 1 + 2^-9.
  // 2^-11 is 0x1000; 3*2^-11 is 0x1600. 65504 + 16 = 65520 rounds to infinity.
  EXPECT_EQ(run(braidFloat16, braidSum, 1, false, H{0x3C00, 0x3C00, 0x7BFF, 0x7BFF},
                H{0x1000, 0x1600, 0x4C00, 0x4BFF}),
            (H{0x3C00, 0x3C02, 0x7C00, 0x7BFF}));
  // Subnormals: 2^-24 + 2^-24 = 2^-23 stays exact.
  EXPECT_EQ(run(braidFloat16, braidSum, 1, false, H{0x0001}, H{0x0001}), H{0x0002});
  // Avg in float: (1 + 2) / 3 = 1.0 exactly; (1 + 0) / 3 rounds once from float.
  EXPECT_EQ(run(braidFloat16, braidAvg, 3, true, H{0x3C00, 0x3C00}, H{0x4000, 0x0000}),
            (H{0x3C00, 0x3555}));
  // bfloat16: 1 + 2^-8 ties to 1; 1 + 3*2^-8 ties up to 1 + 2^-6.
  EXPECT_EQ(run(braidBfloat16, braidSum, 1, false, H{0x3F80, 0x3F80}, H{0x3B80, 0x3C40}),
            (H{0x3F80, 0x3F82}));
}

INSTANTIATE_TEST_SUITE_P(AllLevels, ReduceValuesTest, ::testing::ValuesIn(kAllIsas),
                         [](const ::testing::TestParamInfo<CpuIsa>& info) {
                           return std::string(cpuIsaName(info.param));
                         });

// ---- Copies ---------------------------------------------------------------------------------

std::vector<unsigned char> patternBytes(size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = static_cast<unsigned char>((i * 131 + seed * 7 + i / 251) & 0xFF);
  }
  return v;
}

/// Runs a one- or two-destination copy of `bytes` with the destinations displaced by `off1` /
/// `off2` bytes and checks the data and the guard bytes around each destination.
template <class CopyCall>
void checkCopy(size_t bytes, size_t srcOff, size_t off1, size_t off2, bool two, CopyCall call) {
  SCOPED_TRACE(::testing::Message()
               << "bytes " << bytes << " offsets " << srcOff << "/" << off1 << "/" << off2);
  constexpr size_t kGuard = 64;
  const std::vector<unsigned char> data = patternBytes(bytes, static_cast<unsigned>(bytes));
  std::vector<unsigned char> src(bytes + 2 * kGuard), d1(bytes + 2 * kGuard, 0x5A),
      d2(bytes + 2 * kGuard, 0x3C);
  if (bytes > 0) std::memcpy(src.data() + kGuard + srcOff, data.data(), bytes);
  call(d1.data() + kGuard + off1, two ? d2.data() + kGuard + off2 : nullptr,
       src.data() + kGuard + srcOff, bytes);
  auto verify = [&](const std::vector<unsigned char>& d, size_t off, unsigned char guard) {
    for (size_t i = 0; i < d.size(); ++i) {
      const bool inside = i >= kGuard + off && i < kGuard + off + bytes;
      const unsigned char want = inside ? data[i - kGuard - off] : guard;
      ASSERT_EQ(d[i], want) << "byte " << i;
    }
  };
  verify(d1, off1, 0x5A);
  if (two) verify(d2, off2, 0x3C);
}

class CopyTest : public ::testing::TestWithParam<CpuIsa> {
 protected:
  void SetUp() override {
    if (!cpuIsaSupported(GetParam())) GTEST_SKIP() << cpuIsaName(GetParam()) << " not supported";
  }
};

constexpr size_t kCopyLengths[] = {0, 1, 15, 63, 64, 65, 127, 128, 129, 1000, 4099, 70001};

TEST_P(CopyTest, AllKernelsAllLengthsAndOffsets) {
  const KernelTable& t = kernelTable(GetParam());
  for (size_t n : kCopyLengths) {
    for (size_t off : {size_t{0}, size_t{1}, size_t{37}}) {
      auto one = [](CopyFn fn) {
        return [fn](void* d1, void*, const void* s, size_t b) { fn(d1, s, b); };
      };
      auto two = [](Copy2Fn fn) {
        return [fn](void* d1, void* d2, const void* s, size_t b) { fn(d1, d2, s, b); };
      };
      checkCopy(n, 0, off, 0, false, one(t.copyCached));
      checkCopy(n, 3, off, 0, false, one(t.copyStreaming));
      checkCopy(n, off, 0, off, true, two(t.copy2Cached));
      checkCopy(n, 0, off, off, true, two(t.copy2Streaming));      // destinations line up
      checkCopy(n, 0, off, off + 5, true, two(t.copy2Streaming));  // they cannot
    }
  }
}

TEST_P(CopyTest, DestinationEqualsSource) {
  const KernelTable& t = kernelTable(GetParam());
  for (size_t n : {size_t{100}, size_t{70001}}) {
    const std::vector<unsigned char> data = patternBytes(n, 9);
    std::vector<unsigned char> buf = data, other(n, 0);
    t.copy2Cached(buf.data(), other.data(), buf.data(), n);
    EXPECT_EQ(buf, data);
    EXPECT_EQ(other, data);
    std::fill(other.begin(), other.end(), 0);
    t.copy2Streaming(other.data(), buf.data(), buf.data(), n);
    EXPECT_EQ(buf, data);
    EXPECT_EQ(other, data);
    t.copy2Cached(buf.data(), buf.data(), buf.data(), n);
    EXPECT_EQ(buf, data);
  }
}

INSTANTIATE_TEST_SUITE_P(AllLevels, CopyTest, ::testing::ValuesIn(kAllIsas),
                         [](const ::testing::TestParamInfo<CpuIsa>& info) {
                           return std::string(cpuIsaName(info.param));
                         });

TEST(PublicCopyTest, BelowAndAboveTheStreamingThreshold) {
  const size_t big = streamingCopyThreshold() + 4099;
  for (size_t n : {size_t{0}, size_t{1}, size_t{4099}, big}) {
    checkCopy(n, 1, 7, 0, false, [](void* d1, void*, const void* s, size_t b) { copy(d1, s, b); });
    checkCopy(n, 0, 3, 9, true,
              [](void* d1, void* d2, const void* s, size_t b) { copy2(d1, d2, s, b); });
  }
  std::vector<unsigned char> data = patternBytes(big, 1), buf = data;
  copy(buf.data(), buf.data(), big);
  EXPECT_EQ(buf, data);
  std::vector<unsigned char> other(big);
  copy2(buf.data(), other.data(), buf.data(), big);
  EXPECT_EQ(buf, data);
  EXPECT_EQ(other, data);
}

TEST(PublicCopyTest, StreamingVariantsWhateverTheSize) {
  for (size_t n : {size_t{0}, size_t{5}, size_t{4099}, size_t{70001}}) {
    checkCopy(n, 2, 5, 0, false,
              [](void* d1, void*, const void* s, size_t b) { copyStreaming(d1, s, b); });
  }
  // The destination may be the source.
  const std::vector<unsigned char> data = patternBytes(4099, 3);
  std::vector<unsigned char> buf = data;
  copyStreaming(buf.data(), buf.data(), buf.size());
  EXPECT_EQ(buf, data);
}

// reduceAll and reduceToAll against element-by-element sums, Avg finalized on the last step:
// three int32 operands, sizes around reduceToAll's 16 KiB pieces, up to three outputs (the
// first streamed or not), and an output that is operands[0] itself.
TEST(ReduceToAllTest, EveryOutputGetsTheFinalizedValue) {
  const Reducer avg(braidInt32, braidAvg, 3);
  for (size_t count : {size_t{1}, size_t{4095}, size_t{4096}, size_t{4097}, size_t{10000}}) {
    std::vector<int32_t> a(count), b(count), c(count), want(count);
    for (size_t i = 0; i < count; ++i) {
      a[i] = static_cast<int32_t>(i * 7 + 1);
      b[i] = static_cast<int32_t>(i % 13) - 6;
      c[i] = -static_cast<int32_t>(i);
      want[i] = (a[i] + b[i] + c[i]) / 3;
    }
    const char* operands[3] = {reinterpret_cast<const char*>(a.data()),
                               reinterpret_cast<const char*>(b.data()),
                               reinterpret_cast<const char*>(c.data())};
    std::vector<int32_t> direct(count, 99);
    reduceAll(avg, reinterpret_cast<char*>(direct.data()), operands, 3, count, true);
    EXPECT_EQ(direct, want) << count;
    for (int noutputs = 1; noutputs <= 3; ++noutputs) {
      for (bool stream : {false, true}) {
        std::vector<std::vector<int32_t>> outs(noutputs, std::vector<int32_t>(count + 1, 99));
        char* outputs[3];
        for (int i = 0; i < noutputs; ++i) outputs[i] = reinterpret_cast<char*>(outs[i].data());
        reduceToAll(avg, outputs, noutputs, stream, operands, 3, count * 4, true);
        for (int i = 0; i < noutputs; ++i) {
          EXPECT_TRUE(std::equal(want.begin(), want.end(), outs[i].begin()))
              << count << " elements, output " << i << " of " << noutputs;
          EXPECT_EQ(outs[i][count], 99) << "wrote past the end";
        }
      }
    }
    std::vector<int32_t> inPlace = a;
    char* self[1] = {reinterpret_cast<char*>(inPlace.data())};
    const char* fromSelf[3] = {self[0], operands[1], operands[2]};
    reduceToAll(avg, self, 1, true, fromSelf, 3, count * 4, true);
    EXPECT_EQ(inPlace, want) << count << " in place";
  }
}

TEST(ReducerTest, DescribesItselfAndRejectsBadEnums) {
  const Reducer r(braidBfloat16, braidAvg, 0);
  EXPECT_TRUE(r.valid());
  EXPECT_EQ(r.type(), braidBfloat16);
  EXPECT_EQ(r.op(), braidAvg);
  EXPECT_EQ(r.nranks(), 1);
  EXPECT_EQ(r.elemSize(), 2u);
  const Reducer bad(static_cast<braidDataType_t>(42), braidSum, 2);
  EXPECT_FALSE(bad.valid());
  int dst = 7;
  const int a = 1, b = 2;
  bad.reduce(&dst, &a, &b, 1);  // does nothing rather than crash
  EXPECT_EQ(dst, 7);
  EXPECT_FALSE(Reducer(braidInt32, static_cast<braidRedOp_t>(-1), 2).valid());
  const Reducer def;
  EXPECT_TRUE(def.valid());
  EXPECT_EQ(def.type(), braidFloat32);
  EXPECT_EQ(def.op(), braidSum);
}

TEST(ReducerTest, BestLevelIsSupported) {
  EXPECT_TRUE(cpuIsaSupported(CpuIsa::kBaseline));
  EXPECT_TRUE(cpuIsaSupported(bestCpuIsa()));
  EXPECT_EQ(kernelTable(bestCpuIsa()).isa, bestCpuIsa());
  EXPECT_EQ(bestKernelTable().isa, bestCpuIsa());
}

}  // namespace
}  // namespace braid::kernels
