#include "kernels/host_lane_runner.h"

#include <cstring>
#include <thread>
#include <vector>

#include "kernels/cpu/reduce.h"
#include "kernels/executor_protocol.h"
#include "kernels/host_memory_ops.h"
#include "kernels/ll_executor.h"

namespace braid::gpu {
namespace {

/// One host thread running a lane: it leads, and combines with the CPU kernels. The fold is the
/// kernel's: in[0] ⊕ in[1] ⊕ ..., Avg's division on the last combination, every input read
/// before any output is written.
struct HostThread {
  static bool leader() { return true; }
  static uint32_t thread() { return 0; }
  static uint32_t threads() { return 1; }
  static void sync() {}
  static void combine(const CombineArgs& a, const DeviceCall& call) {
    const size_t bytes = a.count * call.elemSize;
    if (!a.reduce && !a.final) {
      copy(a, bytes);
      return;
    }
    std::vector<char> acc(a.in[0], a.in[0] + bytes);
    const kernels::Reducer reducer(static_cast<braidDataType_t>(call.dtype),
                                   static_cast<braidRedOp_t>(call.op), a.nranks);
    if (a.reduce) {
      for (int k = 1; k < a.nin; ++k) {
        if (a.final && k == a.nin - 1) {
          reducer.reduceFinal(acc.data(), acc.data(), a.in[k], a.count);
        } else {
          reducer.reduce(acc.data(), acc.data(), a.in[k], a.count);
        }
      }
    } else {
      reducer.finalize(acc.data(), acc.data(), a.count);
    }
    for (int o = 0; o < a.nout; ++o) std::memcpy(a.out[o], acc.data(), bytes);
  }
  static void copy(const CombineArgs& a, size_t bytes) {
    for (int o = 0; o < a.nout; ++o) {
      if (bytes > 0 && a.out[o] != a.in[0]) std::memmove(a.out[o], a.in[0], bytes);
    }
  }
  static void fenceData() {}
};

}  // namespace

void runLanesOnHost(const ExecutorArgs& args, const DeviceCall* calls, int ncalls) {
  std::vector<std::thread> threads;
  for (int c = 0; c < ncalls; ++c) {
    for (uint32_t lane = 0; lane < calls[c].nlanes; ++lane) {
      threads.emplace_back([&args, &call = calls[c], c, lane] {
        LaneState state{};
        runLane<HostMemoryOps, HostThread>(args, call, static_cast<uint32_t>(c), lane, state);
      });
    }
  }
  for (std::thread& t : threads) t.join();
}

void runLanesOnHost(const ExecutorArgs& args, const LlArgs& ll, const DeviceCall* calls,
                    int ncalls) {
  std::vector<std::thread> threads;
  for (int c = 0; c < ncalls; ++c) {
    for (uint32_t lane = 0; lane < calls[c].nlanes; ++lane) {
      threads.emplace_back([&args, &ll, &call = calls[c], c, lane] {
        // The kernel stages in shared memory; a host lane in a buffer of its own.
        std::vector<char> stage((kMaxStepPeers + 1) * size_t{kLlMaxMessageBytes});
        LlLaneState lines{};
        for (int r = 0; r < kMaxStepPeers; ++r)
          lines.stageIn[r] = stage.data() + r * kLlMaxMessageBytes;
        lines.stageOut = stage.data() + kMaxStepPeers * kLlMaxMessageBytes;
        LaneState state{};
        runLaneLl<HostMemoryOps, HostThread>(args, ll, call, static_cast<uint32_t>(c), lane, state,
                                             lines);
      });
    }
  }
  for (std::thread& t : threads) t.join();
}

}  // namespace braid::gpu
