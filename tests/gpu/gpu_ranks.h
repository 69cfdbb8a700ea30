// What the rank processes of the GPU suites share: starting on GPU 0, running conformance cases
// with NULL-stream and stream calls alternating, capturing calls into a CUDA graph and replaying
// it, and checking a result of floats.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "braid.h"
#include "tests/support/collective_check.h"
#include "tests/support/multiprocess.h"

namespace braid::testing {

/// Puts this rank process on GPU 0 and starts rank `rank` of `nranks` with `settings`. Returns ""
/// or why it failed.
std::string initOnGpu0(braidComm_t* comm, int nranks, const braidUniqueId& id, int rank,
                       Settings& settings);

/// Runs `cases` on comm (runAndCheckOnDevice), NULL-stream and stream calls alternating. Returns
/// "" or the first failure.
std::string runCasesOnDevice(braidComm_t comm, int rank, int nranks,
                             const std::vector<CollCase>& cases);

/// A CUDA graph of the calls enqueued on a stream while it captured, destroyed with this object.
class CapturedGraph {
 public:
  CapturedGraph() = default;
  ~CapturedGraph();
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  /// Captures what enqueue() puts on `stream` (enqueue returns "" or why a call failed) and
  /// instantiates the graph. Returns "" or why not.
  std::string capture(cudaStream_t stream, const std::function<std::string()>& enqueue);
  /// Launches the graph on `stream` and waits for it. Returns "" or why it failed.
  std::string replay(cudaStream_t stream);

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

/// "" when each of the `count` floats in `bytes` is expected(i), else the first that is not, its
/// message starting with `label` (where one is given).
std::string firstWrongFloat(const std::vector<char>& bytes, size_t count, const std::string& label,
                            const std::function<float(size_t)>& expected);

}  // namespace braid::testing
