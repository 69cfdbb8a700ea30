#include "device/device_comm.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>

#include "device/device_client.h"
#include "executor/executor.h"
#include "kernels/cuda/executor.h"
#include "topology/host_id.h"
#include "transport/transport.h"
#include "transport/transport_filter.h"

namespace braid {
namespace {

/// Plans kept in device memory per communicator before unused ones are dropped.
constexpr size_t kMaxDevicePlans = 256;

size_t roundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

/// Everything a rank prepares before it joins the transport exchange.
Status prepareLocal(DeviceGuard& guard, int device) {
  RETURN_IF_ERROR(guard.set(device));
  // Create the context now, so that a device that cannot run work says so here.
  CUDA_RETURN_IF_ERROR(cudaFree(nullptr));
  return okStatus();
}

/// Pinned host memory mapped into every device: the staged FIFOs, registered in place.
class PinnedHostMapper : public HostMemoryMapper {
 public:
  ~PinnedHostMapper() override {
    for (char* p : registered_) cudaHostUnregister(p);
  }
  Result<char*> map(char* host, size_t bytes) override {
    CUDA_RETURN_IF_ERROR(
        cudaHostRegister(host, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable));
    registered_.push_back(host);
    void* device = nullptr;
    CUDA_RETURN_IF_ERROR(cudaHostGetDevicePointer(&device, host, 0));
    return static_cast<char*>(device);
  }

