// The datatypes and reduction ops of braid.h as perf names and sizes them: nccl-tests' spellings
// (which -d, -o, the table and --json use) and the aliases -d also accepts. perf keeps this itself,
// as nccl-tests does for NCCL's enums, so that its code shared with the peer programs needs no
// internal header.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "braid.h"

namespace braid::perf {

/// Every datatype of braid.h, in enum order: what -d all sweeps.
const std::vector<braidDataType_t>& allDataTypes();
/// Every reduction op of braid.h, in enum order: what -o all sweeps.
const std::vector<braidRedOp_t>& allRedOps();

/// Bytes per element; 0 for a value outside the enum.
size_t elementSize(braidDataType_t type);
/// half, float, double and bfloat16.
bool isFloatType(braidDataType_t type);

/// "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16";
/// "invalid" outside the enum.
std::string_view typeName(braidDataType_t type);
/// "sum", "prod", "max", "min", "avg"; "invalid" outside the enum.
std::string_view opName(braidRedOp_t op);

/// A name typeName() spells, or an alias: "char", "i8", "u8", "int", "i32", "u32", "i64", "u64",
/// "float16", "fp16", "f16", "float32", "fp32", "f32", "float64", "fp64", "f64", "bf16".
std::optional<braidDataType_t> parseTypeName(std::string_view name);
/// A name opName() spells.
std::optional<braidRedOp_t> parseOpName(std::string_view name);

}  // namespace braid::perf
