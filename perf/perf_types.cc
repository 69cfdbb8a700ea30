#include "perf/perf_types.h"

namespace braid::perf {

const std::vector<braidDataType_t>& allDataTypes() {
  static const std::vector<braidDataType_t> kTypes = {
      braidInt8,   braidUint8,   braidInt32,   braidUint32,  braidInt64,
      braidUint64, braidFloat16, braidFloat32, braidFloat64, braidBfloat16};
  return kTypes;
}

const std::vector<braidRedOp_t>& allRedOps() {
  static const std::vector<braidRedOp_t> kOps = {braidSum, braidProd, braidMax, braidMin, braidAvg};
  return kOps;
}

size_t elementSize(braidDataType_t type) {
  switch (type) {
    case braidInt8:
    case braidUint8: return 1;
    case braidFloat16:
    case braidBfloat16: return 2;
    case braidInt32:
    case braidUint32:
    case braidFloat32: return 4;
    case braidInt64:
    case braidUint64:
    case braidFloat64: return 8;
  }
  return 0;
}

bool isFloatType(braidDataType_t type) {
  return type == braidFloat16 || type == braidFloat32 || type == braidFloat64 ||
         type == braidBfloat16;
}

std::string_view typeName(braidDataType_t type) {
  switch (type) {
    case braidInt8: return "int8";
    case braidUint8: return "uint8";
    case braidInt32: return "int32";
    case braidUint32: return "uint32";
    case braidInt64: return "int64";
    case braidUint64: return "uint64";
    case braidFloat16: return "half";
    case braidFloat32: return "float";
    case braidFloat64: return "double";
    case braidBfloat16: return "bfloat16";
  }
  return "invalid";
}

std::string_view opName(braidRedOp_t op) {
  switch (op) {
    case braidSum: return "sum";
    case braidProd: return "prod";
    case braidMax: return "max";
    case braidMin: return "min";
    case braidAvg: return "avg";
  }
  return "invalid";
}

std::optional<braidDataType_t> parseTypeName(std::string_view name) {
  for (braidDataType_t type : allDataTypes()) {
    if (name == typeName(type)) return type;
  }
  struct Alias {
    std::string_view name;
    braidDataType_t type;
  };
  static constexpr Alias kAliases[] = {
      {"char", braidInt8},    {"i8", braidInt8},     {"u8", braidUint8},
      {"int", braidInt32},    {"i32", braidInt32},   {"u32", braidUint32},
      {"i64", braidInt64},    {"u64", braidUint64},  {"float16", braidFloat16},
      {"fp16", braidFloat16}, {"f16", braidFloat16}, {"float32", braidFloat32},
      {"fp32", braidFloat32}, {"f32", braidFloat32}, {"float64", braidFloat64},
      {"fp64", braidFloat64}, {"f64", braidFloat64}, {"bf16", braidBfloat16},
  };
  for (const Alias& alias : kAliases) {
    if (name == alias.name) return alias.type;
  }
  return std::nullopt;
}

std::optional<braidRedOp_t> parseOpName(std::string_view name) {
  for (braidRedOp_t op : allRedOps()) {
    if (name == opName(op)) return op;
  }
  return std::nullopt;
}

}  // namespace braid::perf
