#include "device/device_batch.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "base/dtype.h"
#include "device/device_comm.h"
#include "kernels/cuda/executor.h"

namespace braid {
namespace {

bool isP2p(const CallArgs& a) { return a.coll == Collective::kSend || a.coll == Collective::kRecv; }

/// One communicator's share of a batch.
struct CommBatch {
  DeviceClient* comm = nullptr;
  DeviceComm* device = nullptr;
  std::vector<size_t> calls;  ///< indices into the request list, in call order
  bool waits = false;         ///< some call had a NULL stream: the host waits for `done`
  CudaEvent done;
};

/// One executor launch: the calls of one phase.
struct Launch {
  std::vector<gpu::DeviceCall> calls;
  std::vector<const DevicePlan*> plans;  ///< of the calls, for arming the staged FIFOs
  uint32_t nblocks = 0;
};

/// A send to oneself paired with the matching receive of the same batch.
struct SelfCopy {
  void* dst;
  const void* src;
  size_t bytes;
};

cudaStream_t streamOf(const DeviceCallRequest& r, const DeviceComm& device) {
  return r.stream != nullptr ? static_cast<cudaStream_t>(r.stream) : device.internalStream();
}

/// Pairs the batch's sends to self with its receives from self, in order (as group.cc does).
Status pairSelf(const std::vector<DeviceCallRequest>& requests, const CommBatch& b,
                std::vector<bool>& handled, std::vector<SelfCopy>& copies) {
  std::vector<size_t> sends, recvs;
  const int rank = b.comm->rank();
  for (size_t k = 0; k < b.calls.size(); ++k) {
    const CallArgs& a = requests[b.calls[k]].args;
    if (isP2p(a) && a.root == rank) (a.coll == Collective::kSend ? sends : recvs).push_back(k);
  }
  if (sends.size() != recvs.size()) {
    return invalidUsage("rank " + std::to_string(rank) + " has " + std::to_string(sends.size()) +
                        " sends to itself but " + std::to_string(recvs.size()) +
                        " receives from itself in this group; they must pair up");
  }
  for (size_t i = 0; i < sends.size(); ++i) {
    const CallArgs& s = requests[b.calls[sends[i]]].args;
    const CallArgs& r = requests[b.calls[recvs[i]]].args;
    const size_t bytes = s.count * dataTypeSize(s.dtype);
    if (bytes != r.count * dataTypeSize(r.dtype)) {
      return invalidUsage("send to self of " + std::to_string(bytes) +
                          " bytes paired with a receive of " +
                          std::to_string(r.count * dataTypeSize(r.dtype)) + " bytes");
    }
    if (bytes > 0 && s.sendbuff != r.recvbuff) copies.push_back({r.recvbuff, s.sendbuff, bytes});
    handled[sends[i]] = handled[recvs[i]] = true;
  }
  return okStatus();
}

bool planMovesData(const Plan& plan) {
  for (const Lane& lane : plan.lanes) {
    for (const Step& step : lane.steps) {
      if (step.bytes > 0 || step.sendBytes > 0) return true;
    }
  }
  return false;
}

/// Prepares and enqueues one communicator's calls.
Status launchBatch(const std::vector<DeviceCallRequest>& requests, CommBatch& b) {
  DeviceComm& device = *b.device;
  DeviceClient& comm = *b.comm;
  DeviceGuard guard;
  RETURN_IF_ERROR(guard.set(device.device()));
  RelaxedCaptureMode relaxed;

  std::vector<cudaStream_t> streams;
  bool waits = false;
  for (size_t i : b.calls) {
    const cudaStream_t s = streamOf(requests[i], device);
    if (std::find(streams.begin(), streams.end(), s) == streams.end()) streams.push_back(s);
    waits |= requests[i].stream == nullptr;
  }
  const cudaStream_t primary = streams.front();
  ASSIGN_OR_RETURN(const bool capturing, isCapturing(primary));
  if (capturing && waits) {
    return invalidUsage(
        "a device call with a NULL stream cannot share a group with calls on a "
        "stream being captured");
  }

  std::vector<bool> handled(b.calls.size(), false);
  std::vector<SelfCopy> copies;
  RETURN_IF_ERROR(pairSelf(requests, b, handled, copies));
  std::vector<CallArgs> args;
  std::vector<PreparedCall> prepared;
  for (size_t k = 0; k < b.calls.size(); ++k) {
    if (handled[k]) continue;
    Result<PreparedCall> p = comm.prepare(requests[b.calls[k]].args);
    if (!p.ok()) {
      comm.fail(p.status());  // its sequence numbers no longer match its peers'
      return p.status();
    }
    args.push_back(requests[b.calls[k]].args);
    prepared.push_back(std::move(p).value());
  }

  // From here on the calls are numbered: any failure leaves the communicator out of step.
  comm.deviceCallsUsed();
  Status status = [&]() -> Status {
    size_t scratchNeed = 0;
    for (const PreparedCall& p : prepared)
      scratchNeed = std::max<size_t>(scratchNeed, p.plan->scratchBytes);
    char* scratch = nullptr;
    if (scratchNeed > 0) {
      ASSIGN_OR_RETURN(scratch, device.scratch(scratchNeed));
    }

    const std::vector<int> phases = devicePhases(args);
    const int nphases = phases.empty() ? 0 : *std::max_element(phases.begin(), phases.end()) + 1;
    std::vector<Launch> launches(nphases);
    for (size_t k = 0; k < prepared.size(); ++k) {
      const PreparedCall& p = prepared[k];
      if (!planMovesData(*p.plan)) continue;
      ASSIGN_OR_RETURN(const DevicePlan* plan, device.upload(p.owner, capturing));
      Launch& launch = launches[phases[k]];
      gpu::DeviceCall c;
      c.lanes = plan->lanes;
      c.steps = plan->steps;
      c.nlanes = plan->nlanes;
      c.elemSize = p.plan->elemSize;
      c.input = static_cast<const char*>(args[k].sendbuff);
      c.output = static_cast<char*>(args[k].recvbuff);
      c.scratch = scratch;
      c.call = p.call;
      c.dtype = static_cast<uint8_t>(args[k].dtype);
      c.op = p.call.op;
      c.nranks = comm.nranks();
      c.firstBlock = launch.nblocks;
      launch.nblocks += plan->nlanes;
      launch.calls.push_back(c);
      launch.plans.push_back(plan);
    }
    for (const Launch& launch : launches) {
      if (launch.calls.size() > static_cast<size_t>(gpu::kMaxCallsPerLaunch)) {
        return invalidUsage("a group runs " + std::to_string(launch.calls.size()) +
                            " concurrent device calls on one communicator; at most " +
                            std::to_string(gpu::kMaxCallsPerLaunch) + " are supported");
      }
      if (launch.nblocks > static_cast<uint32_t>(device.residentBlocks())) {
        return invalidUsage("device calls need " + std::to_string(launch.nblocks) +
                            " concurrent executor blocks but the GPU keeps only " +
                            std::to_string(device.residentBlocks()) +
                            " resident (fewer channels or fewer calls per group)");
      }
    }

    // Enqueue: join the streams, follow earlier work, copy to self, launch, fork back.
    // An event may be recorded again once a stream's wait on it is enqueued: back to the pool.
    if (waits) {
      ASSIGN_OR_RETURN(CudaEvent legacy, device.takeEvent());
      CUDA_RETURN_IF_ERROR(cudaEventRecord(legacy.get(), cudaStreamLegacy));
      CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(device.internalStream(), legacy.get(), 0));
      device.giveEvent(std::move(legacy));
    }
    for (size_t i = 1; i < streams.size(); ++i) {
      ASSIGN_OR_RETURN(CudaEvent joined, device.takeEvent());
      CUDA_RETURN_IF_ERROR(cudaEventRecord(joined.get(), streams[i]));
      CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(primary, joined.get(), 0));
      device.giveEvent(std::move(joined));
    }
    RETURN_IF_ERROR(device.orderAfterEarlier(primary, capturing));
    for (const SelfCopy& copy : copies) {
      CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(copy.dst, copy.src, copy.bytes, cudaMemcpyDefault, primary));
    }
    for (const Launch& launch : launches) {
      if (launch.nblocks == 0) continue;
      RETURN_IF_ERROR(device.armStaged(launch.plans, primary, capturing));
      gpu::ExecutorArgs common = device.executorArgs();
      common.nblocks = launch.nblocks;
      const int ncalls = static_cast<int>(launch.calls.size());
      RETURN_IF_ERROR(
          device.lowLatency()
              ? gpu::launchExecutorLl(common, device.llArgs(), launch.calls.data(), ncalls, primary)
              : gpu::launchExecutor(common, launch.calls.data(), ncalls, primary));
    }
    RETURN_IF_ERROR(device.markLaunched(primary, capturing));
    if (waits || streams.size() > 1) {
      ASSIGN_OR_RETURN(b.done, device.takeEvent());
      CUDA_RETURN_IF_ERROR(cudaEventRecord(b.done.get(), primary));
      for (size_t i = 1; i < streams.size(); ++i) {
        CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(streams[i], b.done.get(), 0));
      }
      if (!waits) device.giveEvent(std::move(b.done));  // the host waits on it otherwise
    }
    b.waits = waits;
    return okStatus();
  }();
  if (!status.ok()) comm.fail(status);
  return status;
}

