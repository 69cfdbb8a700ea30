// Runs one collective on a communicator and checks every output element, the guard bytes around
// every buffer and that out-of-place inputs were not modified. Used by the collective, fault and
// soak tests alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "braid.h"

namespace braid::testing {

enum class TestColl {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kSendRecvRing
};

std::string testCollName(TestColl coll);
bool isReduction(TestColl coll);

struct CollCase {
  TestColl coll = TestColl::kAllReduce;
  braidDataType_t type = braidFloat32;
  braidRedOp_t op = braidSum;
  size_t count = 0;
  int root = 0;
  bool inPlace = false;
  uint32_t seed = 0;
  bool sharedBuffers = false;  ///< buffers from braidMemAlloc
};

std::string describe(const CollCase& c);

/// Runs `c` on comm (this process's rank of nranks); "" on success, else what went wrong.
std::string runAndCheck(braidComm_t comm, int rank, int nranks, const CollCase& c);

/// The conformance matrix: every collective, datatype and op at small counts, in and out of
/// place, rotating roots; larger counts for a representative subset so the matrix stays quick.
std::vector<CollCase> conformanceCases(int nranks, const std::vector<size_t>& smallCounts,
                                       const std::vector<size_t>& largeCounts);

}  // namespace braid::testing
