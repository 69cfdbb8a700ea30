// What a communicator's tuner would do, for tools that link the internal library (braid-perf's
// regret columns and --tune). Not part of the public API.
#pragma once

#include <cstdint>
#include <string>

#include "braid.h"
#include "base/status.h"
#include "tuner/tuner.h"

namespace braid {

/// The choice `comm`'s tuner makes for a call of `coll` moving `bytes` per rank (count x element
/// size). With honourOverride false it is the choice BRAID_ALGO aside: the tuning table's or the
/// model's. Fails for a null or uninitialised communicator.
Result<Choice> tunerChoice(braidComm_t comm, Collective coll, uint64_t bytes, bool honourOverride);

/// The model's predicted time of `algo`'s best candidate, if the model could cost it.
Result<double> tunerPredictionUs(braidComm_t comm, Collective coll, Algorithm algo, uint64_t bytes);

/// The table rank 0 prints at BRAID_DEBUG=INFO.
Result<std::string> tunerTable(braidComm_t comm);

}  // namespace braid
