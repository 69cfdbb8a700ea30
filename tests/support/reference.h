// Inputs and expected outputs for collective tests, written independently of the library's
// kernels. Input values are small integers chosen so that every reduction is exact in every
// datatype (sums stay below 2^8, products are powers of two), so results compare bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "braid.h"

namespace braid::testing {

/// The value rank `rank` contributes at element `index` of its input.
int64_t inputValue(braidDataType_t type, braidRedOp_t op, int rank, size_t index, uint32_t seed);

/// Writes `value` (an exact small integer) as element `index` of a buffer of `type`; integers wrap.
void storeInteger(void* buffer, size_t index, braidDataType_t type, int64_t value);

/// Fills `count` elements with inputValue(rank, firstIndex + i).
void fillInput(void* buffer, size_t count, braidDataType_t type, braidRedOp_t op, int rank,
               size_t firstIndex, uint32_t seed);

/// Writes into `out` (one element of `type`) the reduction over ranks 0..nranks-1 of element
/// `index` with op, the way the API defines it (Avg: sum then one division).
void expectedReduction(void* out, braidDataType_t type, braidRedOp_t op, int nranks, size_t index,
                       uint32_t seed);

/// Compares `count` elements of `actual` with `expected`; returns "" or the first mismatches.
std::string compareElements(const void* actual, const void* expected, size_t count,
                            braidDataType_t type, const std::string& what);

/// A buffer with guard bytes on both sides that must stay untouched.
class GuardedBuffer {
 public:
  /// `shared`: the memory comes from braidMemAlloc (peers on the host read it in place).
  explicit GuardedBuffer(size_t bytes, bool shared = false);
  ~GuardedBuffer();
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  char* data() { return storage_ + kGuard; }
  size_t size() const { return bytes_; }
  /// "" when both guards are intact, else which one was overwritten.
  std::string checkGuards(const std::string& what) const;

 private:
  static constexpr size_t kGuard = 256;
  static constexpr unsigned char kPattern = 0xA5;
  size_t bytes_;
  bool shared_;
  char* storage_;
};

}  // namespace braid::testing
