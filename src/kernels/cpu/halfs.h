// Scalar float16 / bfloat16 <-> float32 conversions by integer bit manipulation, rounding to
// nearest even. Every choice is a mask-and-select rather than a branch, so that loops calling these
// auto-vectorise even on baseline x86-64 (SSE2), where there is no F16C instruction to do it.
#pragma once

#include <bit>
#include <cstdint>

namespace braid::kernels::halfs {

inline uint32_t floatBits(float f) { return std::bit_cast<uint32_t>(f); }
inline float bitsFloat(uint32_t u) { return std::bit_cast<float>(u); }

/// All ones where cond holds, zero elsewhere.
inline uint32_t maskIf(bool cond) { return 0u - static_cast<uint32_t>(cond); }
inline uint32_t select(uint32_t mask, uint32_t ifSet, uint32_t ifClear) {
  return (ifSet & mask) | (ifClear & ~mask);
}

/// IEEE binary16 -> binary32; exact (every half is a float).
inline float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t magnitude = h & 0x7FFFu;
  // Normal: shift exponent and mantissa into place and rebias the exponent from 15 to 127.
  const uint32_t normal = (magnitude << 13) + ((127u - 15u) << 23);
  // Inf/NaN: maximal exponent, the mantissa (NaN payload) kept.
  const uint32_t special = (magnitude << 13) | 0x7F800000u;
  // Subnormal or zero, value m * 2^-24: the float 2^-1 * (1 + m * 2^-23) is 0.5 + m * 2^-24, and
  // subtracting 0.5 from it is exact.
  const uint32_t subnormal = floatBits(bitsFloat((126u << 23) | magnitude) - 0.5f);
  uint32_t r = select(maskIf(magnitude >= 0x0400u), normal, subnormal);
  r = select(maskIf(magnitude >= 0x7C00u), special, r);
  return bitsFloat(r | sign);
}

/// binary32 -> binary16, round to nearest even; overflow gives infinity, a NaN stays a quiet NaN
/// that keeps the top of its payload (what the F16C instruction does too).
inline uint16_t floatToHalf(float f) {
  const uint32_t u = floatBits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7FFFFFFFu;
  // Half-normal range [2^-14, 65520): rebias, then round away the 13 extra mantissa bits to
  // nearest even. A carry out of the mantissa correctly bumps the exponent.
  const uint32_t rebased = a - ((127u - 15u) << 23);
  const uint32_t normal = (rebased + 0x0FFFu + ((rebased >> 13) & 1u)) >> 13;
  // Below 2^-14: in x + 0.5 the float's unit in the last place is 2^-24, the half subnormal step,
  // so the FPU's own round-to-nearest-even produces the subnormal mantissa (0x400 if it rounds up
  // to the smallest normal, which is also the right encoding).
  const uint32_t subnormal = floatBits(bitsFloat(a) + 0.5f) - 0x3F000000u;
  const uint32_t nan = 0x7E00u | ((a >> 13) & 0x03FFu);
  // 65520 is the midpoint between 65504 (the largest half) and 65536, which rounds to even: inf.
  uint32_t r = select(maskIf(a < 0x38800000u), subnormal, normal);
  r = select(maskIf(a >= 0x477FF000u), 0x7C00u, r);
  r = select(maskIf(a > 0x7F800000u), nan, r);
  return static_cast<uint16_t>(r | sign);
}

/// bfloat16 is the top half of a float32: widening is a shift.
inline float bfloat16ToFloat(uint16_t b) { return bitsFloat(static_cast<uint32_t>(b) << 16); }

/// binary32 -> bfloat16, round to nearest even; a NaN stays a NaN (made quiet).
inline uint16_t floatToBfloat16(float f) {
  const uint32_t u = floatBits(f);
  // Adding 0x7FFF plus the lowest kept bit rounds the dropped 16 bits to nearest even; a carry into
  // the exponent is right, including the rounding of the largest finite values up to infinity.
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quietNan = (u >> 16) | 0x0040u;
  return static_cast<uint16_t>(select(maskIf((u & 0x7FFFFFFFu) > 0x7F800000u), quietNan, rounded));
}

}  // namespace braid::kernels::halfs
