// braid-perf data: how a message size maps to counts and buffer extents per collective (the
// nccl-tests conventions), the bus-bandwidth factors, and the correctness check.
//
// The check fills every rank's input from a deterministic function of (rank, element), so each
// rank can compute every other rank's input, hence the exact expected output, locally. The values
// are small integers chosen so that Sum, Prod, Max, Min and Avg are exact in every datatype,
// float16 and bfloat16 included: inputs lie in [-A, A] (or [0, 2A] unsigned) with A*nranks <= 127,
// and Prod inputs are 1 or 2 with at most 15 ranks contributing a 2 (2^15 fits float16). Integer
// results wrap as the library's do; Avg is the sum divided once by nranks (truncating for
// integers, in float32 for float16/bfloat16), as the library computes it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "braid.h"
#include "perf/perf_options.h"

namespace braid::perf {

/// Element counts of one measurement, in elements of the datatype.
struct CollShape {
  uint64_t paramCount = 0;         ///< the count argument of the API call
  uint64_t sendCount = 0;          ///< elements read from sendbuff
  uint64_t recvCount = 0;          ///< elements written to recvbuff
  uint64_t sendInPlaceOffset = 0;  ///< in place: sendbuff = base + rank * this (elements)
  uint64_t recvInPlaceOffset = 0;  ///< in place: recvbuff = base + rank * this (elements)
  size_t typeSize = 4;

  uint64_t sendBytes() const { return sendCount * typeSize; }
  uint64_t recvBytes() const { return recvCount * typeSize; }
  /// The size column of the report and the bytes algbw divides by: the larger of the two.
  uint64_t reportBytes() const { return sendBytes() > recvBytes() ? sendBytes() : recvBytes(); }
  /// The extent of the single buffer an in-place run uses.
  uint64_t inPlaceBytes() const { return reportBytes(); }
};

/// The shape nccl-tests gives a message of `bytes` bytes: allreduce, broadcast, reduce and
/// sendrecv move bytes/typeSize elements; allgather gathers nranks blocks of bytes/typeSize/nranks
/// elements (size = total gathered); reducescatter and alltoall take a total input of that many
/// blocks.
CollShape collShape(PerfCollective coll, uint64_t bytes, size_t typeSize, int nranks);

/// busbw = algbw x this: 2(n-1)/n for allreduce, (n-1)/n for allgather, reducescatter and
/// alltoall, 1 for broadcast, reduce and sendrecv.
double busBwFactor(PerfCollective coll, int nranks);

/// Bandwidths in GB/s (1e9 bytes per second) of one measurement.
struct Bandwidth {
  double algBw = 0;
  double busBw = 0;
};
Bandwidth bandwidth(PerfCollective coll, const CollShape& shape, int nranks, double seconds);

/// What one rank verifies.
struct CheckSpec {
  PerfCollective coll = PerfCollective::kAllReduce;
  braidDataType_t type = braidFloat32;
  braidRedOp_t op = braidSum;  ///< ignored by collectives that do not reduce
  int nranks = 1;
  int rank = 0;
  int root = 0;
  CollShape shape;
};

/// The input value `rank` places at element `index` of its sendbuff for op (a small integer).
int64_t inputValue(braidDataType_t type, braidRedOp_t op, int nranks, int rank, uint64_t index);

/// Writes `value` (an exact small integer) as one element of `type`; integers wrap.
void storeInteger(braidDataType_t type, int64_t value, void* dst);
/// Whether two elements of `type` are equal (floats compare numerically, integers bitwise).
bool sameElement(braidDataType_t type, const void* a, const void* b);
/// One element as text, for diagnostics.
std::string elementText(braidDataType_t type, const void* element);

/// The expected element `index` of recvbuff on spec.rank, encoded into dst (typeSize bytes).
void expectedOutput(const CheckSpec& spec, uint64_t index, void* dst);

/// Fills spec.shape.sendCount input elements of spec.rank at send.
void fillInput(const CheckSpec& spec, void* send);

/// A verification result: how many elements differ and the first of them.
struct Mismatches {
  uint64_t count = 0;
  uint64_t firstIndex = 0;
  std::string expected;  ///< of the first mismatch
  std::string actual;
};
/// Compares recvbuff with the expected output. Reduce checks only the root's output.
Mismatches checkOutput(const CheckSpec& spec, const void* recv);
/// Compares sendbuff with the input fillInput wrote (out of place, a collective must not write it).
Mismatches checkInputIntact(const CheckSpec& spec, const void* send);

/// Guard regions around output buffers: filled before a verified run, then checked.
constexpr size_t kGuardBytes = 64;
constexpr unsigned char kGuardByte = 0xA5;
/// Byte value written over an output before a verified run, so an element left unwritten shows.
constexpr unsigned char kPoisonByte = 0x7B;
void writeGuard(void* guard);
/// The number of guard bytes that no longer hold kGuardByte.
uint64_t countGuardDamage(const void* guard);

/// float16 / bfloat16 conversions (round to nearest even).
uint16_t floatToHalfBits(float f);
float halfBitsToFloat(uint16_t h);
uint16_t floatToBfloat16Bits(float f);
float bfloat16BitsToFloat(uint16_t b);

}  // namespace braid::perf
