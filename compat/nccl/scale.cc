#include "scale.h"

#include <cstring>
#include <type_traits>

namespace braid::ncclshim {
namespace {

uint32_t floatBits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  return x;
}

float bitsFloat(uint32_t x) {
  float f;
  std::memcpy(&f, &x, sizeof(f));
  return f;
}

/// Rounds mantissa >> shift to nearest, ties to even.
uint32_t shiftRoundEven(uint32_t mantissa, uint32_t shift) {
  const uint32_t kept = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1);
  const uint32_t halfway = 1u << (shift - 1);
  return kept + ((rest > halfway || (rest == halfway && (kept & 1u))) ? 1u : 0u);
}

template <typename T>
void scaleTyped(void* dst, const void* src, size_t count, const void* scalar) {
  T s;
  std::memcpy(&s, scalar, sizeof(T));
  const auto* in = static_cast<const unsigned char*>(src);
  auto* out = static_cast<unsigned char*>(dst);
  for (size_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, in + i * sizeof(T), sizeof(T));
    T r;
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      r = static_cast<T>(static_cast<U>(static_cast<U>(v) * static_cast<U>(s)));
    } else {
      r = v * s;
    }
    std::memcpy(out + i * sizeof(T), &r, sizeof(T));
  }
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void scale16(void* dst, const void* src, size_t count, const void* scalar) {
  uint16_t sBits;
  std::memcpy(&sBits, scalar, sizeof(sBits));
  const float s = ToFloat(sBits);
  const auto* in = static_cast<const unsigned char*>(src);
  auto* out = static_cast<unsigned char*>(dst);
  for (size_t i = 0; i < count; ++i) {
    uint16_t v;
    std::memcpy(&v, in + i * 2, 2);
    const uint16_t r = FromFloat(ToFloat(v) * s);
    std::memcpy(out + i * 2, &r, 2);
  }
}

}  // namespace

uint16_t floatToHalf(float value) {
  const uint32_t x = floatBits(value);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t mag = x & 0x7fffffffu;
  if (mag >= 0x7f800000u) {  // infinity or NaN (NaN keeps a quiet-bit payload)
    return static_cast<uint16_t>(sign | 0x7c00u | (mag > 0x7f800000u ? 0x200u : 0u));
  }
  if (mag >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504
  const uint32_t exponent = mag >> 23;
  if (mag < 0x38800000u) {               // below 2^-14: a binary16 subnormal, or zero
    if (mag < 0x33000000u) return sign;  // at most 2^-25: rounds to zero
    const uint32_t mantissa = (mag & 0x7fffffu) | 0x800000u;
    return static_cast<uint16_t>(sign | shiftRoundEven(mantissa, 126 - exponent));
  }
  // A carry out of the mantissa correctly bumps the exponent.
  const uint32_t bits = ((exponent - 112) << 23) | (mag & 0x7fffffu);
  return static_cast<uint16_t>(sign | shiftRoundEven(bits, 13));
}

float halfToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;  // 2^-24
    return bitsFloat(floatBits(magnitude) | sign);
  }
  if (exponent == 31) return bitsFloat(sign | 0x7f800000u | (mantissa << 13));
  return bitsFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t floatToBfloat16(float value) {
  const uint32_t x = floatBits(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

float bfloat16ToFloat(uint16_t bits) { return bitsFloat(static_cast<uint32_t>(bits) << 16); }

bool scaleElements(void* dst, const void* src, size_t count, ncclDataType_t datatype,
                   const void* scalar) {
  switch (datatype) {
    case ncclInt8: scaleTyped<int8_t>(dst, src, count, scalar); return true;
    case ncclUint8: scaleTyped<uint8_t>(dst, src, count, scalar); return true;
    case ncclInt32: scaleTyped<int32_t>(dst, src, count, scalar); return true;
    case ncclUint32: scaleTyped<uint32_t>(dst, src, count, scalar); return true;
    case ncclInt64: scaleTyped<int64_t>(dst, src, count, scalar); return true;
    case ncclUint64: scaleTyped<uint64_t>(dst, src, count, scalar); return true;
    case ncclFloat16: scale16<halfToFloat, floatToHalf>(dst, src, count, scalar); return true;
    case ncclFloat32: scaleTyped<float>(dst, src, count, scalar); return true;
    case ncclFloat64: scaleTyped<double>(dst, src, count, scalar); return true;
    case ncclBfloat16:
      scale16<bfloat16ToFloat, floatToBfloat16>(dst, src, count, scalar);
      return true;
    default: return false;
  }
}

}  // namespace braid::ncclshim