 private:
  std::vector<char*> registered_;
};

/// Why `device` cannot give its memory to an RDMA NIC ("" if it can), for BRAID_GDR.
std::string gpuGdrWhyNot(int device) {
  int supported = 0;
  const cudaError_t rc =
      cudaDeviceGetAttribute(&supported, cudaDevAttrGPUDirectRDMASupported, device);
  if (rc != cudaSuccess) {
    return "cannot ask GPU " + std::to_string(device) + " for GPUDirect RDMA support (" +
           cudaGetErrorString(rc) + ")";
  }
  return supported ? "" : "GPU " + std::to_string(device) + " does not support GPUDirect RDMA";
}

}  // namespace

struct DeviceComm::StagedArming {
  StagedPath* path;
  std::vector<gpu::FifoSlotCount> slots;
};

void DeviceComm::armFromGraph(void* data) {
  const auto* arming = static_cast<const StagedArming*>(data);
  arming->path->arm(arming->slots);
}

Result<std::unique_ptr<DeviceComm>> DeviceComm::create(DeviceClient& comm, Bootstrap& bootstrap,
                                                       int device) {
  std::unique_ptr<DeviceComm> d(new DeviceComm());
  d->comm_ = &comm;
  d->device_ = device;
  d->rank_ = comm.rank();
  d->nranks_ = comm.nranks();
  d->maxChannels_ =
      comm.deviceMaxChannels() + 1;  // the algorithms' channels, then the call check's
  d->timeoutNs_ = static_cast<uint64_t>(comm.config().timeoutSeconds * 1e9);
  const Config& config = comm.config();
  // `auto` keeps slots for every message until a GPU check confirms the low-latency protocol
  // (docs/tuning.md#device-calls).
  d->lowLatency_ = config.deviceProto == Config::DeviceProto::kLowLatency;

  DeviceGuard guard;
  RelaxedCaptureMode relaxed;
  Status local = [&]() -> Status {
    RETURN_IF_ERROR(prepareLocal(guard, device));
    ASSIGN_OR_RETURN(d->stream_, CudaStream::create());
    ASSIGN_OR_RETURN(d->lastWork_, CudaEvent::create());
    ASSIGN_OR_RETURN(d->residentBlocks_, gpu::executorResidentBlocks());
    if (d->lowLatency_) {
      ASSIGN_OR_RETURN(const int llBlocks, gpu::executorResidentBlocksLl());
      d->residentBlocks_ = std::min(d->residentBlocks_, llBlocks);
    }
    return okStatus();
  }();
  ASSIGN_OR_RETURN(const TransportFilter filter, TransportFilter::parse(config.transport));

  P2pOptions options;
  options.rank = d->rank_;
  options.nranks = d->nranks_;
  options.maxChannels = d->maxChannels_;
  options.nslots = static_cast<uint32_t>(config.nslots);
  options.slotBytes = config.slotBytes;
  options.llLines = d->lowLatency_ ? gpu::kLlDefaultLines : 0;
  options.hostHash = hostHash(hostIdentity(config.hostId));
  options.device = device;
  options.allowed = filter.allows(TransportKind::kP2p);
  options.setupStream = d->stream_.get();
  if (!local.ok()) {
    options.localFailure =
        "cannot use CUDA device " + std::to_string(device) + ": " + local.message();
  }
  ASSIGN_OR_RETURN(d->p2p_, P2pTransport::create(bootstrap, options));
  StagedMedia media;
  media.rdma = filter.allows(TransportKind::kIb);
  media.tcp = filter.allows(TransportKind::kSocket);
  RETURN_IF_ERROR(d->setUpPeerPaths(bootstrap, media));
  // From the whole p2p matrix, so that every rank tunes its device calls alike.
  comm.setDeviceIslands(gpuIslands(
      d->nranks_, [&](int sender, int receiver) { return d->p2p_->links(sender, receiver); },
      d->p2p_->reach().hosts()));

  // The FIFO tables: send ends, then receive ends, [peer * maxChannels + channel].
  const size_t perSide = size_t(d->nranks_) * size_t(d->maxChannels_);
  std::vector<gpu::DeviceFifo> tables(2 * perSide);
  for (int peer = 0; peer < d->nranks_; ++peer) {
    for (int ch = 0; ch < d->maxChannels_; ++ch) {
      const size_t at = size_t(peer) * d->maxChannels_ + ch;
      if (d->p2p_->canSend(peer)) tables[at] = d->p2p_->sendFifo(peer, ch);
      if (d->p2p_->canRecv(peer)) tables[perSide + at] = d->p2p_->recvFifo(peer, ch);
    }
  }
  const size_t tableBytes = tables.size() * sizeof(gpu::DeviceFifo);
  ASSIGN_OR_RETURN(d->fifoTables_, DeviceMemory::allocate(tableBytes));
  std::vector<gpu::LlFifo> rings;
  if (d->lowLatency_) {
    // Peers without a GPU path keep ringless entries: their messages take the staged slots.
    rings.resize(2 * perSide);
    for (int peer = 0; peer < d->nranks_; ++peer) {
      for (int ch = 0; ch < d->maxChannels_; ++ch) {
        const size_t at = size_t(peer) * d->maxChannels_ + ch;
        if (d->p2p_->canSend(peer)) rings[at] = d->p2p_->sendRing(peer, ch);
        if (d->p2p_->canRecv(peer)) rings[perSide + at] = d->p2p_->recvRing(peer, ch);
      }
    }
    const size_t ringBytes = rings.size() * sizeof(gpu::LlFifo);
    ASSIGN_OR_RETURN(d->ringTables_, DeviceMemory::allocate(ringBytes));
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d->ringTables_.data(), rings.data(), ringBytes,
                                         cudaMemcpyHostToDevice, d->stream_.get()));
  }
  ASSIGN_OR_RETURN(d->errorLatch_, DeviceMemory::allocate(sizeof(uint32_t)));
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d->fifoTables_.data(), tables.data(), tableBytes,
                                       cudaMemcpyHostToDevice, d->stream_.get()));
  CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(d->errorLatch_.data(), 0, sizeof(uint32_t), d->stream_.get()));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d->stream_.get()));
  ASSIGN_OR_RETURN(d->control_, PinnedMemory::allocate(sizeof(gpu::DeviceControl)));
  new (d->control_.host()) gpu::DeviceControl();

  std::string links;
  for (int peer = 0; peer < d->nranks_; ++peer) {
    if (peer == d->rank_) continue;
    links += (links.empty() ? "" : "; ") + std::to_string(peer) + ": " + d->paths_.describe(peer);
  }
  BRAID_LOG(comm.logger(), kInfo, kCuda, "device path on GPU %d: %s (%d resident executor blocks)",
            device, links.empty() ? "no peers" : links.c_str(), d->residentBlocks_);
  return d;
}

