#include "perf/perf_types.h"

#include <gtest/gtest.h>

#include <string>

#include "base/dtype.h"

namespace braid::perf {
namespace {

// perf names and sizes braid.h's enums itself; they must read as the library's.
TEST(PerfTypes, NamesAndSizesAreTheLibrarys) {
  ASSERT_EQ(allDataTypes().size(), static_cast<size_t>(kNumDataTypes));
  for (int t = 0; t < kNumDataTypes; ++t) {
    const auto type = static_cast<braidDataType_t>(t);
    EXPECT_EQ(allDataTypes()[t], type);
    EXPECT_EQ(typeName(type), dataTypeName(type));
    EXPECT_EQ(elementSize(type), dataTypeSize(type)) << typeName(type);
    EXPECT_EQ(isFloatType(type), isFloatingType(type)) << typeName(type);
  }
  ASSERT_EQ(allRedOps().size(), static_cast<size_t>(kNumRedOps));
  for (int o = 0; o < kNumRedOps; ++o) {
    const auto op = static_cast<braidRedOp_t>(o);
    EXPECT_EQ(allRedOps()[o], op);
    EXPECT_EQ(opName(op), redOpName(op));
  }
  EXPECT_EQ(typeName(static_cast<braidDataType_t>(kNumDataTypes)), "invalid");
  EXPECT_EQ(elementSize(static_cast<braidDataType_t>(-1)), 0u);
  EXPECT_EQ(opName(static_cast<braidRedOp_t>(kNumRedOps)), "invalid");
}

TEST(PerfTypes, SpellingsAreTheLibrarys) {
  for (const char* name :
       {"int8",   "char", "i8",       "uint8",   "u8",       "int32", "int",    "i32",
        "uint32", "u32",  "int64",    "i64",     "uint64",   "u64",   "half",   "float16",
        "fp16",   "f16",  "float",    "float32", "fp32",     "f32",   "double", "float64",
        "fp64",   "f64",  "bfloat16", "bf16",    "float128", "",      "Float",  "bf"}) {
    EXPECT_EQ(parseTypeName(name), parseDataType(name)) << name;
  }
  for (const char* name : {"sum", "prod", "max", "min", "avg", "mean", "", "Sum"}) {
    EXPECT_EQ(parseOpName(name), parseRedOp(name)) << name;
  }
}

}  // namespace
}  // namespace braid::perf
