// Host-side scaling for PreMulSum reductions: dst[i] = src[i] * scalar in the element type
// (float16 and bfloat16 multiply in float32 and round once to nearest even, as Braid's reductions
// do). Integers wrap as unsigned arithmetic does.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl.h"

namespace braid::ncclshim {

/// Multiplies count elements of datatype from src by *scalar (one element of datatype) into dst.
/// False for a datatype the shim does not know.
bool scaleElements(void* dst, const void* src, size_t count, ncclDataType_t datatype,
                   const void* scalar);

/// IEEE binary16 and bfloat16 conversions (round to nearest even; NaN stays NaN).
uint16_t floatToHalf(float value);
float halfToFloat(uint16_t bits);
uint16_t floatToBfloat16(float value);
float bfloat16ToFloat(uint16_t bits);

}  // namespace braid::ncclshim
