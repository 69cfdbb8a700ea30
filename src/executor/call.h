// One call on its way from the C API to an executor: as the application made it (CallArgs), and
// made ready to run (PreparedCall). Plain data shared by the host path, the device path and the
// communicator that prepares calls for both.
#pragma once

#include <cstddef>
#include <memory>

#include "algorithms/plan.h"
#include "braid.h"
#include "fifo/fifo.h"
#include "kernels/cpu/reduce.h"

namespace braid {

/// The caller's memory behind a plan's named buffers.
struct PlanBuffers {
  const char* input = nullptr;
  char* output = nullptr;
  char* scratch = nullptr;
};

/// One call as the application made it.
struct CallArgs {
  Collective coll = Collective::kAllReduce;
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  size_t count = 0;
  braidDataType_t dtype = braidFloat32;
  braidRedOp_t op = braidSum;
  int root = 0;           ///< root of Broadcast/Reduce, peer of Send/Recv
  bool onDevice = false;  ///< buffers in device memory: the device executor runs the call
};

/// A call made ready to run: its plan, buffers and the descriptor peers will check.
struct PreparedCall {
  /// Valid until the communicator's next prepare() unless `owner` keeps it.
  const Plan* plan = nullptr;
  std::shared_ptr<const Plan> owner;  ///< set when prepare() was asked to share the plan
  PlanBuffers buffers;
  kernels::Reducer reducer;
  CallDescriptor call;
};

}  // namespace braid
