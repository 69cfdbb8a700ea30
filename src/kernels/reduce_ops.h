// The element rules of the reductions, written once for the CPU kernels (g++, cpu/) and the CUDA
// kernels (nvcc, cuda/), so that both give the same bits, NaN payloads aside:
// - integers wrap: sums in the unsigned type of the same width, products in at least unsigned
//   int, so that narrow types never overflow a signed int;
// - Max and Min are IEEE fmax and fmin: a NaN operand loses to a number, and of two NaNs the
//   first stays; of two equal operands the second wins, so max(+0, -0) is -0 and max(-0, +0) +0;
// - float16 and bfloat16 are combined in float: each kernel widens them, combines them with these
//   operators and rounds back to nearest even once per combination;
// - Avg combines like Sum; its final combination divides by the rank count (avgDivide).
//
// T is an integer, a float, or (in the CPU's float16 loops) a GCC vector of floats: the float
// branches use only operators that GCC vector types also have. The CPU kernels include this header
// under each instruction-set level's target pragma (reduce_kernels_impl.h), so the operators are
// compiled for the vectors of that level; they are always inlined, so no out-of-line copy built
// for a wide level can reach the linker and be called on a narrower CPU.
#pragma once

#include <type_traits>

#include "kernels/host_device.h"

namespace braid::kernels {

/// a + b.
struct SumOp {
  template <class T>
  BRAID_HOST_DEVICE BRAID_FORCE_INLINE static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;  // wraps instead of overflowing
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    } else {
      return a + b;
    }
  }
};

/// a * b.
struct ProdOp {
  template <class T>
  BRAID_HOST_DEVICE BRAID_FORCE_INLINE static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      // At least unsigned int, so that narrow types do not promote to (overflowing) signed int.
      using W = decltype(std::make_unsigned_t<T>() * 1u);
      return static_cast<T>(static_cast<W>(a) * static_cast<W>(b));
    } else {
      return a * b;
    }
  }
};

/// max(a, b) as IEEE fmax. The first select is what x86's MAXPS computes (b when unordered); the
/// second puts a back where b is the NaN.
struct MaxOp {
  template <class T>
  BRAID_HOST_DEVICE BRAID_FORCE_INLINE static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return a < b ? b : a;
    } else {
      T m = a > b ? a : b;
      return b != b ? a : m;
    }
  }
};

/// min(a, b) as IEEE fmin, with the selects of MaxOp.
struct MinOp {
  template <class T>
  BRAID_HOST_DEVICE BRAID_FORCE_INLINE static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return b < a ? b : a;
    } else {
      T m = a < b ? a : b;
      return b != b ? a : m;
    }
  }
};

// Avg's division of its final combination by the rank count, in the compute type T (float for
// float16 and bfloat16). Floats round x / nranks in T. Integers truncate, as C computes x / nranks
// (narrow types promote to int, unsigned types divide unsigned). On the CPU, up to 32 bits the
// quotient goes through double, which vectorises where integer division does not and is exact: a
// non-integral x/n lies at least 1/n from an integer, far more than half a double ulp of a quotient
// below 2^32, so truncating the rounded quotient gives the true one. The GPU divides in the integer
// type, as fp64 is slow on most GPUs.

/// Whether avgDivide<T> goes through double where it is compiled (host code, not device code).
template <class T>
inline constexpr bool kAvgDividesInDouble =
#ifdef __CUDA_ARCH__
    false;
#else
    std::is_integral_v<T> && sizeof(T) <= 4;
#endif

/// The rank count as avgDivide<T> takes it: converted to the type it divides in where that is not
/// the integer division of C, so a loop converts it once rather than per element.
template <class T>
using AvgDivisor = std::conditional_t<std::is_integral_v<T>,
                                      std::conditional_t<kAvgDividesInDouble<T>, double, int>, T>;

/// x / nranks; V is T or, in the CPU's float16 loops, a GCC vector of T.
template <class T, class V = T>
BRAID_HOST_DEVICE BRAID_FORCE_INLINE V avgDivide(V x, AvgDivisor<T> nranks) {
  if constexpr (kAvgDividesInDouble<T>) {
    return static_cast<T>(static_cast<double>(x) / nranks);
  } else if constexpr (std::is_integral_v<T>) {
    using P = decltype(x + 0);  // the type C divides x / nranks in
    return static_cast<T>(static_cast<P>(x) / static_cast<P>(nranks));
  } else {
    return x / nranks;
  }
}

}  // namespace braid::kernels
