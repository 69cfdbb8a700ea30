// --device: how braid-perf enqueues and waits for the calls of a timed loop (DeviceTiming). As
// nccl-tests does, the -n calls go on a stream and the host waits once for all of them (stream),
// or they are captured into a CUDA graph once and the loop is one replay of it (graph); each call
// keeps the NULL stream, whose calls the library waits for before returning.
#pragma once

#include <functional>

#include "braid.h"
#include "perf/perf_error.h"
#include "perf/perf_options.h"

namespace braid::perf {

class DeviceLoop {
 public:
  /// The calls of one timed loop, enqueued on `stream` (nullptr: the NULL stream).
  using Calls = std::function<Outcome(braidStream_t stream)>;

  DeviceLoop() = default;
  ~DeviceLoop();
  DeviceLoop(const DeviceLoop&) = delete;
  DeviceLoop& operator=(const DeviceLoop&) = delete;

  /// Makes the stream the timing needs (none for kEachCall).
  Outcome open(DeviceTiming timing);
  /// Before the clock starts: with graphs, captures `calls` and replays the graph once (the
  /// first replay uploads it).
  Outcome prepare(const Calls& calls);
  /// The timed part: the calls (or the graph's replay), then one wait for all of them.
  Outcome run(const Calls& calls);
  /// After the loop: drops the graph of prepare().
  void finish();

 private:
  DeviceTiming timing_ = DeviceTiming::kEachCall;
  void* stream_ = nullptr;
  void* graph_ = nullptr;
};

}  // namespace braid::perf
