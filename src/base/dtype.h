// Datatypes and reduction ops of the public enums: sizes, names, validation.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "braid.h"

namespace braid {

constexpr int kNumDataTypes = 10;
constexpr int kNumRedOps = 5;

/// Bytes per element, 0 for a value outside the enum.
size_t dataTypeSize(braidDataType_t type);
bool isValidDataType(braidDataType_t type);
bool isValidRedOp(braidRedOp_t op);
bool isFloatingType(braidDataType_t type);

/// nccl-tests spellings: "int8", "uint8", "int32", ..., "half", "float", "double", "bfloat16".
std::string_view dataTypeName(braidDataType_t type);
std::string_view redOpName(braidRedOp_t op);
/// Accepts the names above plus common aliases ("float32", "fp16", "bf16", "f32", ...).
std::optional<braidDataType_t> parseDataType(std::string_view name);
std::optional<braidRedOp_t> parseRedOp(std::string_view name);

}  // namespace braid
