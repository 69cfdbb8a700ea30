#include "base/dtype.h"

#include <array>
#include <string>

namespace braid {
namespace {

struct TypeInfo {
  braidDataType_t type;
  size_t size;
  std::string_view name;
  std::array<std::string_view, 3> aliases;
};

constexpr std::array<TypeInfo, kNumDataTypes> kTypes = {{
    {braidInt8, 1, "int8", {"char", "i8", ""}},
    {braidUint8, 1, "uint8", {"u8", "", ""}},
    {braidInt32, 4, "int32", {"int", "i32", ""}},
    {braidUint32, 4, "uint32", {"u32", "", ""}},
    {braidInt64, 8, "int64", {"i64", "", ""}},
    {braidUint64, 8, "uint64", {"u64", "", ""}},
    {braidFloat16, 2, "half", {"float16", "fp16", "f16"}},
    {braidFloat32, 4, "float", {"float32", "fp32", "f32"}},
    {braidFloat64, 8, "double", {"float64", "fp64", "f64"}},
    {braidBfloat16, 2, "bfloat16", {"bf16", "", ""}},
}};

constexpr std::array<std::string_view, kNumRedOps> kOpNames = {"sum", "prod", "max", "min", "avg"};

}  // namespace

bool isValidDataType(braidDataType_t type) {
  return static_cast<int>(type) >= 0 && static_cast<int>(type) < kNumDataTypes;
}

bool isValidRedOp(braidRedOp_t op) {
  return static_cast<int>(op) >= 0 && static_cast<int>(op) < kNumRedOps;
}

bool isFloatingType(braidDataType_t type) {
  return type == braidFloat16 || type == braidFloat32 || type == braidFloat64 ||
         type == braidBfloat16;
}

size_t dataTypeSize(braidDataType_t type) { return isValidDataType(type) ? kTypes[type].size : 0; }

std::string_view dataTypeName(braidDataType_t type) {
  return isValidDataType(type) ? kTypes[type].name : std::string_view("invalid");
}

std::string_view redOpName(braidRedOp_t op) {
  return isValidRedOp(op) ? kOpNames[op] : std::string_view("invalid");
}

std::optional<braidDataType_t> parseDataType(std::string_view name) {
  for (const TypeInfo& info : kTypes) {
    if (name == info.name) return info.type;
    for (std::string_view alias : info.aliases) {
      if (!alias.empty() && name == alias) return info.type;
    }
  }
  return std::nullopt;
}

std::optional<braidRedOp_t> parseRedOp(std::string_view name) {
  for (int i = 0; i < kNumRedOps; ++i) {
    if (name == kOpNames[i]) return static_cast<braidRedOp_t>(i);
  }
  return std::nullopt;
}

}  // namespace braid