DeviceComm::~DeviceComm() {
  if (!stream_.get()) return;  // never got a device
  DeviceGuard guard;
  if (!guard.set(device_).ok()) return;
  if (haveLastWork_) cudaEventSynchronize(lastWork_.get());
  cudaStreamSynchronize(stream_.get());
}

Status DeviceComm::setUpPeerPaths(Bootstrap& bootstrap, StagedMedia media) {
  // Every rank knows which pairs p2p links, so all take part in the staged FIFOs' set-up (a
  // collective) or none does.
  const bool anyPairUnlinked = p2p_->reach().anyPairUnlinked();
  std::vector<bool> wanted(nranks_, false);
  for (int p = 0; p < nranks_; ++p) {
    wanted[p] = p != rank_ && (media.rdma || media.tcp) && !(p2p_->canSend(p) && p2p_->canRecv(p));
  }
  if (anyPairUnlinked) {
    TransportContext ctx;
    ctx.bootstrap = &bootstrap;
    ctx.config = &comm_->config();
    ctx.logger = &comm_->logger();
    ctx.rank = rank_;
    ctx.nranks = nranks_;
    ctx.maxChannels = maxChannels_;
    ASSIGN_OR_RETURN(staged_,
                     StagedPath::create(ctx, wanted, media, std::make_unique<PinnedHostMapper>(),
                                        gpuGdrWhyNot(device_)));
  }
  std::vector<PeerReach> reach(nranks_);
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    reach[p].gpuSend = p2p_->canSend(p);
    reach[p].gpuRecv = p2p_->canRecv(p);
    reach[p].gpuHow = p2p_->describe(p);
    reach[p].staged = staged_ && staged_->reaches(p);
    if (staged_) {
      // "RDMA" or "TCP" when linked, else why neither links it.
      reach[p].stagedOver = staged_->describe(p);
      if (!reach[p].staged) reach[p].stagedWhyNot = reach[p].stagedOver;
    } else {
      reach[p].stagedWhyNot =
          media.rdma || media.tcp ? "not linked" : "BRAID_TRANSPORT excludes ib and socket";
    }
  }
  paths_ = DevicePeerPaths(rank_, reach);
  stagedMapped_.assign(2 * size_t(nranks_) * size_t(maxChannels_), false);
  return okStatus();
}

Status DeviceComm::mapStaged(const std::vector<gpu::FifoSlotCount>& slots) {
  const size_t perSide = size_t(nranks_) * size_t(maxChannels_);
  std::vector<std::pair<size_t, gpu::DeviceFifo>> entries;
  for (const gpu::FifoSlotCount& c : slots) {
    const size_t at = size_t(c.peer) * maxChannels_ + c.channel;
    if (c.posts != 0 && !stagedMapped_[at]) {
      ASSIGN_OR_RETURN(gpu::DeviceFifo f, staged_->sendFifo(c.peer, c.channel));
      entries.emplace_back(at, f);
    }
    if (c.releases != 0 && !stagedMapped_[perSide + at]) {
      ASSIGN_OR_RETURN(gpu::DeviceFifo f, staged_->recvFifo(c.peer, c.channel));
      entries.emplace_back(perSide + at, f);
    }
  }
  if (entries.empty()) return okStatus();
  // No kernel has used these entries yet (every plan passes here first), so they can be written
  // while other kernels of the communicator run.
  auto* table = reinterpret_cast<gpu::DeviceFifo*>(fifoTables_.data());
  for (const auto& [at, fifo] : entries) {
    CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(table + at, &fifo, sizeof(fifo), cudaMemcpyHostToDevice, stream_.get()));
  }
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
  for (const auto& entry : entries) stagedMapped_[entry.first] = true;
  return okStatus();
}

