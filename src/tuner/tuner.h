// The tuner: for every call, which algorithm, chunk size and channel count to use.
//
// For now it applies fixed defaults and the user's BRAID_CHUNK_BYTES / BRAID_NCHANNELS; the cost
// model, measured tables and BRAID_ALGO overrides plug in behind choose().
#pragma once

#include <cstdint>

#include "algorithms/plan.h"
#include "core/config.h"

namespace braid {

/// How one call will run. Identical on every rank for the same call (ranks must agree).
struct Choice {
  Algorithm algo = Algorithm::kRing;
  uint32_t chunkBytes = 0;
  int nchannels = 1;
};

class Tuner {
 public:
  Tuner() = default;
  Tuner(const Config& config, int nranks, int maxChannels, uint32_t slotBytes);

  Choice choose(Collective coll, uint64_t bytes) const;

 private:
  int nranks_ = 1;
  int maxChannels_ = 1;
  uint32_t slotBytes_ = 0;
  uint32_t chunkBytes_ = 0;  ///< forced by BRAID_CHUNK_BYTES, else 0
  int nchannels_ = 0;        ///< forced by BRAID_NCHANNELS, else 0
};

}  // namespace braid
