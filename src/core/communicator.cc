#include "core/communicator.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "algorithms/algorithms.h"
#include "base/dtype.h"
#include "device/device_dispatch.h"
#include "executor/wait_report.h"
#include "topology/host_id.h"
#include "topology/locality.h"
#include "topology/ordering.h"
#include "topology/process_topology.h"
#include "transport/network_links.h"
#include "transport/shm/shm_transport.h"
#include "transport/transport_filter.h"
#include "tuner/calibration.h"
#include "tuner/tuner_setup.h"

namespace braid {
namespace {

// Channels set up when BRAID_NCHANNELS does not fix them: FIFOs cost address space, not memory,
// until a plan first uses them.
constexpr int kDefaultMaxChannels = 4;
// A device call's channels are thread blocks: one block moves far less than the GPU's memory
// can, so device calls spread over up to 32 channels, one per 256 KiB of the call, which ran
// best on an H200 (docs/performance-notes.md#channels-of-device-calls).
constexpr int kDefaultDeviceMaxChannels = 32;
constexpr uint64_t kDeviceBytesPerChannel = 256 << 10;
constexpr size_t kPlanCacheEntries = 64;
std::unique_ptr<Logger> makeLogger(const Config& config) {
  return std::make_unique<Logger>(config.debugLevel, config.debugSubsys, config.debugFile);
}

/// "64K=rd, 1M=hier, ...": a device span tuner's all-reduce choices, for the log.
std::string describeDeviceChoices(const DeviceSpanTuner& tuner) {
  std::string text;
  for (uint64_t kib : {64, 1024, 16 << 10, 256 << 10}) {
    const Choice c = tuner.choose(Collective::kAllReduce, kib << 10);
    text += (text.empty() ? "" : ", ") +
            (kib >= 1024 ? std::to_string(kib >> 10) + "M" : std::to_string(kib) + "K") + "=" +
            std::string(algorithmName(c.algo));
  }
  return text;
}

bool isReduction(Collective coll) {
  return coll == Collective::kAllReduce || coll == Collective::kReduce ||
         coll == Collective::kReduceScatter;
}

bool isInPlace(const CallArgs& a, int rank, size_t elemSize) {
  const auto* send = static_cast<const char*>(a.sendbuff);
  const auto* recv = static_cast<const char*>(a.recvbuff);
  switch (a.coll) {
    case Collective::kAllGather: return recv != nullptr && send == recv + rank * a.count * elemSize;
    case Collective::kReduceScatter:
      return send != nullptr && recv == send + rank * a.count * elemSize;
    case Collective::kSend:
    case Collective::kRecv: return false;
    default: return send == recv;
  }
}

}  // namespace

Communicator::Communicator(Config config, std::unique_ptr<Logger> logger)
    : config_(std::move(config)), logger_(std::move(logger)) {}

// Device work (if any) still reads this communicator's state: wait for it first.
Communicator::~Communicator() {
  // A failed communicator's peers no longer read what it posted: the network transports close
  // without flushing, as after an abort, instead of waiting out their flush time for them.
  if (!asyncError().ok()) aborted_.store(true, std::memory_order_release);
  releaseDevice(this);
  // Last made, first destroyed: the network transports stop their proxies before shm's Waker goes.
  while (!transports_.empty()) transports_.pop_back();
  rankWaker_ = &privateWaker_;
}

Result<std::unique_ptr<Communicator>> Communicator::create(const braidUniqueId& id, int nranks,
                                                           int rank, Config config) {
  std::unique_ptr<Logger> logger = makeLogger(config);
  logger->setRank(rank);
  WaitPolicy wait{config.timeoutSeconds, nullptr};
  wait.peerTimeoutSeconds = config.peerTimeoutSeconds;
  PhaseTimer timer;
  // The host key lets the bootstrap's collectives gather through a rank per host.
  ASSIGN_OR_RETURN(std::unique_ptr<Bootstrap> bootstrap,
                   Bootstrap::join(id, rank, nranks, config.socketIfname, wait,
                                   hostHash(hostIdentity(config.hostId))));
  timer.end("join");
  return fromBootstrap(std::move(bootstrap), std::move(config), std::move(logger),
                       std::move(timer));
}

Result<std::unique_ptr<Communicator>> Communicator::fromBootstrap(
    std::unique_ptr<Bootstrap> bootstrap, Config config, std::unique_ptr<Logger> logger,
    PhaseTimer timer) {
  if (config.reportSignal != 0) RETURN_IF_ERROR(enableWaitReportSignal(config.reportSignal));
  std::unique_ptr<Communicator> comm(new Communicator(std::move(config), std::move(logger)));
  comm->bootstrap_ = std::move(bootstrap);
  comm->rank_ = comm->bootstrap_->rank();
  comm->nranks_ = comm->bootstrap_->nranks();
  comm->logger_->setRank(comm->rank_);
  if (Status status = comm->setUp(timer); !status.ok()) {
    // Peers may have finished their part of the set-up and be waiting on this rank in their first
    // call: the transports made so far tell them why it will never come.
    comm->fail(status);
    return status;
  }
  return comm;
}

Status Communicator::setUp(PhaseTimer& timer) {
  TopologyOptions topoOptions;
  topoOptions.xmlFile = config_.topoFile;
  topoOptions.dumpFile = config_.topoDumpFile;
  topoOptions.cacheDir = defaultCalibrationDir();
  ASSIGN_OR_RETURN(std::shared_ptr<const Topology> topology, processTopology(topoOptions));
  timer.end("topology");
  static_assert(sizeof(PeerInfo::locality) == kLocalityWireBytes);

  maxChannels_ = config_.nchannels > 0 ? config_.nchannels : kDefaultMaxChannels;
  deviceMaxChannels_ = config_.nchannels > 0 ? config_.nchannels : kDefaultDeviceMaxChannels;
  TransportContext ctx;
  ctx.bootstrap = bootstrap_.get();
  ctx.config = &config_;
  ctx.logger = logger_.get();
  ctx.rank = rank_;
  ctx.nranks = nranks_;
  ctx.maxChannels = maxChannels_ + 1;  // the algorithms' channels, then the call check's
  ctx.peers = &peers_;

  PeerInfo self;
  self.hostHash = hostHash(hostIdentity(config_.hostId));
  self.pidNamespace = pidNamespaceId();
  self.pid = static_cast<int32_t>(getpid());
  self.rank = rank_;
  gethostname(self.hostName, sizeof(self.hostName) - 1);
  encodeLocality(localLocality(*topology), self.locality);
  // The shared-memory inbox first: its name travels in the exchange below, which spares the
  // transport one of its own.
  ASSIGN_OR_RETURN(std::unique_ptr<ShmTransport> shm, ShmTransport::makeInbox(ctx, self));
  peers_.assign(nranks_, PeerInfo{});
  peers_[rank_] = self;
  RETURN_IF_ERROR(bootstrap_->allGather(peers_.data(), sizeof(PeerInfo))
                      .withContext("exchanging peer information"));
  timer.end("peers");
  if (rank_ == 0) {
    BRAID_LOG(*logger_, kInfo, kTopo, "%s", topology->summary().c_str());
  }

  // Rings and trees follow the hardware: hosts contiguous, then sockets, NUMA nodes, switches.
  std::vector<RankPlacement> placements(nranks_);
  for (int r = 0; r < nranks_; ++r) {
    placements[r].hostHash = peers_[r].hostHash;
    placements[r].locality = decodeLocality(peers_[r].locality);
  }
  ring_ = orderRanks(placements);
  bool identity = true;
  for (int r = 0; r < nranks_; ++r) identity &= ring_[r] == r;
  if (identity) ring_.clear();

  // The network transports' exchange is the barrier shm needs after mapping its peers' inboxes
  // (and the transports follow shm's reach), which spares a barrier of its own.
  ShmTransport& shmTransport = *shm;
  rankWaker_ = shm->waker();
  transports_.push_back(std::move(shm));
  NetworkLinks links;
  RETURN_IF_ERROR(shmTransport.connect(ctx, [&]() -> Status {
    timer.end("shm");
    ASSIGN_OR_RETURN(links, setUpNetwork(ctx, shmTransport));
    return okStatus();
  }));
  timer.end("network");
  if (config_.callCheck != 0 && nranks_ > 1) {
    // Connections are made on first use, but the call check's descriptors trail the calls: a
    // rank's last ones may reach a successor that has finished, destroyed its communicator and
    // stopped accepting. Linked now, before the all-gathers below that no rank passes until every
    // rank has linked, the successor reads them while it lingers at destruction.
    PlanRequest ringOnly;
    ringOnly.nranks = nranks_;
    ringOnly.ring = ring_;
    RETURN_IF_ERROR(connectors_.send(ringNeighbour(ringOnly, rank_, 1), maxChannels_)
                        .status()
                        .withContext("connecting the call check's successor"));
    timer.end("call check");
  }
  TunerContext tunerContext;
  tunerContext.config = &config_;
  tunerContext.logger = logger_.get();
  tunerContext.bootstrap = bootstrap_.get();
  tunerContext.topology = topology.get();
  tunerContext.placements = std::move(placements);
  tunerContext.ring = ring_;
  tunerContext.rank = rank_;
  tunerContext.maxChannels = maxChannels_;
  tunerContext.rdmaBetweenHosts = links.rdmaBetweenHosts;
  tunerContext.calibrationDir = defaultCalibrationDir();
  ASSIGN_OR_RETURN(tuner_, setUpTuner(tunerContext, &tunerHost_));
  timer.end("tuner");
  sendSeq_.assign(nranks_, 0);
  recvSeq_.assign(nranks_, 0);
  PlanRequest ringOnly;
  ringOnly.nranks = nranks_;
  ringOnly.ring = ring_;
  const bool waitForChecks = config_.callCheck == 2;
  callChecks_.configure(rank_, nranks_ > 1 ? ringNeighbour(ringOnly, rank_, -1) : -1,
                        nranks_ > 1 ? ringNeighbour(ringOnly, rank_, 1) : -1,
                        waitForChecks ? 0 : CallCheckLedger::kDefaultMaxLag,
                        waitForChecks ? 1 : CallCheckLedger::kDefaultBatch);
  BRAID_LOG(*logger_, kInfo, kInit,
            "rank %d/%d pid %d on %s: %s, %d channels, %d slots of %u bytes", rank_, nranks_,
            self.pid, self.hostName, links.summary.c_str(), maxChannels_, config_.nslots,
            config_.slotBytes);
  BRAID_LOG(*logger_, kInfo, kInit, "rank %d init timings, ms (process CPU): %s", rank_,
            timer.summary().c_str());
  if (rank_ == 0) {
    std::string order = "identity";
    if (!ring_.empty()) {
      order.clear();
      for (int r : ring_) order += std::to_string(r) + " ";
    }
    BRAID_LOG(*logger_, kInfo, kTune, "ring order: %s; choices: %s", order.c_str(),
              tuner_.describe().c_str());
  }
  attachDeviceBootstrap(this, bootstrap_.get());  // for a later device set-up
  return okStatus();
}

Result<Communicator::NetworkLinks> Communicator::setUpNetwork(TransportContext ctx,
                                                              Transport& shm) {
  ASSIGN_OR_RETURN(const TransportFilter filter, TransportFilter::parse(config_.transport));
  ctx.rankWaker = waker();
  ctx.abort = &aborted_;
  const uint64_t myHost = peers_[rank_].hostHash;
  std::vector<uint64_t> hosts;
  hostIndex_.assign(nranks_, 0);
  for (int r = 0; r < nranks_; ++r) {
    auto it = std::find(hosts.begin(), hosts.end(), peers_[r].hostHash);
    hostIndex_[r] = static_cast<int>(it - hosts.begin());
    if (it == hosts.end()) hosts.push_back(peers_[r].hostHash);
  }
  // Every transport factory runs on every rank (each is collective), whatever it links.
  const bool shmAllowed = filter.allows(TransportKind::kShm);
  auto viaShm = [&](int p) { return shmAllowed && shm.canConnect(p); };
  auto remote = [&](int p) { return peers_[p].hostHash != myHost; };
  std::vector<bool> wantIb(nranks_, false);
  std::vector<bool> wantSocket(nranks_, false);
  bool anyRemote = false;
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    anyRemote |= remote(p);
    wantIb[p] = filter.allows(TransportKind::kIb) && (remote(p) || !shmAllowed);
    wantSocket[p] = filter.allows(TransportKind::kSocket) && !viaShm(p);
  }
  // One exchange for both: TCP takes the pairs it is wanted for that RDMA does not link.
  ASSIGN_OR_RETURN(NetworkTransports made, createNetworkTransports(ctx, wantIb, wantSocket));
  IbTransport& ib = *made.ib;
  SocketTransport& socket = *made.socket;
  transports_.push_back(std::move(made.ib));
  transports_.push_back(std::move(made.socket));
  const bool ibMissing = filter.allows(TransportKind::kIb) && !ib.unavailableReason().empty();
  if (ibMissing && anyRemote) {
    BRAID_LOG(*logger_, kInfo, kNet, "RDMA transport unavailable (%s): TCP sockets instead",
              ib.unavailableReason().c_str());
  }

