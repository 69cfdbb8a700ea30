// The device side of one communicator: its p2p transport, the staged FIFOs to the peers no GPU path
// reaches (transport/staged_path.h: pinned host memory that a socket proxy moves over TCP), the
// FIFO tables and control block the device executor reads, plans copied to device memory, device
// scratch, an internal stream and the ordering of its launches. Made at the communicator's first
// device call (collectively over its bootstrap) and kept until the communicator is destroyed.
//
// A peer is reached through GPU memory where p2p reaches it (same host, a GPU this one can
// reach), else through the staged FIFOs where BRAID_TRANSPORT allows socket (device_peer_paths.h
// says which, and why not). The staged FIFOs are mapped into the device at the first plan that
// uses them; every launch that uses them first arms their proxy with the slots it will post and
// free - at enqueue, or from a host node in a graph being captured, so that each replay arms it.
//
// Communicators do not hold it themselves: a registry keyed by the communicator (its DeviceClient)
// keeps the bootstrap each one registers at set-up and the DeviceComm made from it. CUDA builds
// only.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "algorithms/plan.h"
#include "base/status.h"
#include "device/device_peer_paths.h"
#include "kernels/cuda/device_abi.h"
#include "kernels/cuda/device_runtime.h"
#include "transport/p2p/p2p_transport.h"
#include "transport/staged_path.h"

namespace braid {

class Bootstrap;
class DeviceClient;

/// A plan in device memory.
struct DevicePlan {
  std::shared_ptr<const Plan> plan;  ///< keeps the host plan (the cache key) alive
  DeviceMemory memory;
  const gpu::DeviceLane* lanes = nullptr;
  const Step* steps = nullptr;
  uint32_t nlanes = 0;
  bool captured = false;  ///< used by a captured graph: kept for the communicator's life
  std::vector<gpu::FifoSlotCount> stagedSlots;  ///< what one run moves on staged FIFOs
};

class DeviceComm {
 public:
  /// Collective: every rank of `comm` must call it (at the same call) with its own device.
  static Result<std::unique_ptr<DeviceComm>> create(DeviceClient& comm, Bootstrap& bootstrap,
                                                    int device);
  /// Waits for the communicator's device work (raise abort() first to cut it short), then frees.
  ~DeviceComm();
  DeviceComm(const DeviceComm&) = delete;
  DeviceComm& operator=(const DeviceComm&) = delete;

  int device() const { return device_; }
  cudaStream_t internalStream() const { return stream_.get(); }
  /// How many executor blocks may run at once on this device.
  int residentBlocks() const { return residentBlocks_; }

  /// The plan in device memory, copied at first use (and the staged FIFOs it uses mapped). Fails
  /// when no path reaches a peer the plan names.
  Result<const DevicePlan*> upload(const std::shared_ptr<const Plan>& plan, bool capturing);
  /// Before a launch of `plans` on `stream`: arms the staged FIFOs' proxy with their slots (from
  /// a host node of the graph when `capturing`).
  Status armStaged(const std::vector<const DevicePlan*>& plans, cudaStream_t stream,
                   bool capturing);
  /// A failure of the staged FIFOs' transport, or of a peer they reach (ok while none).
  Status stagedHealth() const;
  /// Device scratch of at least `bytes`. Earlier areas stay allocated (running or captured work
  /// may still use them) until the communicator goes.
  Result<char*> scratch(size_t bytes);
  /// What every block of a launch of this communicator shares.
  gpu::ExecutorArgs executorArgs() const;
  /// Whether launches run the low-latency protocol for small messages (BRAID_DEVICE_PROTO=ll),
  /// and the rings they then use.
  bool lowLatency() const { return lowLatency_; }
  gpu::LlArgs llArgs() const;

  /// Orders work about to be enqueued on `stream` after this communicator's earlier work (no
  /// wait where that work went to the same stream), then (markLaunched) records `stream` as
  /// holding its latest work. Captured streams are ordered by the user's graph instead, so both
  /// do nothing while `capturing`.
  Status orderAfterEarlier(cudaStream_t stream, bool capturing);
  Status markLaunched(cudaStream_t stream, bool capturing);

  /// An event for ordering streams, from the communicator's pool (made when it is empty): a call
  /// that joins streams or waits on the host needs a few, and creating them per call costs a
  /// runtime call each. giveEvent returns one once nothing will wait on it any more.
  Result<CudaEvent> takeEvent();
  void giveEvent(CudaEvent event);

  /// The first failure a kernel of this communicator reported (ok while none).
  Status deviceError() const;
  /// Makes running and future kernels of this communicator stop.
  void abort();

 private:
  DeviceComm() = default;
  /// After p2p: the staged FIFOs (collective) and the path to each peer.
  Status setUpPeerPaths(Bootstrap& bootstrap, StagedMedia media);
  /// Writes the device table entries of the staged FIFOs `slots` uses, mapping them first.
  Status mapStaged(const std::vector<gpu::FifoSlotCount>& slots);

  DeviceClient* comm_ = nullptr;
  int device_ = 0;
  int rank_ = 0;
  int nranks_ = 1;
  int maxChannels_ = 1;
  uint64_t timeoutNs_ = 0;
  int residentBlocks_ = 0;
  CudaStream stream_;
  CudaEvent lastWork_;
  bool haveLastWork_ = false;
  cudaStream_t lastStream_ = nullptr;  ///< where lastWork_ was recorded
  std::vector<CudaEvent> eventPool_;
  std::unique_ptr<P2pTransport> p2p_;
  DevicePeerPaths paths_;
  std::unique_ptr<StagedPath> staged_;  ///< none when every pair has a GPU path
  std::vector<bool> stagedMapped_;      ///< per table entry (sends, then receives)
  /// What the host nodes of captured graphs arm the proxy with, kept for the graphs' life.
  struct StagedArming;
  std::vector<std::unique_ptr<StagedArming>> capturedArming_;
  /// The host node of a captured graph: arms the proxy each time the graph runs.
  static void CUDART_CB armFromGraph(void* arming);
  DeviceMemory fifoTables_;  ///< send table then receive table, [peer * maxChannels + channel]
  bool lowLatency_ = false;
  DeviceMemory ringTables_;  ///< the low-latency rings, laid out as fifoTables_
  DeviceMemory errorLatch_;
  PinnedMemory control_;
  std::unordered_map<const Plan*, std::unique_ptr<DevicePlan>> plans_;
  std::vector<DeviceMemory> scratch_;  ///< the last one is current
};

// ---- The registry (thread-safe).

/// Remembers the bootstrap of a communicator being set up (device set-up uses it later).
void registerDeviceCommunicator(DeviceClient* comm, Bootstrap* bootstrap);
/// Forgets a communicator, destroying its DeviceComm (waits for its device work).
void unregisterDeviceCommunicator(DeviceClient* comm);
/// Binds a communicator to a device before its first call (braidCommInitAll's devlist).
void bindDevice(DeviceClient* comm, int device);
/// The bound device, or the device of the DeviceComm, or -1.
int deviceOf(DeviceClient* comm);
/// The communicator's DeviceComm if it has one.
DeviceComm* findDeviceComm(DeviceClient* comm);
/// Makes the DeviceComm of each (communicator, device) that has none, all at once (each creation
/// is collective; several communicators of one thread must join their peers together).
Status ensureDeviceComms(const std::vector<std::pair<DeviceClient*, int>>& wanted);

}  // namespace braid
