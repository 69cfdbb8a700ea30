#include "tests/support/reference.h"

#include <cmath>
#include <cstring>
#include <new>
#include <sstream>

#include "kernels/cpu/reduce.h"

namespace braid::testing {
namespace {

bool isUnsigned(braidDataType_t t) {
  return t == braidUint8 || t == braidUint32 || t == braidUint64;
}

size_t sizeOf(braidDataType_t t) { return braidDataTypeSize(t); }

}  // namespace

int64_t inputValue(braidDataType_t type, braidRedOp_t op, int rank, size_t index, uint32_t seed) {
  const uint64_t r = static_cast<uint64_t>(rank);
  const uint64_t i = static_cast<uint64_t>(index) + seed;
  switch (op) {
    case braidSum:
    case braidAvg: {
      const int64_t v = static_cast<int64_t>((r * 7 + i * 3) % 9);
      return isUnsigned(type) ? v : v - 4;
    }
    case braidProd: return (r + i) % 4 == 0 ? 2 : 1;
    case braidMax:
    case braidMin: {
      const int64_t v = static_cast<int64_t>((r * 13 + i * 7) % 17);
      return isUnsigned(type) ? v : v - 8;
    }
  }
  return 0;
}

void storeInteger(void* buffer, size_t index, braidDataType_t type, int64_t value) {
  auto* b = static_cast<char*>(buffer);
  const uint64_t bits = static_cast<uint64_t>(value);
  switch (type) {
    case braidInt8:
    case braidUint8: {
      uint8_t v = static_cast<uint8_t>(bits);
      std::memcpy(b + index, &v, 1);
      break;
    }
    case braidInt32:
    case braidUint32: {
      uint32_t v = static_cast<uint32_t>(bits);
      std::memcpy(b + index * 4, &v, 4);
      break;
    }
    case braidInt64:
    case braidUint64: std::memcpy(b + index * 8, &bits, 8); break;
    case braidFloat16: {
      unsigned short h = kernels::floatToHalf(static_cast<float>(value));
      std::memcpy(b + index * 2, &h, 2);
      break;
    }
    case braidBfloat16: {
      unsigned short h = kernels::floatToBfloat16(static_cast<float>(value));
      std::memcpy(b + index * 2, &h, 2);
      break;
    }
    case braidFloat32: {
      float f = static_cast<float>(value);
      std::memcpy(b + index * 4, &f, 4);
      break;
    }
    case braidFloat64: {
      double d = static_cast<double>(value);
      std::memcpy(b + index * 8, &d, 8);
      break;
    }
  }
}

void fillInput(void* buffer, size_t count, braidDataType_t type, braidRedOp_t op, int rank,
               size_t firstIndex, uint32_t seed) {
  for (size_t i = 0; i < count; ++i) {
    storeInteger(buffer, i, type, inputValue(type, op, rank, firstIndex + i, seed));
  }
}

void expectedReduction(void* out, braidDataType_t type, braidRedOp_t op, int nranks, size_t index,
                       uint32_t seed) {
  int64_t acc = inputValue(type, op, 0, index, seed);
  for (int r = 1; r < nranks; ++r) {
    const int64_t v = inputValue(type, op, r, index, seed);
    switch (op) {
      case braidSum:
      case braidAvg: acc += v; break;
      case braidProd: acc *= v; break;
      case braidMax: acc = v > acc ? v : acc; break;
      case braidMin: acc = v < acc ? v : acc; break;
    }
  }
  if (op != braidAvg) {
    storeInteger(out, 0, type, acc);
    return;
  }
  switch (type) {
    case braidFloat32: {
      float f = static_cast<float>(acc) / static_cast<float>(nranks);
      std::memcpy(out, &f, 4);
      return;
    }
    case braidFloat64: {
      double d = static_cast<double>(acc) / static_cast<double>(nranks);
      std::memcpy(out, &d, 8);
      return;
    }
    case braidFloat16: {
      unsigned short h = kernels::floatToHalf(static_cast<float>(acc) / static_cast<float>(nranks));
      std::memcpy(out, &h, 2);
      return;
    }
    case braidBfloat16: {
      unsigned short h =
          kernels::floatToBfloat16(static_cast<float>(acc) / static_cast<float>(nranks));
      std::memcpy(out, &h, 2);
      return;
    }
    default: storeInteger(out, 0, type, acc / nranks); return;  // truncates toward zero
  }
}

std::string compareElements(const void* actual, const void* expected, size_t count,
                            braidDataType_t type, const std::string& what) {
  const size_t es = sizeOf(type);
  const auto* a = static_cast<const unsigned char*>(actual);
  const auto* e = static_cast<const unsigned char*>(expected);
  std::ostringstream os;
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(a + i * es, e + i * es, es) == 0) continue;
    if (wrong < 3) {
      uint64_t av = 0, ev = 0;
      std::memcpy(&av, a + i * es, es);
      std::memcpy(&ev, e + i * es, es);
      os << (wrong ? "; " : "") << "element " << i << ": got bits 0x" << std::hex << av
         << " expected 0x" << ev << std::dec;
    }
    ++wrong;
  }
  if (wrong == 0) return "";
  return what + ": " + std::to_string(wrong) + " of " + std::to_string(count) + " wrong (" +
         os.str() + ")";
}

GuardedBuffer::GuardedBuffer(size_t bytes, bool shared) : bytes_(bytes), shared_(shared) {
  void* p = nullptr;
  if (shared) {
    if (braidMemAlloc(&p, bytes + 2 * kGuard) != braidSuccess) throw std::bad_alloc();
  } else {
    p = ::operator new(bytes + 2 * kGuard);
  }
  storage_ = static_cast<char*>(p);
  std::memset(storage_, kPattern, bytes + 2 * kGuard);
}

GuardedBuffer::~GuardedBuffer() {
  if (shared_) {
    braidMemFree(storage_);
  } else {
    ::operator delete(storage_);
  }
}

std::string GuardedBuffer::checkGuards(const std::string& what) const {
  for (size_t i = 0; i < kGuard; ++i) {
    if (static_cast<unsigned char>(storage_[i]) != kPattern) {
      return what + ": wrote before the start of the buffer";
    }
    if (static_cast<unsigned char>(storage_[kGuard + bytes_ + i]) != kPattern) {
      return what + ": wrote past the end of the buffer";
    }
  }
  return "";
}

}  // namespace braid::testing