  NetworkLinks links;
  std::vector<Transport*> transports(nranks_, nullptr);
  int viaShmCount = 0, viaSocket = 0, viaIb = 0;
  // Why a peer goes over its transport, for a trace line: a line a peer is n lines a rank.
  auto reason = [&](int p, const Transport* t) -> std::string {
    if (t == &ib) {
      return remote(p) ? "another host, " + ib.deviceDescription() : "BRAID_TRANSPORT excludes shm";
    }
    if (t == &socket) {
      if (!wantSocket[p]) return "rank " + std::to_string(p) + " asked for TCP";
      if (remote(p)) return ibMissing ? "another host, no RDMA" : "another host";
      return shmAllowed ? "shared memory unreachable" : "BRAID_TRANSPORT excludes shm";
    }
    return "same host";
  };
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    if (ib.canConnect(p)) {
      transports[p] = &ib;
      ++viaIb;
      links.rdmaBetweenHosts |= remote(p);
    } else if (socket.canConnect(p)) {
      transports[p] = &socket;
      ++viaSocket;
    } else if (viaShm(p)) {
      transports[p] = &shm;
      ++viaShmCount;
    } else {
      BRAID_LOG(*logger_, kWarn, kInit,
                "no transport reaches rank %d on host %s (BRAID_TRANSPORT=%s): collectives "
                "involving it will fail",
                p, peers_[p].hostName, filter.describe().c_str());
      continue;
    }
    BRAID_LOG(*logger_, kTrace, kInit, "rank %d -> rank %d on %s: %s (%s)", rank_, p,
              peers_[p].hostName, transports[p]->name().data(), reason(p, transports[p]).c_str());
  }
  connectors_ = ConnectorTable(rank_, maxChannels_ + 1, std::move(transports));
  links.summary = "shm to " + std::to_string(viaShmCount) + ", socket to " +
                  std::to_string(viaSocket) + ", ib to " + std::to_string(viaIb) + " peers over " +
                  std::to_string(hosts.size()) + " hosts";
  return links;
}

