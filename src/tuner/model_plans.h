// What the tuners' models (CostModel, DeviceSpanTuner) share about the calls they simulate: the
// plan request of a modelled call, and a long message's time extrapolated from two spans.
#pragma once

#include <cstdint>
#include <vector>

#include "algorithms/plan.h"

namespace braid {

/// The request of rank 0's plan of a modelled call of `bytes`: 4-byte elements where they divide
/// `bytes` (else bytes), chunks of whole elements (at least one). The caller sets the rank and,
/// for a hierarchical algorithm, the hosts.
PlanRequest modelRequest(Collective coll, Algorithm algo, int nranks, uint64_t bytes,
                         uint32_t chunkBytes, int nchannels, const std::vector<int>& ring);

/// The time of `bytes` (> 2 * span) on the line through the times of one span (`one`) and two
/// spans (`two`), at the rate past two spans, never below `two`.
double extrapolateSpans(double one, double two, uint64_t span, uint64_t bytes);

}  // namespace braid
