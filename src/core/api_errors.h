// The last-error bookkeeping of the C API, shared by the files that implement it.
#pragma once

#include "base/status.h"
#include "braid.h"
#include "core/comm_handle.h"

namespace braid {

/// Records the outcome of a call as the last error of the thread (and of comm, a live handle or
/// nullptr) and returns its code.
braidResult_t finish(const Status& status, braidComm* comm = nullptr);

}  // namespace braid