Result<std::unique_ptr<Communicator>> Communicator::split(int color, int key) {
  PhaseTimer timer;
  ASSIGN_OR_RETURN(SplitResult result, bootstrap_->split(color, key));
  if (result.bootstrap == nullptr) return std::unique_ptr<Communicator>();
  timer.end("split");
  return fromBootstrap(std::move(result.bootstrap), config_, makeLogger(config_), std::move(timer));
}

Result<std::unique_ptr<Communicator>> Communicator::shrink(const std::vector<int>& excluded) {
  PhaseTimer timer;
  ASSIGN_OR_RETURN(std::unique_ptr<Bootstrap> bootstrap, bootstrap_->shrink(excluded));
  timer.end("shrink");
  return fromBootstrap(std::move(bootstrap), config_, makeLogger(config_), std::move(timer));
}

size_t Communicator::PlanKeyHash::operator()(const PlanRequest& r) const {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  mix(static_cast<uint64_t>(r.coll));
  mix(static_cast<uint64_t>(r.algo));
  mix(static_cast<uint64_t>(r.root));
  mix(static_cast<uint64_t>(r.peer));
  mix(r.count);
  mix(r.elemSize);
  mix(r.inPlace);
  mix(r.chunkBytes);
  mix(static_cast<uint64_t>(r.nchannels));
  return h;
}

