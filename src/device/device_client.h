// What the device path needs of the communicator it serves. The communicator (core/) implements
// it, so the device layer sits below the communicator and never sees the rest of it.
#pragma once

#include <vector>

#include "base/config.h"
#include "base/log.h"
#include "base/status.h"
#include "executor/call.h"

namespace braid {

class DeviceClient {
 public:
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  /// Channels the device path's FIFOs carry for the algorithms (its call check's come after).
  virtual int deviceMaxChannels() const = 0;
  virtual const Config& config() const = 0;
  virtual const Logger& logger() const = 0;
  /// At device set-up: the GPU island of every rank (ranks whose GPUs reach each other's memory
  /// share one; gpuIslands in device_peer_paths.h), alike on every rank. Where there is more than
  /// one, device calls are tuned with the staged hops between islands priced, and hierarchical
  /// plans group ranks by island.
  virtual void setDeviceIslands(const std::vector<int>& islandOf) = 0;

  /// Plans the call and assigns its sequence number (Communicator::prepare in core/).
  virtual Result<PreparedCall> prepare(const CallArgs& args, bool share = true) = 0;
  /// Whether the job as a whole is sound: this rank's health and any peer's failure.
  virtual Status jobHealth() = 0;
  /// Marks the communicator unusable and tells the peers why (first error wins).
  virtual void fail(const Status& status) = 0;
  /// Device calls finish on their own schedule: after one, a failure claims no collective done.
  virtual void deviceCallsUsed() = 0;
  virtual bool usedDeviceCalls() const = 0;

 protected:
  ~DeviceClient() = default;
};

}  // namespace braid