Status DeviceComm::armStaged(const std::vector<const DevicePlan*>& plans, cudaStream_t stream,
                             bool capturing) {
  if (!staged_) return okStatus();
  std::vector<gpu::FifoSlotCount> slots;
  for (const DevicePlan* plan : plans) {
    slots.insert(slots.end(), plan->stagedSlots.begin(), plan->stagedSlots.end());
  }
  if (slots.empty()) return okStatus();
  if (!capturing) {
    // At enqueue: the proxy polls from now until the kernel has posted and freed these slots.
    staged_->arm(slots);
    return okStatus();
  }
  auto arming = std::make_unique<StagedArming>(StagedArming{staged_.get(), std::move(slots)});
  CUDA_RETURN_IF_ERROR(cudaLaunchHostFunc(stream, armFromGraph, arming.get()));
  capturedArming_.push_back(std::move(arming));
  return okStatus();
}

Status DeviceComm::stagedHealth() const { return staged_ ? staged_->health() : okStatus(); }

Result<const DevicePlan*> DeviceComm::upload(const std::shared_ptr<const Plan>& plan,
                                             bool capturing) {
  auto it = plans_.find(plan.get());
  if (it != plans_.end()) {
    it->second->captured |= capturing;
    return it->second.get();
  }
  RETURN_IF_ERROR(paths_.check(*plan));
  std::vector<gpu::FifoSlotCount> stagedSlots = paths_.stagedSlots(*plan);
  RETURN_IF_ERROR(mapStaged(stagedSlots));
  if (plans_.size() >= kMaxDevicePlans && !capturing) {
    // Work already enqueued may still read the plans being dropped.
    if (haveLastWork_) CUDA_RETURN_IF_ERROR(cudaEventSynchronize(lastWork_.get()));
    for (auto p = plans_.begin(); p != plans_.end();) {
      p = p->second->captured ? std::next(p) : plans_.erase(p);
    }
  }
  // The layout the kernel reads (the host lanes of the tests read the same).
  const gpu::FlatPlan flat = gpu::flattenPlan(*plan);
  const std::vector<gpu::DeviceLane>& lanes = flat.lanes;
  const std::vector<Step>& steps = flat.steps;
  const size_t laneBytes = roundUp(lanes.size() * sizeof(gpu::DeviceLane), 64);
  const size_t stepBytes = steps.size() * sizeof(Step);
  std::vector<char> image(laneBytes + stepBytes);
  std::memcpy(image.data(), lanes.data(), lanes.size() * sizeof(gpu::DeviceLane));
  if (stepBytes > 0) std::memcpy(image.data() + laneBytes, steps.data(), stepBytes);

  auto entry = std::make_unique<DevicePlan>();
  entry->plan = plan;
  entry->stagedSlots = std::move(stagedSlots);
  entry->captured = capturing;
  entry->nlanes = static_cast<uint32_t>(lanes.size());
  ASSIGN_OR_RETURN(entry->memory, DeviceMemory::allocate(image.size()));
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(entry->memory.data(), image.data(), image.size(),
                                       cudaMemcpyHostToDevice, stream_.get()));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
  entry->lanes = reinterpret_cast<const gpu::DeviceLane*>(entry->memory.data());
  entry->steps = reinterpret_cast<const Step*>(entry->memory.data() + laneBytes);
  const DevicePlan* result = entry.get();
  plans_.emplace(plan.get(), std::move(entry));
  return result;
}

Result<char*> DeviceComm::scratch(size_t bytes) {
  if (scratch_.empty() || scratch_.back().size() < bytes) {
    const size_t previous = scratch_.empty() ? 0 : scratch_.back().size();
    ASSIGN_OR_RETURN(DeviceMemory area,
                     DeviceMemory::allocate(std::max(roundUp(bytes, 4096), 2 * previous)));
    scratch_.push_back(std::move(area));
  }
  return scratch_.back().data();
}