Result<std::shared_ptr<const Plan>> Communicator::plan(const PlanRequest& request, bool onDevice) {
  auto& cache = onDevice ? devicePlanCache_ : planCache_;
  auto it = cache.find(request);
  if (it != cache.end()) return it->second;
  ASSIGN_OR_RETURN(Plan built, buildPlan(request));
  // Every call that exchanges data also checks itself against its ring neighbours' (or its
  // peer's) on a channel of its own, so that a mismatch fails whatever route the data takes.
  // It costs one empty slot per call; BRAID_CALL_CHECK=0 turns it off (the same on every rank).
  if (config_.callCheck != 0) {
    addCallCheckLane(built, request, onDevice ? deviceMaxChannels_ : maxChannels_);
  }
  built.sendWindow = sendWindowFor(built, config_.fifoBytes);
  markLendableSends(built, request);
  BRAID_LOG(*logger_, kTrace, kColl, "planned %s", describePlan(built).c_str());
  if (cache.size() >= kPlanCacheEntries) cache.clear();
  auto shared = std::make_shared<const Plan>(std::move(built));
  cache.emplace(request, shared);
  return shared;
}

void Communicator::setDeviceIslands(const std::vector<int>& islandOf) {
  std::unique_ptr<DeviceSpanTuner> made;
  if (DeviceSpanTuner::spansIslands(islandOf)) {
    TunerOptions options = TunerOptions::fromConfig(config_, nranks_, deviceMaxChannels_);
    Result<std::unique_ptr<DeviceSpanTuner>> tuner =
        DeviceSpanTuner::create(options, config_.nchannels > 0 ? 0 : kDeviceBytesPerChannel,
                                islandOf, ring_, DeviceLinkCosts::withNetworkOf(tunerHost_));
    if (tuner.ok()) {
      made = std::move(tuner).value();
      if (rank_ == 0) {
        BRAID_LOG(*logger_, kInfo, kTune, "device calls span GPU islands: %s; all-reduce: %s",
                  made->describe().c_str(), describeDeviceChoices(*made).c_str());
      }
    } else {
      // Only a BRAID_ALGO the host tuner took already could fail here: keep the host choices.
      BRAID_LOG(*logger_, kWarn, kTune, "device calls keep the host tuner's choices: %s",
                tuner.status().message().c_str());
    }
  }
  deviceSpanTuner_ = std::move(made);
  // Device calls planned before (none, in practice: the islands come at device set-up) go again.
  for (RecentChoice& recent : recentChoice_) {
    if (recent.onDevice) recent.valid = false;
  }
  for (RecentPlan& recent : recentPlan_) {
    if (recent.key.onDevice) recent.plan = nullptr;
  }
  devicePlanCache_.clear();
}

