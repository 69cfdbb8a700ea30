#include "device/device_dispatch.h"

#include <algorithm>
#include <string>

#include "braid_build_config.h"

#if BRAID_HAVE_CUDA
#include "device/device_batch.h"
#include "device/device_comm.h"
#endif

namespace braid {
namespace {

thread_local std::vector<DeviceCallRequest> tQueued;

bool isP2p(const CallArgs& a) { return a.coll == Collective::kSend || a.coll == Collective::kRecv; }

#if !BRAID_HAVE_CUDA
Status noCuda() {
  return Status(braidUnhandledCudaError,
                "device buffers need CUDA, but this build of Braid runs host memory only");
}
#endif

}  // namespace

std::vector<int> devicePhases(const std::vector<CallArgs>& calls) {
  std::vector<int> phase(calls.size(), 0);
  for (size_t i = 0; i < calls.size(); ++i) {
    for (size_t e = 0; e < i; ++e) {
      const bool independent = isP2p(calls[i]) && isP2p(calls[e]) &&
                               (calls[i].coll != calls[e].coll || calls[i].root != calls[e].root);
      if (!independent) phase[i] = std::max(phase[i], phase[e] + 1);
    }
  }
  return phase;
}

Status submitDeviceCall(DeviceClient* comm, const CallArgs& args, const DeviceRoute& route,
                        braidStream_t stream, bool inGroup) {
  DeviceCallRequest request{comm, args, route, stream};
  request.args.onDevice = true;
  if (inGroup) {
    tQueued.push_back(request);
    return okStatus();
  }
  return DeviceGroup({request}).run([] { return okStatus(); });
}

DeviceGroup DeviceGroup::take() {
  DeviceGroup group(std::move(tQueued));
  tQueued.clear();
  return group;
}

Status DeviceGroup::run(const std::function<Status()>& hostPart) {
  if (calls_.empty()) return hostPart();
#if BRAID_HAVE_CUDA
  return runDeviceCalls(calls_, hostPart);
#else
  // Only reachable with a test classifier: this build cannot run device calls at all.
  Status host = hostPart();
  return host.ok() ? noCuda() : host;
#endif
}

#if BRAID_HAVE_CUDA

void attachDeviceBootstrap(DeviceClient* comm, Bootstrap* bootstrap) {
  registerDeviceCommunicator(comm, bootstrap);
}

void releaseDevice(DeviceClient* comm) { unregisterDeviceCommunicator(comm); }

void abortDevice(DeviceClient* comm) {
  if (DeviceComm* device = findDeviceComm(comm)) device->abort();
}

void pollDeviceErrors(DeviceClient* comm) {
  // Only device work fails asynchronously; host-only communicators skip the registry's lock.
  if (!comm->usedDeviceCalls()) return;
  DeviceComm* device = findDeviceComm(comm);
  if (device == nullptr) return;
  Status error = device->deviceError();
  if (!error.ok()) comm->fail(error);
}

int communicatorDevice(DeviceClient* comm) { return deviceOf(comm); }

Status checkDeviceList(const int* devlist, int ndev) {
  int count = 0;
  RETURN_IF_ERROR(cudaStatus(cudaGetDeviceCount(&count), "braidCommInitAll: devlist"));
  for (int i = 0; i < ndev; ++i) {
    if (devlist[i] < 0 || devlist[i] >= count) {
      return invalidArgument("braidCommInitAll: devlist[" + std::to_string(i) +
                             "] = " + std::to_string(devlist[i]) + " is not one of the " +
                             std::to_string(count) + " visible CUDA devices");
    }
  }
  return okStatus();
}

void bindCommunicatorDevice(DeviceClient* comm, int device) { bindDevice(comm, device); }

#else

void attachDeviceBootstrap(DeviceClient*, Bootstrap*) {}
void releaseDevice(DeviceClient*) {}
void abortDevice(DeviceClient*) {}
void pollDeviceErrors(DeviceClient*) {}
int communicatorDevice(DeviceClient*) { return -1; }

Status checkDeviceList(const int*, int) {
  return Status(braidUnhandledCudaError,
                "braidCommInitAll: devlist names CUDA devices but this build of Braid runs host "
                "memory only");
}

void bindCommunicatorDevice(DeviceClient*, int) {}

#endif

}  // namespace braid