gpu::ExecutorArgs DeviceComm::executorArgs() const {
  gpu::ExecutorArgs args;
  args.sendFifos = reinterpret_cast<gpu::DeviceFifo*>(fifoTables_.data());
  args.recvFifos = args.sendFifos + size_t(nranks_) * size_t(maxChannels_);
  args.maxChannels = maxChannels_;
  args.rank = rank_;
  args.control = static_cast<gpu::DeviceControl*>(control_.device());
  args.errorLatch = reinterpret_cast<uint32_t*>(errorLatch_.data());
  args.timeoutNs = timeoutNs_;
  return args;
}

gpu::LlArgs DeviceComm::llArgs() const {
  gpu::LlArgs args;
  args.sendFifos = reinterpret_cast<gpu::LlFifo*>(ringTables_.data());
  args.recvFifos = args.sendFifos + size_t(nranks_) * size_t(maxChannels_);
  return args;
}

Result<CudaEvent> DeviceComm::takeEvent() {
  if (eventPool_.empty()) return CudaEvent::create();
  CudaEvent event = std::move(eventPool_.back());
  eventPool_.pop_back();
  return event;
}

void DeviceComm::giveEvent(CudaEvent event) {
  // A call joins at most a few streams; more than this many pooled events are never reused.
  constexpr size_t kPooledEvents = 16;
  if (event.get() != nullptr && eventPool_.size() < kPooledEvents) {
    eventPool_.push_back(std::move(event));
  }
}

Status DeviceComm::orderAfterEarlier(cudaStream_t stream, bool capturing) {
  // Work on the stream that holds the latest work is ordered after it already: a wait per call
  // there would only add a runtime call to every small call.
  if (capturing || !haveLastWork_ || stream == lastStream_) return okStatus();
  return cudaStatus(cudaStreamWaitEvent(stream, lastWork_.get(), 0),
                    "ordering after the communicator's earlier device work");
}

Status DeviceComm::markLaunched(cudaStream_t stream, bool capturing) {
  if (capturing) return okStatus();
  CUDA_RETURN_IF_ERROR(cudaEventRecord(lastWork_.get(), stream));
  haveLastWork_ = true;
  lastStream_ = stream;
  return okStatus();
}

Status DeviceComm::deviceError() const {
  const auto* live = static_cast<const volatile gpu::DeviceControl*>(control_.host());
  if (live == nullptr) return okStatus();
  const uint32_t code = live->error;
  if (code == gpu::kDeviceOk) return okStatus();
  std::atomic_thread_fence(std::memory_order_acquire);
  gpu::DeviceControl c;
  std::memcpy(&c, const_cast<const gpu::DeviceControl*>(live), sizeof(c));
  const std::string where = "lane " + std::to_string(c.lane) + " step " + std::to_string(c.step);
  switch (code) {
    case gpu::kDeviceCallMismatch:
      return invalidUsage("rank " + std::to_string(c.peer) + " called " +
                          describeCall(c.got, c.peer) + " where rank " + std::to_string(rank_) +
                          " called " + describeCall(c.expected, rank_));
    case gpu::kDeviceBytesMismatch:
      return invalidUsage("rank " + std::to_string(c.peer) + " sent " + std::to_string(c.gotBytes) +
                          " bytes where rank " + std::to_string(rank_) + " expected " +
                          std::to_string(c.expectedBytes) + " (" + where +
                          "; BRAID_CHUNK_BYTES or BRAID_ALGO differ between ranks?)");
    case gpu::kDeviceDigestMismatch:
      return invalidUsage("rank " + std::to_string(c.peer) +
                          " sent a low-latency message of another call or size where rank " +
                          std::to_string(rank_) + " called " + describeCall(c.expected, rank_) +
                          " (" + std::to_string(c.expectedBytes) + " bytes expected, " + where +
                          ")");
    case gpu::kDeviceTimeout:
      return timeoutError("device executor of rank " + std::to_string(rank_) +
                          " made no progress for " +
                          std::to_string(comm_->config().timeoutSeconds) + " s at " + where +
                          " waiting on rank " + std::to_string(c.peer) + " (BRAID_TIMEOUT)");
    case gpu::kDeviceAborted:
      return remoteError("device executor of rank " + std::to_string(rank_) +
                         " stopped: the communicator was aborted or failed");
    default:
      return internalError("device executor of rank " + std::to_string(rank_) + ": " + where +
                           " cannot run (error " + std::to_string(code) + ")");
  }
}

