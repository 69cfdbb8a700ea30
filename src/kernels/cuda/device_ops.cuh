// Element semantics of the CUDA kernels; they match the CPU kernels (src/kernels/cpu/reduce.h)
// bit for bit except for the payload of NaNs:
// - integers wrap (computed in the unsigned type of the same width, products in at least
//   unsigned int so that narrow types never overflow a signed int);
// - float16 and bfloat16 are widened to float32, combined and rounded to nearest even once per
//   combination (the CPU kernels round once per reduce call, which is the same thing);
// - Max/Min are IEEE fmax/fmin: a NaN operand loses to a number;
// - Avg combines like Sum; the final combination divides by nranks (truncating for integers, in
//   float32 for the 16-bit types).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "braid.h"

namespace braid::gpu {

/// Storage and compute types of one datatype; load/store convert between them.
template <class S>
struct NativeType {
  using Storage = S;
  using Compute = S;
  __device__ static Compute load(Storage s) { return s; }
  __device__ static Storage store(Compute c) { return c; }
};

struct HalfType {
  using Storage = uint16_t;
  using Compute = float;
  __device__ static Compute load(Storage s) { return __half2float(__ushort_as_half(s)); }
  __device__ static Storage store(Compute c) { return __half_as_ushort(__float2half_rn(c)); }
};

struct Bfloat16Type {
  using Storage = uint16_t;
  using Compute = float;
  __device__ static Compute load(Storage s) {
    return __bfloat162float(__ushort_as_bfloat16(s));
  }
  __device__ static Storage store(Compute c) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(c));
  }
};

struct SumOp {
  template <class T>
  __device__ static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    } else {
      return a + b;
    }
  }
};

struct ProdOp {
  template <class T>
  __device__ static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using W = decltype(std::make_unsigned_t<T>() * 1u);
      return static_cast<T>(static_cast<W>(a) * static_cast<W>(b));
    } else {
      return a * b;
    }
  }
};

// The same selects as the CPU kernels, so NaN and signed-zero cases agree.
struct MaxOp {
  template <class T>
  __device__ static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return a < b ? b : a;
    } else {
      T m = a > b ? a : b;
      return b != b ? a : m;
    }
  }
};

struct MinOp {
  template <class T>
  __device__ static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return b < a ? b : a;
    } else {
      T m = a < b ? a : b;
      return b != b ? a : m;
    }
  }
};

/// Avg's division, applied to the final combination only.
template <class T>
__device__ inline T divideBy(T x, int n) {
  if constexpr (std::is_integral_v<T>) {
    // As C computes x / n with n an int: narrow types promote to int, the rest keep their type.
    using P = decltype(x + 0);
    return static_cast<T>(static_cast<P>(x) / static_cast<P>(n));
  } else {
    return x / static_cast<T>(n);
  }
}

/// Calls f.template operator()<Type>() with the type traits of `type`; false for unknown types.
template <class F>
__device__ inline bool withType(uint8_t type, F&& f) {
  switch (static_cast<braidDataType_t>(type)) {
    case braidInt8: f.template operator()<NativeType<int8_t>>(); return true;
    case braidUint8: f.template operator()<NativeType<uint8_t>>(); return true;
    case braidInt32: f.template operator()<NativeType<int32_t>>(); return true;
    case braidUint32: f.template operator()<NativeType<uint32_t>>(); return true;
    case braidInt64: f.template operator()<NativeType<int64_t>>(); return true;
    case braidUint64: f.template operator()<NativeType<uint64_t>>(); return true;
    case braidFloat16: f.template operator()<HalfType>(); return true;
    case braidFloat32: f.template operator()<NativeType<float>>(); return true;
    case braidFloat64: f.template operator()<NativeType<double>>(); return true;
    case braidBfloat16: f.template operator()<Bfloat16Type>(); return true;
  }
  return false;
}

/// Calls f.template operator()<Op>() for `op` (Avg combines with SumOp); false for unknown ops.
template <class F>
__device__ inline bool withOp(uint8_t op, F&& f) {
  switch (static_cast<braidRedOp_t>(op)) {
    case braidSum:
    case braidAvg: f.template operator()<SumOp>(); return true;
    case braidProd: f.template operator()<ProdOp>(); return true;
    case braidMax: f.template operator()<MaxOp>(); return true;
    case braidMin: f.template operator()<MinOp>(); return true;
  }
  return false;
}

}  // namespace braid::gpu
