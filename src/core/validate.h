// Argument checks of the public calls: every braidInvalidArgument case of the API contract, each
// with a one-line reason naming the argument.
#pragma once

#include "base/status.h"
#include "core/communicator.h"

namespace braid {

/// Checks a collective or point-to-point call of `comm` (rank, nranks) before it is queued.
Status validateCall(const CallArgs& args, int rank, int nranks);

}  // namespace braid