void DeviceComm::abort() {
  auto* live = static_cast<volatile gpu::DeviceControl*>(control_.host());
  if (live == nullptr) return;
  live->abort = 1;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (staged_) staged_->abort();
}

// ---- Registry.

namespace {

struct Entry {
  Bootstrap* bootstrap = nullptr;
  int bound = -1;
  std::unique_ptr<DeviceComm> device;
};

std::mutex gRegistryMutex;
std::unordered_map<DeviceClient*, Entry>& registry() {
  static auto* entries = new std::unordered_map<DeviceClient*, Entry>();
  return *entries;
}

}  // namespace

void registerDeviceCommunicator(DeviceClient* comm, Bootstrap* bootstrap) {
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  registry()[comm].bootstrap = bootstrap;
}

void unregisterDeviceCommunicator(DeviceClient* comm) {
  std::unique_ptr<DeviceComm> device;
  {
    std::lock_guard<std::mutex> lock(gRegistryMutex);
    auto it = registry().find(comm);
    if (it == registry().end()) return;
    device = std::move(it->second.device);
    registry().erase(it);
  }
  device.reset();  // waits for the communicator's device work, outside the lock
}

void bindDevice(DeviceClient* comm, int device) {
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  auto it = registry().find(comm);
  if (it != registry().end()) it->second.bound = device;
}

int deviceOf(DeviceClient* comm) {
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  auto it = registry().find(comm);
  if (it == registry().end()) return -1;
  if (it->second.device) return it->second.device->device();
  return it->second.bound;
}

DeviceComm* findDeviceComm(DeviceClient* comm) {
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  auto it = registry().find(comm);
  return it == registry().end() ? nullptr : it->second.device.get();
}

Status ensureDeviceComms(const std::vector<std::pair<DeviceClient*, int>>& wanted) {
  struct Job {
    DeviceClient* comm;
    Bootstrap* bootstrap;
    int device;
    Result<std::unique_ptr<DeviceComm>> result = internalError("not run");
  };
  std::vector<Job> jobs;
  {
    std::lock_guard<std::mutex> lock(gRegistryMutex);
    for (const auto& [comm, want] : wanted) {
      auto it = registry().find(comm);
      if (it == registry().end() || it->second.bootstrap == nullptr) {
        return internalError("device path: communicator not registered");
      }
      const Entry& e = it->second;
      const int have = e.device ? e.device->device() : e.bound;
      if (want >= 0 && have >= 0 && want != have) {
        return invalidUsage("buffers on CUDA device " + std::to_string(want) +
                            " but the communicator runs on device " + std::to_string(have));
      }
      if (e.device) continue;
      bool queued = false;
      for (const Job& j : jobs) queued |= j.comm == comm;
      if (!queued) jobs.push_back({comm, e.bootstrap, want >= 0 ? want : have});
    }
  }
  if (jobs.empty()) return okStatus();
  for (Job& j : jobs) {
    if (j.device < 0) {
      int current = 0;
      CUDA_RETURN_IF_ERROR(cudaGetDevice(&current));
      j.device = current;
    }
  }
  auto run = [](Job& j) { j.result = DeviceComm::create(*j.comm, *j.bootstrap, j.device); };
  if (jobs.size() == 1) {
    run(jobs[0]);
  } else {
    std::vector<std::thread> threads;
    for (Job& j : jobs) threads.emplace_back([&run, &j] { run(j); });
    for (std::thread& t : threads) t.join();
  }
  Status first;
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  for (Job& j : jobs) {
    if (!j.result.ok()) {
      if (first.ok()) first = j.result.status();
      continue;
    }
    auto it = registry().find(j.comm);
    if (it != registry().end()) it->second.device = std::move(j.result).value();
  }
  return first;
}

}  // namespace braid
