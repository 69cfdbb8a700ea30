#include "core/communicator.h"

#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "algorithms/algorithms.h"
#include "core/dtype.h"
#include "topology/host_id.h"
#include "topology/locality.h"
#include "topology/ordering.h"
#include "topology/process_topology.h"

namespace braid {
namespace {

// Channels set up when BRAID_NCHANNELS does not fix them: FIFOs cost address space, not memory,
// until a plan first uses them.
constexpr int kDefaultMaxChannels = 4;
constexpr size_t kPlanCacheEntries = 64;
std::unique_ptr<Logger> makeLogger(const Config& config) {
  return std::make_unique<Logger>(config.debugLevel, config.debugSubsys, config.debugFile);
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

Communicator::~Communicator() = default;

Result<std::unique_ptr<Communicator>> Communicator::create(const braidUniqueId& id, int nranks,
                                                           int rank, Config config) {
  std::unique_ptr<Logger> logger = makeLogger(config);
  logger->setRank(rank);
  WaitPolicy wait{config.timeoutSeconds, nullptr};
  ASSIGN_OR_RETURN(std::unique_ptr<Bootstrap> bootstrap,
                   Bootstrap::join(id, rank, nranks, config.socketIfname, wait));
  return fromBootstrap(std::move(bootstrap), std::move(config), std::move(logger));
}

Result<std::unique_ptr<Communicator>> Communicator::fromBootstrap(
    std::unique_ptr<Bootstrap> bootstrap, Config config, std::unique_ptr<Logger> logger) {
  std::unique_ptr<Communicator> comm(new Communicator(std::move(config), std::move(logger)));
  comm->bootstrap_ = std::move(bootstrap);
  comm->rank_ = comm->bootstrap_->rank();
  comm->nranks_ = comm->bootstrap_->nranks();
  comm->logger_->setRank(comm->rank_);
  RETURN_IF_ERROR(comm->setUp());
  return comm;
}

Status Communicator::setUp() {
  TopologyOptions topoOptions;
  topoOptions.xmlFile = config_.topoFile;
  topoOptions.dumpFile = config_.topoDumpFile;
  ASSIGN_OR_RETURN(std::shared_ptr<const Topology> topology, processTopology(topoOptions));
  static_assert(sizeof(PeerInfo::locality) == kLocalityWireBytes);

  PeerInfo self;
  self.hostHash = hostHash(hostIdentity(config_.hostId));
  self.pidNamespace = pidNamespaceId();
  self.pid = static_cast<int32_t>(getpid());
  self.rank = rank_;
  gethostname(self.hostName, sizeof(self.hostName) - 1);
  encodeLocality(localLocality(*topology), self.locality);
  peers_.assign(nranks_, PeerInfo{});
  peers_[rank_] = self;
  RETURN_IF_ERROR(bootstrap_->allGather(peers_.data(), sizeof(PeerInfo))
                      .withContext("exchanging peer information"));
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

  maxChannels_ = config_.nchannels > 0 ? config_.nchannels : kDefaultMaxChannels;
  TransportContext ctx;
  ctx.bootstrap = bootstrap_.get();
  ctx.config = &config_;
  ctx.logger = logger_.get();
  ctx.rank = rank_;
  ctx.nranks = nranks_;
  ctx.maxChannels = maxChannels_;
  ctx.peers = &peers_;
  ASSIGN_OR_RETURN(shm_, ShmTransport::create(ctx));

  std::vector<Transport*> transports(nranks_, nullptr);
  int viaShm = 0;
  for (int peer = 0; peer < nranks_; ++peer) {
    if (peer == rank_) continue;
    if (shm_->canConnect(peer)) {
      transports[peer] = shm_.get();
      ++viaShm;
    } else {
      BRAID_LOG(*logger_, kWarn, kInit,
                "no transport reaches rank %d on host %s: collectives involving it will fail",
                peer, peers_[peer].hostName);
    }
  }
  connectors_ = ConnectorTable(rank_, maxChannels_, std::move(transports));
  ASSIGN_OR_RETURN(tuner_, Tuner::create(config_, nranks_, maxChannels_, config_.slotBytes));
  sendSeq_.assign(nranks_, 0);
  recvSeq_.assign(nranks_, 0);
  BRAID_LOG(*logger_, kInfo, kInit,
            "rank %d/%d pid %d on %s: shm to %d peers, %d channels, %d slots of %u bytes", rank_,
            nranks_, self.pid, self.hostName, viaShm, maxChannels_, config_.nslots,
            config_.slotBytes);
  if (rank_ == 0) {
    std::string order = "identity";
    if (!ring_.empty()) {
      order.clear();
      for (int r : ring_) order += std::to_string(r) + " ";
    }
    BRAID_LOG(*logger_, kInfo, kTune, "ring order: %s; choices: %s", order.c_str(),
              tuner_.describe().c_str());
  }
  return okStatus();
}

Result<std::unique_ptr<Communicator>> Communicator::split(int color, int key) {
  ASSIGN_OR_RETURN(SplitResult result, bootstrap_->split(color, key));
  if (result.bootstrap == nullptr) return std::unique_ptr<Communicator>();
  return fromBootstrap(std::move(result.bootstrap), config_, makeLogger(config_));
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

Result<std::shared_ptr<const Plan>> Communicator::plan(const PlanRequest& request) {
  auto it = planCache_.find(request);
  if (it != planCache_.end()) return it->second;
  ASSIGN_OR_RETURN(Plan built, buildPlan(request));
  BRAID_LOG(*logger_, kTrace, kColl, "planned %s", describePlan(built).c_str());
  if (planCache_.size() >= kPlanCacheEntries) planCache_.clear();
  auto shared = std::make_shared<const Plan>(std::move(built));
  planCache_.emplace(request, shared);
  return shared;
}

Result<PreparedCall> Communicator::prepare(const CallArgs& args) {
  const size_t elemSize = dataTypeSize(args.dtype);
  const Choice choice = tuner_.choose(args.coll, args.count * elemSize);

  PlanRequest request;
  request.coll = args.coll;
  request.algo = choice.algo;
  request.nranks = nranks_;
  request.rank = rank_;
  request.count = args.count;
  request.elemSize = static_cast<uint32_t>(elemSize);
  request.inPlace = isInPlace(args, rank_, elemSize);
  request.chunkBytes = choice.chunkBytes;
  request.nchannels = choice.nchannels;
  request.ring = ring_;
  if (args.coll == Collective::kSend || args.coll == Collective::kRecv) {
    request.peer = args.root;
  } else {
    request.root = args.root;
  }

  PreparedCall prepared;
  ASSIGN_OR_RETURN(prepared.plan, plan(request));
  prepared.buffers.input = static_cast<const char*>(args.sendbuff);
  prepared.buffers.output = static_cast<char*>(args.recvbuff);
  prepared.reducer = kernels::Reducer(args.dtype, isReduction(args.coll) ? args.op : braidSum,
                                      nranks_);

  CallDescriptor& call = prepared.call;
  call.dtype = static_cast<uint8_t>(args.dtype);
  call.op = isReduction(args.coll) ? static_cast<uint8_t>(args.op) : 0;
  call.algo = static_cast<uint8_t>(choice.algo);
  call.count = args.count;
  switch (args.coll) {
    case Collective::kSend:
      // Both ends describe the transfer the same way: a send to the receiving rank.
      call.coll = static_cast<uint8_t>(Collective::kSend);
      call.root = args.root;
      call.seq = sendSeq_[args.root]++;
      break;
    case Collective::kRecv:
      call.coll = static_cast<uint8_t>(Collective::kSend);
      call.root = rank_;
      call.seq = recvSeq_[args.root]++;
      break;
    default:
      call.coll = static_cast<uint8_t>(args.coll);
      call.root = (args.coll == Collective::kBroadcast || args.coll == Collective::kReduce)
                      ? args.root
                      : -1;
      call.seq = collSeq_++;
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
  if (shm_) {
    if (std::optional<Status> failure = shm_->receivedFailure()) {
      fail(*failure);
      return *failure;
    }
  }
  return okStatus();
}

bool Communicator::peerAlive(int peer) { return shm_ == nullptr || shm_->peerAlive(peer); }

std::string Communicator::describePeer(int peer) const {
  if (peer < 0 || peer >= nranks_) return "rank " + std::to_string(peer);
  return "rank " + std::to_string(peer) + " (pid " + std::to_string(peers_[peer].pid) + " on " +
         peers_[peer].hostName + ")";
}

Waker* Communicator::waker() { return shm_ ? shm_->waker() : &privateWaker_; }

std::string Communicator::who() const {
  return "rank " + std::to_string(rank_) + "/" + std::to_string(nranks_);
}

void Communicator::abort() {
  aborted_.store(true, std::memory_order_release);
  Waker* w = waker();
  w->sleeping.store(1);
  wakeIfSleeping(w);
}

void Communicator::fail(const Status& status) {
  {
    std::lock_guard<std::mutex> lock(errorMutex_);
    if (!asyncError_.ok()) return;
    asyncError_ = status;
  }
  BRAID_LOG(*logger_, kWarn, kColl, "communicator failed: %s", status.message().c_str());
  // Peers see a mismatch as what it is; anything else on this rank is, to them, a remote failure.
  const braidResult_t peerCode =
      status.code() == braidInvalidUsage && !aborted() ? braidInvalidUsage : braidRemoteError;
  if (shm_) shm_->notifyFailure(rank_, peerCode, status.message());
}

Status Communicator::asyncError() const {
  std::lock_guard<std::mutex> lock(errorMutex_);
  return asyncError_;
}

}  // namespace braid
