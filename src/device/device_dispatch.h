// The device path's entry points for the C API (api.cc), the group queue (group.cc) and the
// communicator's life cycle (communicator.cc). Plain C++ in every build: without CUDA the calls
// fail with braidUnhandledCudaError and the life-cycle hooks do nothing.
//
// A device call is prepared like a host call (Communicator::prepare: plan, sequence number,
// descriptor) and then enqueued as one executor kernel on the caller's stream; with a NULL stream
// it runs on an internal stream ordered after the legacy default stream, and the call waits for it
// while watching the communicator's health. Inside a group, device calls queue beside the host
// calls; at GroupEnd the device calls are launched first, the host calls run, then the NULL-stream
// device work is waited for.
#pragma once

#include <functional>
#include <vector>

#include "base/status.h"
#include "braid.h"
#include "device/device_client.h"
#include "device/device_memory.h"

namespace braid {

class Bootstrap;

/// Runs a call on device buffers now or, when `inGroup` (a group is open on this thread), queues
/// it for the group's end (DeviceGroup::take).
Status submitDeviceCall(DeviceClient* comm, const CallArgs& args, const DeviceRoute& route,
                        braidStream_t stream, bool inGroup);

/// One queued device call.
struct DeviceCallRequest {
  DeviceClient* comm = nullptr;
  CallArgs args;
  DeviceRoute route;
  braidStream_t stream = nullptr;
};

/// The device calls a group queued on this thread.
class DeviceGroup {
 public:
  explicit DeviceGroup(std::vector<DeviceCallRequest> calls = {}) : calls_(std::move(calls)) {}
  /// Takes the calls queued on this thread (leaving none).
  static DeviceGroup take();

  bool empty() const { return calls_.empty(); }
  /// Launches the device calls, runs hostPart (the group's host calls), then waits for the
  /// device calls made with a NULL stream. Returns the first error.
  Status run(const std::function<Status()>& hostPart);

 private:
  std::vector<DeviceCallRequest> calls_;
};

/// The phase of each call of one communicator's batch: a call runs after every earlier call it
/// must follow (collectives follow everything; point-to-point calls follow earlier ones on the
/// same peer and direction), so calls of one phase run together in one launch.
std::vector<int> devicePhases(const std::vector<CallArgs>& calls);

// ---- The communicator's life cycle.

/// At the end of set-up: the bootstrap a later device set-up uses.
void attachDeviceBootstrap(DeviceClient* comm, Bootstrap* bootstrap);
/// At destruction: waits for the communicator's device work and frees its device resources.
void releaseDevice(DeviceClient* comm);
/// At abort: makes its running and future kernels stop.
void abortDevice(DeviceClient* comm);
/// Turns a failure reported by one of its kernels (stream calls) into its async error.
void pollDeviceErrors(DeviceClient* comm);
/// The CUDA device of comm, or -1 while it has none.
int communicatorDevice(DeviceClient* comm);
/// braidCommInitAll's devlist: every entry must be a visible device.
Status checkDeviceList(const int* devlist, int ndev);
/// Binds comm to a device before its first call.
void bindCommunicatorDevice(DeviceClient* comm, int device);

}  // namespace braid
