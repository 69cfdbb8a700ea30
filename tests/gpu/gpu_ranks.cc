#include "tests/gpu/gpu_ranks.h"

#include <cuda_runtime.h>

#include <cstring>

#include "tests/gpu/gpu_support.h"
#include "tests/support/variants.h"

namespace braid::testing {

std::string initOnGpu0(braidComm_t* comm, int nranks, const braidUniqueId& id, int rank,
                       Settings& settings) {
  if (std::string e = cudaProblem(cudaSetDevice(0), "cudaSetDevice(0)"); !e.empty()) return e;
  return initRank(comm, nranks, id, rank, settings);
}

std::string runCasesOnDevice(braidComm_t comm, int rank, int nranks,
                             const std::vector<CollCase>& cases) {
  cudaStream_t stream = nullptr;
  std::string error = cudaProblem(cudaStreamCreate(&stream), "cudaStreamCreate");
  for (size_t i = 0; i < cases.size() && error.empty(); ++i) {
    error = runAndCheckOnDevice(comm, rank, nranks, cases[i], i % 2 ? stream : nullptr);
  }
  if (stream != nullptr) cudaStreamDestroy(stream);
  return error;
}

CapturedGraph::~CapturedGraph() {
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  if (graph_ != nullptr) cudaGraphDestroy(graph_);
}

std::string CapturedGraph::capture(cudaStream_t stream,
                                   const std::function<std::string()>& enqueue) {
  std::string e =
      cudaProblem(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "begin capture");
  if (!e.empty()) return e;
  e = enqueue();
  // The capture ends even after a failed call, so that the stream can be used and destroyed.
  const cudaError_t end = cudaStreamEndCapture(stream, &graph_);
  if (!e.empty()) return e;
  if (e = cudaProblem(end, "end capture"); !e.empty()) return e;
  return cudaProblem(cudaGraphInstantiate(&exec_, graph_, 0), "instantiate");
}

std::string CapturedGraph::replay(cudaStream_t stream) {
  std::string e = cudaProblem(cudaGraphLaunch(exec_, stream), "graph launch");
  if (e.empty()) e = cudaProblem(cudaStreamSynchronize(stream), "sync");
  return e;
}

std::string firstWrongFloat(const std::vector<char>& bytes, size_t count, const std::string& label,
                            const std::function<float(size_t)>& expected) {
  for (size_t i = 0; i < count; ++i) {
    float got;
    std::memcpy(&got, bytes.data() + i * sizeof(float), sizeof(float));
    const float want = expected(i);
    if (got != want) {
      return (label.empty() ? "" : label + " ") + "element " + std::to_string(i) + " is " +
             std::to_string(got) + ", expected " + std::to_string(want);
    }
  }
  return "";
}

}  // namespace braid::testing
