#include "perf/perf_device.h"

#include <string>

#include "core/tools_api.h"

namespace braid::perf {
namespace {

Outcome toolsResult(const std::string& error) { return error.empty() ? Outcome() : failure(error); }

}  // namespace

DeviceLoop::~DeviceLoop() {
  finish();
  tools::streamDestroy(stream_);
}

Outcome DeviceLoop::open(DeviceTiming timing) {
  timing_ = timing;
  if (timing_ == DeviceTiming::kEachCall || stream_ != nullptr) return Outcome();
  return toolsResult(tools::streamCreate(&stream_));
}

Outcome DeviceLoop::prepare(const Calls& calls) {
  if (timing_ != DeviceTiming::kGraph) return Outcome();
  finish();
  PERF_TRY(toolsResult(tools::graphBeginCapture(stream_)));
  Outcome captured = calls(stream_);
  // The capture must end even when a call failed, or the stream stays unusable.
  void* graph = nullptr;
  Outcome ended = toolsResult(tools::graphEndCapture(stream_, &graph));
  PERF_TRY(captured);
  PERF_TRY(ended);
  graph_ = graph;
  PERF_TRY(toolsResult(tools::graphLaunch(graph_, stream_)));
  return toolsResult(tools::streamSynchronize(stream_));
}

Outcome DeviceLoop::run(const Calls& calls) {
  switch (timing_) {
    case DeviceTiming::kEachCall: return calls(nullptr);
    case DeviceTiming::kStream: PERF_TRY(calls(stream_)); break;
    case DeviceTiming::kGraph: PERF_TRY(toolsResult(tools::graphLaunch(graph_, stream_))); break;
  }
  return toolsResult(tools::streamSynchronize(stream_));
}

void DeviceLoop::finish() {
  tools::graphDestroy(graph_);
  graph_ = nullptr;
}

}  // namespace braid::perf
