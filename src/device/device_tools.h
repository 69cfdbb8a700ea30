// CUDA streams and graphs for tools (braid-perf through core/tools_api.h), which see no CUDA
// header: a stream to enqueue device calls on and synchronise once per timed loop, and the
// capture of those calls into a graph to replay. Builds without CUDA answer with an error.
#pragma once

#include "base/status.h"

namespace braid {

/// A non-blocking stream of the current device (a cudaStream_t), destroyed with streamDestroy.
Result<void*> streamCreate();
void streamDestroy(void* stream);
/// Waits for everything enqueued on `stream`.
Status streamSynchronize(void* stream);

/// Starts capturing what this thread enqueues on `stream` (cudaStreamCaptureModeThreadLocal).
Status graphBeginCapture(void* stream);
/// Ends the capture and instantiates it: a cudaGraphExec_t, destroyed with graphDestroy.
Result<void*> graphEndCapture(void* stream);
/// Enqueues one replay of the instantiated graph on `stream`.
Status graphLaunch(void* graphExec, void* stream);
void graphDestroy(void* graphExec);

}  // namespace braid
