#include "tuner/model_plans.h"

#include <algorithm>

namespace braid {

PlanRequest modelRequest(Collective coll, Algorithm algo, int nranks, uint64_t bytes,
                         uint32_t chunkBytes, int nchannels, const std::vector<int>& ring) {
  PlanRequest request;
  request.coll = coll;
  request.algo = algo;
  request.nranks = nranks;
  request.elemSize = bytes % 4 == 0 ? 4 : 1;
  request.count = bytes / request.elemSize;
  request.chunkBytes =
      std::max<uint32_t>(chunkBytes / request.elemSize * request.elemSize, request.elemSize);
  request.nchannels = nchannels;
  request.ring = ring;
  return request;
}

double extrapolateSpans(double one, double two, uint64_t span, uint64_t bytes) {
  const double perByte = std::max(0.0, two - one) / double(span);
  return two + perByte * double(bytes - 2 * span);
}

}  // namespace braid
