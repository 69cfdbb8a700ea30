#include "perf/perf_data.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "perf/perf_types.h"

namespace braid::perf {
namespace {

/// At most this many ranks contribute a 2 to a product, so 2^15 bounds it (float16 holds 65504).
constexpr int kMaxProdTwos = 15;
/// Bound on |sum| of inputs: int8 holds it, and float16/bfloat16 represent every integer up to it.
constexpr int kMaxAbsSum = 127;

uint64_t mix(int rank, uint64_t index) {
  uint64_t x =
      index * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(rank + 1) * 0xC2B2AE3D27D4EB4Full;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return x;
}

bool isUnsigned(braidDataType_t type) {
  return type == braidUint8 || type == braidUint32 || type == braidUint64;
}

braidRedOp_t effectiveOp(const CheckSpec& spec) {
  return collectiveReduces(spec.coll) ? spec.op : braidSum;
}

template <typename T>
void storeAs(T value, void* dst) {
  std::memcpy(dst, &value, sizeof(T));
}

template <typename T>
T loadAs(const void* src) {
  T value;
  std::memcpy(&value, src, sizeof(T));
  return value;
}

double floatElement(braidDataType_t type, const void* p) {
  switch (type) {
    case braidFloat16: return halfBitsToFloat(loadAs<uint16_t>(p));
    case braidBfloat16: return bfloat16BitsToFloat(loadAs<uint16_t>(p));
    case braidFloat32: return loadAs<float>(p);
    default: return loadAs<double>(p);
  }
}

/// Integer Avg as the library computes it: the sum wraps in the datatype, then divides once.
template <typename T>
void storeIntegerAverage(int64_t sum, int nranks, void* dst) {
  using U = std::make_unsigned_t<T>;
  const T wrapped = static_cast<T>(static_cast<U>(static_cast<uint64_t>(sum)));
  if constexpr (std::is_signed_v<T>) {
    storeAs<T>(static_cast<T>(static_cast<int64_t>(wrapped) / nranks), dst);
  } else {
    storeAs<T>(static_cast<T>(static_cast<uint64_t>(wrapped) / static_cast<uint64_t>(nranks)), dst);
  }
}

void storeAverage(braidDataType_t type, int64_t sum, int nranks, void* dst) {
  switch (type) {
    case braidInt8: storeIntegerAverage<int8_t>(sum, nranks, dst); return;
    case braidUint8: storeIntegerAverage<uint8_t>(sum, nranks, dst); return;
    case braidInt32: storeIntegerAverage<int32_t>(sum, nranks, dst); return;
    case braidUint32: storeIntegerAverage<uint32_t>(sum, nranks, dst); return;
    case braidInt64: storeIntegerAverage<int64_t>(sum, nranks, dst); return;
    case braidUint64: storeIntegerAverage<uint64_t>(sum, nranks, dst); return;
    case braidFloat16:
      storeAs<uint16_t>(floatToHalfBits(static_cast<float>(sum) / static_cast<float>(nranks)), dst);
      return;
    case braidBfloat16:
      storeAs<uint16_t>(floatToBfloat16Bits(static_cast<float>(sum) / static_cast<float>(nranks)),
                        dst);
      return;
    case braidFloat32:
      storeAs<float>(static_cast<float>(sum) / static_cast<float>(nranks), dst);
      return;
    case braidFloat64: storeAs<double>(static_cast<double>(sum) / nranks, dst); return;
  }
}

/// Element `index` of the reduction over all ranks' inputs, encoded.
void storeReduced(const CheckSpec& spec, uint64_t index, void* dst) {
  const braidRedOp_t op = spec.op;
  int64_t acc = inputValue(spec.type, op, spec.nranks, 0, index);
  for (int r = 1; r < spec.nranks; ++r) {
    const int64_t v = inputValue(spec.type, op, spec.nranks, r, index);
    switch (op) {
      case braidSum:
      case braidAvg: acc += v; break;
      case braidProd: acc *= v; break;
      case braidMax: acc = std::max(acc, v); break;
      case braidMin: acc = std::min(acc, v); break;
    }
  }
  if (op == braidAvg) {
    storeAverage(spec.type, acc, spec.nranks, dst);
  } else {
    storeInteger(spec.type, acc, dst);
  }
}

template <typename Expected>
Mismatches compare(const CheckSpec& spec, const void* buffer, uint64_t count, Expected expected) {
  Mismatches result;
  const size_t size = spec.shape.typeSize;
  const auto* bytes = static_cast<const unsigned char*>(buffer);
  unsigned char want[8];
  for (uint64_t i = 0; i < count; ++i) {
    expected(i, want);
    const unsigned char* got = bytes + i * size;
    if (sameElement(spec.type, want, got)) continue;
    if (result.count++ == 0) {
      result.firstIndex = i;
      result.expected = elementText(spec.type, want);
      result.actual = elementText(spec.type, got);
    }
  }
  return result;
}

}  // namespace

CollShape collShape(PerfCollective coll, uint64_t bytes, size_t typeSize, int nranks) {
  CollShape s;
  s.typeSize = typeSize;
  const uint64_t count = typeSize == 0 ? 0 : bytes / typeSize;
  const uint64_t n = static_cast<uint64_t>(std::max(nranks, 1));
  const uint64_t block = count / n;
  switch (coll) {
    case PerfCollective::kAllReduce:
    case PerfCollective::kBroadcast:
    case PerfCollective::kReduce:
    case PerfCollective::kSendRecv: s.paramCount = s.sendCount = s.recvCount = count; break;
    case PerfCollective::kAllGather:
      s.paramCount = s.sendCount = block;
      s.recvCount = block * n;
      s.sendInPlaceOffset = block;
      break;
    case PerfCollective::kReduceScatter:
      s.paramCount = s.recvCount = block;
      s.sendCount = block * n;
      s.recvInPlaceOffset = block;
      break;
    case PerfCollective::kAllToAll:
      s.paramCount = block;
      s.sendCount = s.recvCount = block * n;
      break;
  }
  return s;
}

double busBwFactor(PerfCollective coll, int nranks) {
  const double n = nranks;
  switch (coll) {
    case PerfCollective::kAllReduce: return 2.0 * (n - 1) / n;
    case PerfCollective::kAllGather:
    case PerfCollective::kReduceScatter:
    case PerfCollective::kAllToAll: return (n - 1) / n;
    case PerfCollective::kBroadcast:
    case PerfCollective::kReduce:
    case PerfCollective::kSendRecv: return 1.0;
  }
  return 1.0;
}

Bandwidth bandwidth(PerfCollective coll, const CollShape& shape, int nranks, double seconds) {
  Bandwidth bw;
  if (seconds <= 0) return bw;
  bw.algBw = static_cast<double>(shape.reportBytes()) / 1.0e9 / seconds;
  bw.busBw = bw.algBw * busBwFactor(coll, nranks);
  return bw;
}

int64_t inputValue(braidDataType_t type, braidRedOp_t op, int nranks, int rank, uint64_t index) {
  const uint64_t h = mix(rank, index);
  if (op == braidProd) return (rank < kMaxProdTwos && h % 3 == 0) ? 2 : 1;
  const int amplitude = std::clamp(kMaxAbsSum / std::max(nranks, 1), 1, 3);
  const int64_t v = static_cast<int64_t>(h % static_cast<uint64_t>(2 * amplitude + 1));
  return isUnsigned(type) ? v : v - amplitude;
}

void storeInteger(braidDataType_t type, int64_t value, void* dst) {
  switch (type) {
    case braidInt8:
    case braidUint8: storeAs<uint8_t>(static_cast<uint8_t>(value), dst); return;
    case braidInt32:
    case braidUint32: storeAs<uint32_t>(static_cast<uint32_t>(value), dst); return;
    case braidInt64:
    case braidUint64: storeAs<uint64_t>(static_cast<uint64_t>(value), dst); return;
    case braidFloat16: storeAs<uint16_t>(floatToHalfBits(static_cast<float>(value)), dst); return;
    case braidBfloat16:
      storeAs<uint16_t>(floatToBfloat16Bits(static_cast<float>(value)), dst);
      return;
    case braidFloat32: storeAs<float>(static_cast<float>(value), dst); return;
    case braidFloat64: storeAs<double>(static_cast<double>(value), dst); return;
  }
}

bool sameElement(braidDataType_t type, const void* a, const void* b) {
  if (isFloatType(type)) return floatElement(type, a) == floatElement(type, b);
  return std::memcmp(a, b, elementSize(type)) == 0;
}

std::string elementText(braidDataType_t type, const void* p) {
  char text[48];
  switch (type) {
    case braidInt8: std::snprintf(text, sizeof(text), "%d", loadAs<int8_t>(p)); break;
    case braidUint8: std::snprintf(text, sizeof(text), "%u", loadAs<uint8_t>(p)); break;
    case braidInt32: std::snprintf(text, sizeof(text), "%d", loadAs<int32_t>(p)); break;
    case braidUint32: std::snprintf(text, sizeof(text), "%u", loadAs<uint32_t>(p)); break;
    case braidInt64:
      std::snprintf(text, sizeof(text), "%lld", static_cast<long long>(loadAs<int64_t>(p)));
      break;
    case braidUint64:
      std::snprintf(text, sizeof(text), "%llu",
                    static_cast<unsigned long long>(loadAs<uint64_t>(p)));
      break;
    case braidFloat64: std::snprintf(text, sizeof(text), "%.17g", loadAs<double>(p)); break;
    default: std::snprintf(text, sizeof(text), "%.9g", floatElement(type, p)); break;
  }
  return text;
}

void expectedOutput(const CheckSpec& spec, uint64_t index, void* dst) {
  const uint64_t block = spec.shape.paramCount;
  const int n = spec.nranks;
  switch (spec.coll) {
    case PerfCollective::kAllReduce:
    case PerfCollective::kReduce: storeReduced(spec, index, dst); return;
    case PerfCollective::kReduceScatter:
      storeReduced(spec, static_cast<uint64_t>(spec.rank) * block + index, dst);
      return;
    case PerfCollective::kBroadcast:
      storeInteger(spec.type, inputValue(spec.type, braidSum, n, spec.root, index), dst);
      return;
    case PerfCollective::kAllGather: {
      const int from = static_cast<int>(index / block);
      storeInteger(spec.type, inputValue(spec.type, braidSum, n, from, index % block), dst);
      return;
    }
    case PerfCollective::kAllToAll: {
      const int from = static_cast<int>(index / block);
      const uint64_t at = static_cast<uint64_t>(spec.rank) * block + index % block;
      storeInteger(spec.type, inputValue(spec.type, braidSum, n, from, at), dst);
      return;
    }
    case PerfCollective::kSendRecv: {
      const int from = (spec.rank + n - 1) % n;
      storeInteger(spec.type, inputValue(spec.type, braidSum, n, from, index), dst);
      return;
    }
  }
}

void fillInput(const CheckSpec& spec, void* send) {
  const braidRedOp_t op = effectiveOp(spec);
  auto* bytes = static_cast<unsigned char*>(send);
  for (uint64_t i = 0; i < spec.shape.sendCount; ++i) {
    storeInteger(spec.type, inputValue(spec.type, op, spec.nranks, spec.rank, i),
                 bytes + i * spec.shape.typeSize);
  }
}

Mismatches checkOutput(const CheckSpec& spec, const void* recv) {
  if (spec.coll == PerfCollective::kReduce && spec.rank != spec.root) return {};
  return compare(spec, recv, spec.shape.recvCount,
                 [&](uint64_t i, void* want) { expectedOutput(spec, i, want); });
}

Mismatches checkInputIntact(const CheckSpec& spec, const void* send) {
  const braidRedOp_t op = effectiveOp(spec);
  return compare(spec, send, spec.shape.sendCount, [&](uint64_t i, void* want) {
    storeInteger(spec.type, inputValue(spec.type, op, spec.nranks, spec.rank, i), want);
  });
}

void writeGuard(void* guard) { std::memset(guard, kGuardByte, kGuardBytes); }

uint64_t countGuardDamage(const void* guard) {
  const auto* bytes = static_cast<const unsigned char*>(guard);
  return static_cast<uint64_t>(
      std::count_if(bytes, bytes + kGuardBytes, [](unsigned char b) { return b != kGuardByte; }));
}

uint16_t floatToHalfBits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN stays a (quiet) NaN
  if (abs >= 0x47800000u) return sign | 0x7c00u;  // 65536 and above: infinity
  if (abs < 0x38800000u) {
    // Below the smallest normal half: the result is a multiple of 2^-24, rounded to nearest even.
    float a;
    std::memcpy(&a, &abs, sizeof(a));
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));
  }
  const uint32_t exponent = (abs >> 23) - 127 + 15;
  const uint32_t mantissa = abs & 0x7fffffu;
  uint32_t h = (exponent << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  // A carry out of the mantissa bumps the exponent, up to infinity, as it should.
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return sign | static_cast<uint16_t>(h);
}

float halfBitsToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  uint32_t bits = exponent == 31 ? (sign | 0x7f800000u | (mantissa << 13))
                                 : (sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

uint16_t floatToBfloat16Bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float bfloat16BitsToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

}  // namespace braid::perf