Choice Communicator::choose(Collective coll, uint64_t bytes, bool onDevice) const {
  if (onDevice && deviceSpanTuner_ && DeviceSpanTuner::models(coll)) {
    return deviceSpanTuner_->choose(coll, bytes);
  }
  return tuner_.choose(coll, bytes);
}

int Communicator::deviceChannels(const Choice& choice, uint64_t bytes) const {
  // Channels the user fixed (BRAID_NCHANNELS) stay as they are; BRAID_ALGO names only the
  // algorithm.
  if (config_.nchannels > 0) return choice.nchannels;
  const uint64_t wanted = bytes / kDeviceBytesPerChannel;
  return static_cast<int>(
      std::clamp<uint64_t>(wanted, uint64_t(choice.nchannels), uint64_t(deviceMaxChannels_)));
}

Status Communicator::replan(const CallArgs& args, const CallKey& key, size_t elemSize,
                            RecentPlan& recentPlan) {
  const uint64_t bytes = args.count * elemSize;
  RecentChoice& recent = recentChoice_[static_cast<int>(args.coll)];
  if (!recent.valid || recent.bytes != bytes || recent.onDevice != args.onDevice) {
    recent = RecentChoice{bytes, choose(args.coll, bytes, args.onDevice), true, args.onDevice};
    if (args.onDevice) recent.choice.nchannels = deviceChannels(recent.choice, bytes);
  }
  const Choice choice = recent.choice;

  PlanRequest request;
  request.coll = args.coll;
  request.algo = choice.algo;
  request.nranks = nranks_;
  request.rank = rank_;
  request.count = args.count;
  request.elemSize = static_cast<uint32_t>(elemSize);
  request.inPlace = key.inPlace;
  request.chunkBytes = choice.chunkBytes;
  request.nchannels = choice.nchannels;
  if (args.coll == Collective::kSend || args.coll == Collective::kRecv) {
    request.peer = args.root;
  } else {
    request.root = args.root;
  }
  request.ring = ring_;
  if (algorithmUsesHosts(choice.algo)) {
    // Device calls over GPU islands group by island: inside one the hops stay in GPU memory.
    request.hosts = args.onDevice && deviceSpanTuner_ ? deviceSpanTuner_->islands() : hostIndex_;
  }
  ASSIGN_OR_RETURN(recentPlan.plan, plan(request, args.onDevice));
  const kernels::Reducer& last = recentPlan.reducer;
  if (last.type() != args.dtype || last.op() != key.op || last.nranks() != nranks_) {
    recentPlan.reducer = kernels::Reducer(args.dtype, key.op, nranks_);
  }
  recentPlan.key = key;
  recentPlan.algo = choice.algo;
  return okStatus();
}