/// The host side of a NULL-stream call: waits for the kernels while watching the communicator.
Status waitBatch(CommBatch& b) {
  DeviceGuard guard;
  RETURN_IF_ERROR(guard.set(b.device->device()));
  Status cause;
  bool aborted = false;
  for (uint64_t spin = 0;; ++spin) {
    const cudaError_t e = cudaEventQuery(b.done.get());
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) {
      Status failed = cudaStatus(e, "waiting for the device executor");
      b.comm->fail(failed);
      return failed;
    }
    if (!aborted && spin % 64 == 0) {
      // A failed peer or braidCommAbort: stop the kernels, then report the cause.
      Status health = b.comm->jobHealth();
      if (health.ok()) health = b.device->stagedHealth();
      if (!health.ok()) {
        cause = health;
        b.device->abort();
        aborted = true;
      }
    }
    if (spin > 20000) {
      usleep(50);
    } else if (spin > 2000) {
      sched_yield();
    }
  }
  Status error = b.device->deviceError();
  if (!cause.ok()) error = cause;
  if (!error.ok()) b.comm->fail(error);
  return error;
}

}  // namespace

Status runDeviceCalls(const std::vector<DeviceCallRequest>& calls,
                      const std::function<Status()>& hostPart) {
  std::vector<std::pair<DeviceClient*, int>> wanted;
  for (const DeviceCallRequest& r : calls) wanted.emplace_back(r.comm, r.route.deviceOrdinal);
  RETURN_IF_ERROR(ensureDeviceComms(wanted));

  std::vector<CommBatch> batches;
  for (size_t i = 0; i < calls.size(); ++i) {
    auto it = std::find_if(batches.begin(), batches.end(),
                           [&](const CommBatch& b) { return b.comm == calls[i].comm; });
    if (it == batches.end()) {
      batches.emplace_back();
      it = batches.end() - 1;
      it->comm = calls[i].comm;
      it->device = findDeviceComm(calls[i].comm);
      if (it->device == nullptr) return internalError("device path: no device state");
    }
    it->calls.push_back(i);
  }
  // Communicators of one batch progress together: one user stream cannot serve two of them.
  for (size_t i = 0; i < calls.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (calls[i].stream != nullptr && calls[i].stream == calls[j].stream &&
          calls[i].comm != calls[j].comm) {
        return invalidUsage(
            "one group gives the same CUDA stream to two communicators; their "
            "kernels must run concurrently, so each needs its own stream");
      }
    }
  }
  for (CommBatch& b : batches) {
    Status earlier = b.device->deviceError();
    if (!earlier.ok()) {
      b.comm->fail(earlier);
      return Status(earlier.code(),
                    "communicator unusable after an earlier device error: " + earlier.message());
    }
  }

  Status first;
  for (CommBatch& b : batches) {
    Status launched = launchBatch(calls, b);
    if (!launched.ok()) {
      first = launched;
      break;
    }
  }
  if (first.ok()) first = hostPart();
  for (CommBatch& b : batches) {
    if (!b.waits) continue;
    Status waited = waitBatch(b);
    if (waited.ok()) b.device->giveEvent(std::move(b.done));
    if (first.ok()) first = waited;
  }
  return first;
}

}  // namespace braid
