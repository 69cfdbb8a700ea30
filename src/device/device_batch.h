// Runs device calls: one call, or the device calls of a group (see device_dispatch.h).
//
// Per communicator of the batch: its calls are prepared in order (plans, sequence numbers),
// split into phases (devicePhases) and each phase becomes one executor launch on the stream of
// the communicator's first call; the other streams of its calls join that stream before and after
// through events, and launches of one communicator are ordered after its earlier ones. A NULL
// stream means the communicator's internal stream, ordered after the legacy default stream, and a
// host wait that watches the communicator's health (a peer's failure or an abort raises the
// kernels' abort flag). CUDA builds only.
#pragma once

#include <functional>
#include <vector>

#include "base/status.h"
#include "device/device_dispatch.h"

namespace braid {

/// Launches `calls`, runs hostPart, then waits for the NULL-stream ones. The first error wins;
/// a communicator whose calls were prepared but could not complete is failed.
Status runDeviceCalls(const std::vector<DeviceCallRequest>& calls,
                      const std::function<Status()>& hostPart);

}  // namespace braid
