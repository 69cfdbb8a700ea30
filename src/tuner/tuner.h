// The tuner: for every call, which algorithm, chunk size and channel count to use.
//
// Candidates are the algorithms that serve the collective, narrowed by BRAID_ALGO and by what the
// FIFO depth allows; among them a size heuristic picks (latency algorithms for small messages,
// bandwidth algorithms for large ones). BRAID_CHUNK_BYTES / BRAID_NCHANNELS fix the data-path shape.
#pragma once

#include <cstdint>
#include <string>

#include "algorithms/plan.h"
#include "core/config.h"
#include "tuner/algo_override.h"

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
  /// Fails when BRAID_ALGO is malformed or leaves a collective nothing it can run.
  static Result<Tuner> create(const Config& config, int nranks, int maxChannels,
                              uint32_t slotBytes);

  Choice choose(Collective coll, uint64_t bytes) const;
  /// Whether `algo` may run `coll` here (serves it, allowed by the FIFO depth).
  bool usable(Algorithm algo, Collective coll) const;
  /// What the tuner will do, one line per collective, for BRAID_DEBUG=INFO.
  std::string describe() const;

 private:
  Algorithm heuristic(Collective coll, uint64_t bytes) const;

  int nranks_ = 1;
  int nslots_ = 2;
  int maxChannels_ = 1;
  uint32_t slotBytes_ = 0;
  uint32_t chunkBytes_ = 0;  ///< forced by BRAID_CHUNK_BYTES, else 0
  int nchannels_ = 0;        ///< forced by BRAID_NCHANNELS, else 0
  AlgoOverride override_;
};

}  // namespace braid
