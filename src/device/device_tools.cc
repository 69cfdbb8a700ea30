#include "device/device_tools.h"

#include "braid_build_config.h"

#if BRAID_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"
#endif

namespace braid {

#if BRAID_HAVE_CUDA
Result<void*> streamCreate() {
  cudaStream_t stream = nullptr;
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return static_cast<void*>(stream);
}

void streamDestroy(void* stream) {
  if (stream != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(stream));
}

Status streamSynchronize(void* stream) {
  return cudaStatus(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)),
                    "synchronising the stream");
}

Status graphBeginCapture(void* stream) {
  return cudaStatus(
      cudaStreamBeginCapture(static_cast<cudaStream_t>(stream), cudaStreamCaptureModeThreadLocal),
      "starting a graph capture");
}

Result<void*> graphEndCapture(void* stream) {
  cudaGraph_t graph = nullptr;
  CUDA_RETURN_IF_ERROR(cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  RETURN_IF_ERROR(cudaStatus(made, "instantiating the captured graph"));
  return static_cast<void*>(exec);
}

Status graphLaunch(void* graphExec, void* stream) {
  return cudaStatus(
      cudaGraphLaunch(static_cast<cudaGraphExec_t>(graphExec), static_cast<cudaStream_t>(stream)),
      "launching the graph");
}

void graphDestroy(void* graphExec) {
  if (graphExec != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graphExec));
}
#else
namespace {
Status noCuda() {
  return Status(braidUnhandledCudaError, "this build of Braid has no CUDA support");
}
}  // namespace

Result<void*> streamCreate() { return noCuda(); }
void streamDestroy(void*) {}
Status streamSynchronize(void*) { return noCuda(); }
Status graphBeginCapture(void*) { return noCuda(); }
Result<void*> graphEndCapture(void*) { return noCuda(); }
Status graphLaunch(void*, void*) { return noCuda(); }
void graphDestroy(void*) {}
#endif

}  // namespace braid