Result<PreparedCall> Communicator::prepare(const CallArgs& args, bool share) {
  const size_t elemSize = dataTypeSize(args.dtype);
  const braidRedOp_t op = isReduction(args.coll) ? args.op : braidSum;
  const CallKey key{args.count,   args.dtype, op, args.root, isInPlace(args, rank_, elemSize),
                    args.onDevice};
  // Training loops repeat the same calls: a call like the last one of its collective reuses its
  // plan and reduction kernels as they are.
  RecentPlan& recentPlan = recentPlan_[static_cast<int>(args.coll)];
  if (recentPlan.plan == nullptr || !(recentPlan.key == key)) {
    RETURN_IF_ERROR(replan(args, key, elemSize, recentPlan));
  }
  // Built whole: a default Reducer would look up its kernels only to be overwritten.
  PreparedCall prepared{
      .plan = recentPlan.plan.get(),
      .owner = share ? recentPlan.plan : nullptr,
      .buffers = {static_cast<const char*>(args.sendbuff), static_cast<char*>(args.recvbuff)},
      .reducer = recentPlan.reducer,
      .call = {},
  };

  CallDescriptor& call = prepared.call;
  call.dtype = static_cast<uint8_t>(args.dtype);
  call.op = isReduction(args.coll) ? static_cast<uint8_t>(args.op) : 0;
  call.algo = static_cast<uint8_t>(recentPlan.algo);
  call.count = args.count;
  switch (args.coll) {
    case Collective::kSend:
      // Both ends describe the transfer the same way: a send to the receiving rank.
      call.coll = static_cast<uint8_t>(Collective::kSend);
      call.root = args.root;
      call.from = rank_;
      call.seq = sendSeq_[args.root]++;
      break;
    case Collective::kRecv:
      call.coll = static_cast<uint8_t>(Collective::kSend);
      call.root = rank_;
      call.from = args.root;
      call.seq = recvSeq_[args.root]++;
      break;
    default:
      call.coll = static_cast<uint8_t>(args.coll);
      call.root = (args.coll == Collective::kBroadcast || args.coll == Collective::kReduce)
                      ? args.root
                      : -1;
      call.seq = collSeq_++;
      if (config_.callCheck != 0) callChecks_.record(call);
      break;
  }
  return prepared;
}

Result<char*> Communicator::scratch(size_t bytes) {
  if (bytes > scratchBytes_) {
    void* p = nullptr;
    if (posix_memalign(&p, 4096, bytes) != 0) {
      return systemError("cannot allocate " + std::to_string(bytes) + " bytes of scratch");
    }
    scratch_.reset(static_cast<char*>(p));
    scratchBytes_ = bytes;
  }
  return scratch_.get();
}

Status Communicator::health() {
  if (aborted()) return invalidUsage("the communicator was aborted (braidCommAbort)");
  {
    std::lock_guard<std::mutex> lock(errorMutex_);
    if (!asyncError_.ok()) return asyncError_;
  }
  for (const std::unique_ptr<Transport>& transport : transports_) {
    if (std::optional<Status> failure = transport->failure()) {
      fail(*failure);
      return *failure;
    }
  }
  return okStatus();
}

