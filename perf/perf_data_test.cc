#include "perf/perf_data.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/reduce.h"
#include "perf/perf_types.h"

namespace braid::perf {
namespace {

using Bytes = std::vector<unsigned char>;

constexpr braidDataType_t kAllTypes[] = {braidInt8,    braidUint8,   braidInt32,   braidUint32,
                                         braidInt64,   braidUint64,  braidFloat16, braidFloat32,
                                         braidFloat64, braidBfloat16};
constexpr braidRedOp_t kAllOps[] = {braidSum, braidProd, braidMax, braidMin, braidAvg};

CheckSpec makeSpec(PerfCollective coll, braidDataType_t type, braidRedOp_t op, int nranks,
                   uint64_t bytes, int root = 0) {
  CheckSpec spec;
  spec.coll = coll;
  spec.type = type;
  spec.op = op;
  spec.nranks = nranks;
  spec.root = root;
  spec.shape = collShape(coll, bytes, elementSize(type), nranks);
  return spec;
}

std::vector<Bytes> inputsOf(CheckSpec spec) {
  std::vector<Bytes> inputs;
  for (int r = 0; r < spec.nranks; ++r) {
    spec.rank = r;
    Bytes b(spec.shape.sendBytes() + 1);
    fillInput(spec, b.data());
    inputs.push_back(std::move(b));
  }
  return inputs;
}

/// The reduction the library's own kernels compute, combining ranks in the given order.
Bytes libraryReduce(const CheckSpec& spec, const std::vector<const unsigned char*>& srcs,
                    uint64_t count) {
  const kernels::Reducer reducer(spec.type, spec.op, spec.nranks);
  Bytes out(count * spec.shape.typeSize + 1);
  if (srcs.size() == 1) {
    reducer.finalize(out.data(), srcs[0], count);
    return out;
  }
  std::memcpy(out.data(), srcs[0], count * spec.shape.typeSize);
  for (size_t i = 1; i < srcs.size(); ++i) {
    if (i + 1 == srcs.size()) {
      reducer.reduceFinal(out.data(), out.data(), srcs[i], count);
    } else {
      reducer.reduce(out.data(), out.data(), srcs[i], count);
    }
  }
  return out;
}

/// What rank `rank` receives, built from every rank's filled input as the collective defines it.
Bytes simulateOutput(CheckSpec spec, int rank, bool reverseOrder = false) {
  const std::vector<Bytes> inputs = inputsOf(spec);
  const CollShape& s = spec.shape;
  const size_t ts = s.typeSize;
  const int n = spec.nranks;
  Bytes out(s.recvBytes() + 1);
  std::vector<const unsigned char*> srcs;
  auto ordered = [&](uint64_t offsetElems) {
    srcs.clear();
    for (int i = 0; i < n; ++i) {
      const int r = reverseOrder ? n - 1 - i : i;
      srcs.push_back(inputs[r].data() + offsetElems * ts);
    }
  };
  switch (spec.coll) {
    case PerfCollective::kAllReduce:
    case PerfCollective::kReduce: ordered(0); return libraryReduce(spec, srcs, s.recvCount);
    case PerfCollective::kReduceScatter:
      ordered(static_cast<uint64_t>(rank) * s.paramCount);
      return libraryReduce(spec, srcs, s.recvCount);
    case PerfCollective::kBroadcast:
      std::memcpy(out.data(), inputs[spec.root].data(), s.recvBytes());
      return out;
    case PerfCollective::kAllGather:
      for (int p = 0; p < n; ++p) {
        std::memcpy(out.data() + p * s.paramCount * ts, inputs[p].data(), s.paramCount * ts);
      }
      return out;
    case PerfCollective::kAllToAll:
      for (int p = 0; p < n; ++p) {
        std::memcpy(out.data() + p * s.paramCount * ts,
                    inputs[p].data() + static_cast<uint64_t>(rank) * s.paramCount * ts,
                    s.paramCount * ts);
      }
      return out;
    case PerfCollective::kSendRecv:
      std::memcpy(out.data(), inputs[(rank + n - 1) % n].data(), s.recvBytes());
      return out;
  }
  return out;
}

TEST(PerfData, ShapesFollowNcclTests) {
  CollShape s = collShape(PerfCollective::kAllReduce, 1000, 4, 3);
  EXPECT_EQ(s.paramCount, 250u);
  EXPECT_EQ(s.reportBytes(), 1000u);

  s = collShape(PerfCollective::kAllGather, 1000, 4, 3);  // 250 elements, 83 per rank
  EXPECT_EQ(s.paramCount, 83u);
  EXPECT_EQ(s.sendCount, 83u);
  EXPECT_EQ(s.recvCount, 249u);
  EXPECT_EQ(s.reportBytes(), 996u);
  EXPECT_EQ(s.sendInPlaceOffset, 83u);
  EXPECT_EQ(s.recvInPlaceOffset, 0u);

  s = collShape(PerfCollective::kReduceScatter, 1000, 4, 3);
  EXPECT_EQ(s.paramCount, 83u);
  EXPECT_EQ(s.sendCount, 249u);
  EXPECT_EQ(s.recvCount, 83u);
  EXPECT_EQ(s.reportBytes(), 996u);
  EXPECT_EQ(s.recvInPlaceOffset, 83u);

  s = collShape(PerfCollective::kAllToAll, 1024, 2, 4);
  EXPECT_EQ(s.paramCount, 128u);
  EXPECT_EQ(s.sendCount, 512u);
  EXPECT_EQ(s.recvCount, 512u);
  EXPECT_EQ(s.reportBytes(), 1024u);

  s = collShape(PerfCollective::kAllGather, 8, 4, 4);  // too small to give every rank one
  EXPECT_EQ(s.paramCount, 0u);
  EXPECT_EQ(s.reportBytes(), 0u);

  s = collShape(PerfCollective::kSendRecv, 7, 8, 2);
  EXPECT_EQ(s.paramCount, 0u);
}

TEST(PerfData, BusBandwidthFactors) {
  EXPECT_DOUBLE_EQ(busBwFactor(PerfCollective::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(busBwFactor(PerfCollective::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(busBwFactor(PerfCollective::kReduceScatter, 5), 0.8);
  EXPECT_DOUBLE_EQ(busBwFactor(PerfCollective::kAllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(busBwFactor(PerfCollective::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(busBwFactor(PerfCollective::kReduce, 8), 1.0);
  EXPECT_DOUBLE_EQ(busBwFactor(PerfCollective::kSendRecv, 8), 1.0);
  EXPECT_DOUBLE_EQ(busBwFactor(PerfCollective::kAllReduce, 1), 0.0);

  const Bandwidth bw = bandwidth(PerfCollective::kAllReduce,
                                 collShape(PerfCollective::kAllReduce, 4000, 4, 4), 4, 2e-6);
  EXPECT_DOUBLE_EQ(bw.algBw, 2.0);  // 4000 B in 2 us = 2 GB/s
  EXPECT_DOUBLE_EQ(bw.busBw, 3.0);
  EXPECT_DOUBLE_EQ(bandwidth(PerfCollective::kAllReduce, {}, 4, 0).busBw, 0.0);
}

TEST(PerfData, HalfConversionsAgreeWithKernels) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float mine = halfBitsToFloat(static_cast<uint16_t>(h));
    const float theirs = kernels::halfToFloat(static_cast<unsigned short>(h));
    if (std::isnan(theirs)) {
      EXPECT_TRUE(std::isnan(mine)) << h;
      continue;
    }
    ASSERT_EQ(mine, theirs) << h;
    ASSERT_EQ(floatToHalfBits(mine), h) << h;  // every half round-trips
  }
  // Floats between halves: stride through all bit patterns.
  for (uint64_t u = 0; u < (1ull << 32); u += 4099) {
    float f;
    const uint32_t bits = static_cast<uint32_t>(u);
    std::memcpy(&f, &bits, sizeof(f));
    if (std::isnan(f)) continue;
    ASSERT_EQ(floatToHalfBits(f), kernels::floatToHalf(f)) << f;
    ASSERT_EQ(floatToBfloat16Bits(f), kernels::floatToBfloat16(f)) << f;
  }
  EXPECT_EQ(floatToHalfBits(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalfBits(-2.0f), 0xc000);
  EXPECT_EQ(floatToHalfBits(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalfBits(65520.0f), 0x7c00);  // rounds up to infinity
  EXPECT_EQ(floatToHalfBits(2049.0f), 0x6800);   // tie to even: 2048
  EXPECT_EQ(floatToHalfBits(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(floatToBfloat16Bits(1.0f), 0x3f80);
  EXPECT_EQ(floatToBfloat16Bits(257.0f), 0x4380);  // tie to even: 256
  EXPECT_EQ(floatToBfloat16Bits(259.0f), 0x4382);  // tie to even: 260
  EXPECT_EQ(bfloat16BitsToFloat(0x4040), 3.0f);
}

TEST(PerfData, InputsAreSmallExactIntegers) {
  for (braidDataType_t type : kAllTypes) {
    const bool isUnsigned = type == braidUint8 || type == braidUint32 || type == braidUint64;
    for (int n : {1, 4, 42, 127, 300}) {
      for (uint64_t i = 0; i < 200; ++i) {
        int64_t sum = 0;
        int twos = 0;
        for (int r = 0; r < n; ++r) {
          const int64_t v = inputValue(type, braidSum, n, r, i);
          EXPECT_LE(std::abs(v), 6);
          EXPECT_GE(v, isUnsigned ? 0 : -6);
          sum += v;
          const int64_t p = inputValue(type, braidProd, n, r, i);
          EXPECT_TRUE(p == 1 || p == 2) << p;
          twos += p == 2;
        }
        // Sums stay where int8 (signed) / uint8 (unsigned), float16 and bfloat16 are exact.
        if (n <= 127) {
          EXPECT_LE(std::abs(sum), isUnsigned ? 254 : 127) << n;
        }
        EXPECT_LE(twos, 15);
      }
    }
  }
  // Ranks see different values (a reduction that drops one is visible).
  int differing = 0;
  for (uint64_t i = 0; i < 100; ++i) {
    differing +=
        inputValue(braidFloat32, braidSum, 4, 0, i) != inputValue(braidFloat32, braidSum, 4, 1, i);
  }
  EXPECT_GT(differing, 50);
}

TEST(PerfData, ExpectedAllReduceMatchesLibraryKernels) {
  for (braidDataType_t type : kAllTypes) {
    for (braidRedOp_t op : kAllOps) {
      for (int n : {1, 2, 3, 5, 8}) {
        CheckSpec spec =
            makeSpec(PerfCollective::kAllReduce, type, op, n, 1000 * elementSize(type));
        for (bool reverse : {false, true}) {
          const Bytes out = simulateOutput(spec, 0, reverse);
          for (int r = 0; r < n; ++r) {
            spec.rank = r;
            const Mismatches m = checkOutput(spec, out.data());
            EXPECT_EQ(m.count, 0u) << typeName(type) << " " << opName(op) << " n=" << n << " first "
                                   << m.firstIndex << " want " << m.expected << " got " << m.actual;
          }
        }
      }
    }
  }
}

TEST(PerfData, ExactAtManyRanks) {
  for (braidDataType_t type : {braidInt8, braidUint8, braidFloat16, braidBfloat16}) {
    for (braidRedOp_t op : kAllOps) {
      for (int n : {43, 127}) {
        const CheckSpec spec =
            makeSpec(PerfCollective::kAllReduce, type, op, n, 300 * elementSize(type));
        const Bytes out = simulateOutput(spec, 0, n == 43);
        const Mismatches m = checkOutput(spec, out.data());
        EXPECT_EQ(m.count, 0u) << typeName(type) << " " << opName(op) << " n=" << n << " want "
                               << m.expected << " got " << m.actual;
      }
    }
  }
}

TEST(PerfData, EveryCollectiveChecksItsLayout) {
  const PerfCollective colls[] = {PerfCollective::kAllReduce,     PerfCollective::kBroadcast,
                                  PerfCollective::kReduce,        PerfCollective::kAllGather,
                                  PerfCollective::kReduceScatter, PerfCollective::kAllToAll,
                                  PerfCollective::kSendRecv};
  for (PerfCollective coll : colls) {
    for (braidDataType_t type : {braidInt32, braidFloat16, braidFloat64}) {
      const int n = 3;
      CheckSpec spec = makeSpec(coll, type, braidSum, n, 273 * 3 * elementSize(type) + 5, 1);
      ASSERT_GT(spec.shape.recvCount, 0u);
      for (int r = 0; r < n; ++r) {
        spec.rank = r;
        Bytes out = simulateOutput(spec, r);
        Mismatches m = checkOutput(spec, out.data());
        EXPECT_EQ(m.count, 0u) << perfCollectiveName(coll) << " rank " << r;
        if (coll == PerfCollective::kReduce && r != spec.root) continue;
        // A single corrupted element is found, at its index.
        const uint64_t at = spec.shape.recvCount / 2;
        out[at * spec.shape.typeSize] ^= 0x40;
        m = checkOutput(spec, out.data());
        EXPECT_EQ(m.count, 1u) << perfCollectiveName(coll) << " rank " << r;
        EXPECT_EQ(m.firstIndex, at);
        EXPECT_NE(m.expected, m.actual);
      }
    }
  }
}

TEST(PerfData, ReduceChecksOnlyTheRoot) {
  CheckSpec spec = makeSpec(PerfCollective::kReduce, braidFloat32, braidMax, 4, 4096, 2);
  Bytes garbage(spec.shape.recvBytes(), kPoisonByte);
  spec.rank = 1;
  EXPECT_EQ(checkOutput(spec, garbage.data()).count, 0u);
  spec.rank = 2;
  EXPECT_EQ(checkOutput(spec, garbage.data()).count, spec.shape.recvCount);
}

TEST(PerfData, PoisonIsNeverExpected) {
  // An output the collective left untouched must not pass by accident.
  for (braidDataType_t type : kAllTypes) {
    for (braidRedOp_t op : kAllOps) {
      const CheckSpec spec =
          makeSpec(PerfCollective::kAllReduce, type, op, 4, 256 * elementSize(type));
      Bytes poison(spec.shape.recvBytes(), kPoisonByte);
      EXPECT_EQ(checkOutput(spec, poison.data()).count, spec.shape.recvCount)
          << typeName(type) << " " << opName(op);
    }
  }
}

TEST(PerfData, InputIntactAndGuards) {
  CheckSpec spec = makeSpec(PerfCollective::kAllGather, braidUint8, braidSum, 2, 64);
  spec.rank = 1;
  Bytes send(spec.shape.sendBytes());
  fillInput(spec, send.data());
  EXPECT_EQ(checkInputIntact(spec, send.data()).count, 0u);
  send[3] = static_cast<unsigned char>(send[3] + 1);
  const Mismatches m = checkInputIntact(spec, send.data());
  EXPECT_EQ(m.count, 1u);
  EXPECT_EQ(m.firstIndex, 3u);

  Bytes guard(kGuardBytes, 0);
  writeGuard(guard.data());
  EXPECT_EQ(countGuardDamage(guard.data()), 0u);
  guard[0] = 0;
  guard[kGuardBytes - 1] = 1;
  EXPECT_EQ(countGuardDamage(guard.data()), 2u);
}

TEST(PerfData, IntegerAverageTruncatesTowardZero) {
  // Avg of int32 over 2 ranks whose values sum to an odd negative number.
  CheckSpec spec = makeSpec(PerfCollective::kAllReduce, braidInt32, braidAvg, 2, 4 * 400);
  bool sawNegativeOdd = false;
  for (uint64_t i = 0; i < spec.shape.recvCount; ++i) {
    const int64_t sum =
        inputValue(braidInt32, braidAvg, 2, 0, i) + inputValue(braidInt32, braidAvg, 2, 1, i);
    if (sum >= 0 || sum % 2 == 0) continue;
    sawNegativeOdd = true;
    int32_t got;
    unsigned char want[8];
    expectedOutput(spec, i, want);
    std::memcpy(&got, want, sizeof(got));
    EXPECT_EQ(got, static_cast<int32_t>(sum / 2));
  }
  EXPECT_TRUE(sawNegativeOdd);
}

TEST(PerfData, ElementText) {
  unsigned char e[8];
  storeInteger(braidInt8, -3, e);
  EXPECT_EQ(elementText(braidInt8, e), "-3");
  storeInteger(braidUint64, 7, e);
  EXPECT_EQ(elementText(braidUint64, e), "7");
  storeInteger(braidBfloat16, -2, e);
  EXPECT_EQ(elementText(braidBfloat16, e), "-2");
  storeInteger(braidFloat16, 5, e);
  EXPECT_EQ(elementText(braidFloat16, e), "5");
}

}  // namespace
}  // namespace braid::perf
