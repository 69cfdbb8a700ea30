// CPU copy and reduce kernels for every datatype x reduction op.
//
// Integers wrap on overflow (computed in the unsigned type of the same width); float16 and bfloat16
// are widened to float32, combined, and rounded to nearest-even once per call; Max/Min follow IEEE
// fmax/fmin (a NaN operand loses to a number). Avg reduces like Sum; the final step of a collective
// calls a *Final variant that also divides by nranks (truncating for integers).
#pragma once

#include <cstddef>

#include "braid.h"

namespace braid::kernels {

/// dst <- src, bytes bytes; dst == src does nothing. Regions must not otherwise overlap.
void copy(void* dst, const void* src, size_t bytes);
/// dst1 <- src and dst2 <- src in one pass over src.
void copy2(void* dst1, void* dst2, const void* src, size_t bytes);

/// An elementwise reduction bound to a datatype, op and rank count (for Avg).
class Reducer {
 public:
  Reducer() = default;
  Reducer(braidDataType_t type, braidRedOp_t op, int nranks);

  braidDataType_t type() const { return type_; }
  braidRedOp_t op() const { return op_; }
  size_t elemSize() const { return elemSize_; }

  /// dst[i] = a[i] op b[i]. dst may alias a or b exactly (same pointer), never partially.
  void reduce(void* dst, const void* a, const void* b, size_t count) const;
  /// dst[i] = post(a[i] op b[i]): for Avg the sum divided by nranks; otherwise as reduce().
  void reduceFinal(void* dst, const void* a, const void* b, size_t count) const;
  /// dst[i] = post(src[i]); a copy for every op but Avg. dst may alias src exactly.
  void finalize(void* dst, const void* src, size_t count) const;

 private:
  using BinaryFn = void (*)(void* dst, const void* a, const void* b, size_t count, int nranks);
  using UnaryFn = void (*)(void* dst, const void* src, size_t count, int nranks);

  braidDataType_t type_ = braidFloat32;
  braidRedOp_t op_ = braidSum;
  int nranks_ = 1;
  size_t elemSize_ = 4;
  BinaryFn reduce_ = nullptr;
  BinaryFn reduceFinal_ = nullptr;
  UnaryFn finalize_ = nullptr;
};

/// Scalar float16/bfloat16 conversions (round to nearest even), exposed for tests and checks.
float halfToFloat(unsigned short h);
unsigned short floatToHalf(float f);
float bfloat16ToFloat(unsigned short b);
unsigned short floatToBfloat16(float f);

}  // namespace braid::kernels