Status Communicator::jobHealth() {
  RETURN_IF_ERROR(health());
  RETURN_IF_ERROR(checkLinks());
  // This rank's own descriptors held back go to its successor, which may be waiting on them.
  if (callChecks_.hasQueued()) callChecks_.trySendQueued();
  if (callChecks_.hasPending()) {
    // Checks the last calls left outstanding (a broadcast root's, say), unless a call in
    // progress on another thread holds them: it takes them itself.
    Status mismatch = callChecks_.tryDrain(/*useHistory=*/false);
    if (!mismatch.ok()) {
      fail(mismatch);
      return mismatch;
    }
  }
  if (std::optional<PeerFailure> f = peerFailure(kAnyPeer)) {
    fail(f->status);
    return f->status;
  }
  return okStatus();
}

std::optional<PeerFailure> Communicator::peerFailure(int peer) {
  std::optional<PeerFailure> found;
  for (const std::unique_ptr<Transport>& transport : transports_) {
    std::optional<PeerFailure> f = transport->peerFailure(peer);
    if (f && (!found || f->collectivesDone < found->collectivesDone)) found = std::move(f);
  }
  return found;
}

bool Communicator::peerAlive(int peer) {
  for (const std::unique_ptr<Transport>& transport : transports_) {
    if (!transport->peerAlive(peer)) return false;
  }
  return true;
}

std::string Communicator::describePeer(int peer) const {
  if (peer < 0 || peer >= nranks_) return "rank " + std::to_string(peer);
  return "rank " + std::to_string(peer) + " (pid " + std::to_string(peers_[peer].pid) + " on " +
         peers_[peer].hostName + ")";
}

std::string Communicator::describeLoss(int peer) {
  for (const std::unique_ptr<Transport>& transport : transports_) {
    if (transport->peerAlive(peer)) continue;
    if (transport->name() == "shm") return describePeer(peer) + " exited";
    return describePeer(peer) + " dropped its " + std::string(transport->name()) +
           " connections (its process exited, or its host went down or stopped answering)";
  }
  return describePeer(peer) + " exited";
}

Status Communicator::checkLinks() {
  if (bootstrap_ == nullptr) return okStatus();
  const std::optional<int> silent = bootstrap_->unansweringPeer();
  if (!silent) return okStatus();
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%g", config_.peerTimeoutSeconds);
  Status status = remoteError(describePeer(*silent) + " stopped answering for " + seconds +
                              " s (BRAID_PEER_TIMEOUT): its host is down or cut off");
  fail(status);
  return status;
}

Waker* Communicator::waker() { return rankWaker_; }

std::string Communicator::who() const {
  return "rank " + std::to_string(rank_) + "/" + std::to_string(nranks_);
}

void Communicator::abort() {
  aborted_.store(true, std::memory_order_release);
  // Peers waiting on this rank, now or in their next call, learn why instead of timing out.
  fail(remoteError(who() + " aborted the communicator (braidCommAbort)"));
  abortDevice(this);
  Waker* w = waker();
  w->sleeping.store(1);
  wakeIfSleeping(w);
}

void Communicator::fail(const Status& status) {
  Status first;
  bool isFirst = false;
  {
    std::lock_guard<std::mutex> lock(errorMutex_);
    isFirst = asyncError_.ok();
    if (isFirst) asyncError_ = status;
    first = asyncError_;
    failed_.store(true, std::memory_order_release);
  }
  if (isFirst)
    BRAID_LOG(*logger_, kWarn, kColl, "communicator failed: %s", status.message().c_str());
  // Peers see a mismatch as what it is; anything else on this rank is, to them, a remote failure.
  // Every path that fails tells the peers (the transports keep the first notice), so a rank that
  // learnt of a failure passes it on to the ranks blocked on it.
  PeerFailure notice;
  notice.status =
      Status(first.code() == braidInvalidUsage && !aborted() ? braidInvalidUsage : braidRemoteError,
             first.message());
  notice.collectivesDone = deviceCallsUsed_.load(std::memory_order_relaxed)
                               ? 0
                               : collectivesDone_.load(std::memory_order_relaxed);
  for (const std::unique_ptr<Transport>& transport : transports_) {
    transport->notifyFailure(rank_, notice);
  }
}

Status Communicator::asyncError() const {
  if (!failed_.load(std::memory_order_acquire)) return okStatus();
  std::lock_guard<std::mutex> lock(errorMutex_);
  return asyncError_;
}

}  // namespace braid
