// Types and operators of the CUDA kernels. The element operators are the CPU kernels' own
// (kernels/reduce_ops.h), so both give the same bits except for the payload of NaNs; here each
// datatype gets its storage and compute types, float16 and bfloat16 widened to float32 and rounded
// back to nearest even once per combination (the CPU kernels round once per reduce call, which is
// the same thing).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "braid.h"
#include "kernels/reduce_ops.h"

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
  __device__ static Compute load(Storage s) { return __bfloat162float(__ushort_as_bfloat16(s)); }
  __device__ static Storage store(Compute c) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(c));
  }
};

// The element operators, shared with the CPU kernels.
using kernels::avgDivide;
using kernels::MaxOp;
using kernels::MinOp;
using kernels::ProdOp;
using kernels::SumOp;

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
