// CPU copy and reduce kernels for every datatype x reduction op.
//
// Integers wrap on overflow (computed in the unsigned type of the same width); float16 and bfloat16
// are widened to float32, combined, and rounded to nearest-even once per call; Max/Min follow IEEE
// fmax/fmin (a NaN operand loses to a number). Avg reduces like Sum; the final step of a collective
// calls a *Final variant that also divides by nranks (truncating for integers).
//
// The loops are compiled for several x86-64 instruction-set levels and the best one the CPU has is
// chosen once; pointers need no particular alignment.
#pragma once

#include <cstddef>

#include "braid.h"

namespace braid::kernels {

/// dst <- src, bytes bytes; dst == src does nothing. Regions must not otherwise overlap.
void copy(void* dst, const void* src, size_t bytes);
/// dst1 <- src and dst2 <- src. Either destination may equal src; they must not otherwise
/// overlap src or each other.
void copy2(void* dst1, void* dst2, const void* src, size_t bytes);

/// dst <- src with non-temporal stores whatever the size, for data nobody reads soon (the output
/// of a collective larger than the cache); ends with a store fence. dst == src does nothing.
void copyStreaming(void* dst, const void* src, size_t bytes);
/// Whether a collective whose buffers on all ranks sharing the cache come to `workingSetBytes`
/// should write its output around the cache: true once they cannot stay in it anyway, when the
/// stores' read-for-ownership only doubles the memory traffic of the output.
bool streamOutputs(size_t workingSetBytes);

/// The instruction-set levels the kernels are compiled for, narrowest first.
enum class CpuIsa { kBaseline, kAvx2, kAvx512 };

/// Whether this CPU (and OS) can run kernels of `isa`. kBaseline is always supported.
bool cpuIsaSupported(CpuIsa isa);
/// The widest supported level: what copy(), copy2() and Reducer use by default.
CpuIsa bestCpuIsa();
/// "baseline", "avx2" or "avx512".
const char* cpuIsaName(CpuIsa isa);

/// An elementwise reduction bound to a datatype, op and rank count (for Avg).
class Reducer {
 public:
  /// Float32 Sum over one rank.
  Reducer();
  /// `type` and `op` must be valid enum values (see valid()); nranks below 1 counts as 1.
  Reducer(braidDataType_t type, braidRedOp_t op, int nranks);
  /// As above with the kernels of one instruction-set level (for tests and benchmarks); a level
  /// the CPU lacks falls back to bestCpuIsa().
  Reducer(braidDataType_t type, braidRedOp_t op, int nranks, CpuIsa isa);

  braidDataType_t type() const { return type_; }
  braidRedOp_t op() const { return op_; }
  int nranks() const { return nranks_; }
  size_t elemSize() const { return elemSize_; }
  /// False if the type or op given was not a valid enum value; every call then does nothing.
  bool valid() const { return valid_; }

  /// dst[i] = a[i] op b[i]. dst may alias a or b exactly (same pointer), never partially.
  void reduce(void* dst, const void* a, const void* b, size_t count) const {
    reduce_(dst, a, b, count, nranks_);
  }
  /// dst[i] = post(a[i] op b[i]): for Avg the sum divided by nranks; otherwise as reduce().
  void reduceFinal(void* dst, const void* a, const void* b, size_t count) const {
    reduceFinal_(dst, a, b, count, nranks_);
  }
  /// dst[i] = post(src[i]); a copy for every op but Avg. dst may alias src exactly.
  void finalize(void* dst, const void* src, size_t count) const {
    finalize_(dst, src, count, nranks_);
  }

 private:
  using BinaryFn = void (*)(void* dst, const void* a, const void* b, size_t count, int nranks);
  using UnaryFn = void (*)(void* dst, const void* src, size_t count, int nranks);

  braidDataType_t type_ = braidFloat32;
  braidRedOp_t op_ = braidSum;
  int nranks_ = 1;
  size_t elemSize_ = 4;
  bool valid_ = false;
  BinaryFn reduce_ = nullptr;
  BinaryFn reduceFinal_ = nullptr;
  UnaryFn finalize_ = nullptr;
};

/// dst = operands[0] op operands[1] op ... op operands[n - 1], count elements, the last step
/// with the op's post-processing when `finalize` (reduceFinal). n >= 2; dst may alias
/// operands[0] exactly, no other operand.
void reduceAll(const Reducer& reducer, char* dst, const char* const* operands, int n, size_t count,
               bool finalize);
/// reduceAll's value, `bytes` of it, written to each of `outputs` (outputs[0] with
/// non-temporal stores when streamFirst) through a small buffer of the calling thread's: for
/// outputs that other cores read, FIFO slots whose lines sit in their readers' caches, which a
/// reduce kernel's vector stores would wait on line by line. Outputs may alias operands only at
/// the same offsets.
void reduceToAll(const Reducer& reducer, char* const* outputs, int noutputs, bool streamFirst,
                 const char* const* operands, int noperands, size_t bytes, bool finalize);

/// Scalar float16/bfloat16 conversions (round to nearest even), exposed for tests and checks.
float halfToFloat(unsigned short h);
unsigned short floatToHalf(float f);
float bfloat16ToFloat(unsigned short b);
unsigned short floatToBfloat16(float f);

}  // namespace braid::kernels
