#include "transport/p2p/p2p_transport.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "bootstrap/bootstrap.h"
#include "topology/host_id.h"

namespace braid {
namespace {

constexpr size_t kErrorBytes = 160;

/// Round 1: who each rank is and how its FIFOs are shaped.
struct RankInfo {
  uint64_t hostHash;
  uint64_t pidNamespace;
  int32_t pid;
  int32_t device;
  uint8_t uuid[16];
  uint32_t nslots;
  uint32_t slotBytes;
  uint32_t llLines;
  int32_t maxChannels;
  int32_t failed;
  char error[kErrorBytes];
};

/// Round 3: the exported inbox.
struct InboxExport {
  cudaIpcMemHandle_t handle;
  uint64_t base;
  int32_t failed;
  char error[kErrorBytes];
};

/// Round 4: whether the rank opened everything it sends to.
struct Outcome {
  int32_t failed;
  char error[kErrorBytes];
};

void setError(char (&dst)[kErrorBytes], int32_t& failed, const Status& status) {
  failed = 1;
  std::snprintf(dst, kErrorBytes, "%s", status.message().c_str());
}

/// The first failure some rank reported in an exchanged table, as this rank's error.
template <class Record>
Status firstFailure(const std::vector<Record>& records, const char* stage) {
  for (size_t r = 0; r < records.size(); ++r) {
    if (records[r].failed != 0) {
      std::string text(records[r].error, strnlen(records[r].error, kErrorBytes));
      return Status(braidUnhandledCudaError, std::string("device path ") + stage +
                                                 " failed on rank " + std::to_string(r) + ": " +
                                                 text);
    }
  }
  return okStatus();
}

Status localInfo(const P2pOptions& o, RankInfo& info) {
  info.hostHash = o.hostHash;
  info.pidNamespace = pidNamespaceId();
  info.pid = static_cast<int32_t>(getpid());
  info.device = o.device;
  info.nslots = o.nslots;
  info.slotBytes = o.slotBytes;
  info.llLines = o.llLines;
  info.maxChannels = o.maxChannels;
  cudaDeviceProp props{};
  CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&props, o.device));
  static_assert(sizeof(props.uuid.bytes) == sizeof(info.uuid));
  std::memcpy(info.uuid, props.uuid.bytes, sizeof(info.uuid));
  return okStatus();
}

/// The local ordinal of the GPU with this UUID, or -1 when it is not visible here.
int ordinalOf(const uint8_t (&uuid)[16]) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return -1;
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp props{};
    if (cudaGetDeviceProperties(&props, d) != cudaSuccess) continue;
    if (std::memcmp(props.uuid.bytes, uuid, sizeof(uuid)) == 0) return d;
  }
  return -1;
}

bool sameProcess(const RankInfo& a, const RankInfo& b) {
  return a.pid == b.pid && a.pidNamespace == b.pidNamespace;
}

/// Whether `me` can write into the memory of `peer`'s GPU, and how (or why not).
bool reaches(const P2pOptions& o, const RankInfo& me, const RankInfo& peer, std::string& how) {
  if (!o.allowed) {
    how = "BRAID_TRANSPORT excludes p2p";
    return false;
  }
  if (peer.hostHash != me.hostHash) {
    how = "another host";
    return false;
  }
  const bool process = sameProcess(me, peer);
  if (std::memcmp(me.uuid, peer.uuid, sizeof(me.uuid)) == 0) {
    how = process ? "same GPU, same process" : "same GPU (CUDA IPC)";
    return true;
  }
  const int ordinal = process ? peer.device : ordinalOf(peer.uuid);
  if (ordinal < 0) {
    how = "its GPU is not visible to this process";
    return false;
  }
  int access = 0;
  if (cudaDeviceCanAccessPeer(&access, o.device, ordinal) != cudaSuccess || access == 0) {
    cudaGetLastError();
    how = "no peer access between GPU " + std::to_string(o.device) + " and GPU " +
          std::to_string(ordinal);
    return false;
  }
  how = process ? "peer GPU, same process" : "peer GPU (CUDA IPC)";
  return true;
}

}  // namespace

Result<std::unique_ptr<P2pTransport>> P2pTransport::create(Bootstrap& bootstrap,
                                                           const P2pOptions& options) {
  std::unique_ptr<P2pTransport> t(new P2pTransport());
  t->options_ = options;
  const int n = options.nranks;
  const int me = options.rank;

  // Round 1: identities and FIFO shapes.
  std::vector<RankInfo> info(n);
  std::memset(info.data(), 0, sizeof(RankInfo) * n);
  Status local = options.localFailure.empty()
                     ? localInfo(options, info[me])
                     : Status(braidUnhandledCudaError, options.localFailure);
  if (!local.ok()) setError(info[me].error, info[me].failed, local);
  RETURN_IF_ERROR(bootstrap.allGather(info.data(), sizeof(RankInfo)));
  RETURN_IF_ERROR(firstFailure(info, "set-up"));
  for (int r = 0; r < n; ++r) {
    if (info[r].nslots != options.nslots || info[r].slotBytes != options.slotBytes ||
        info[r].maxChannels != options.maxChannels) {
      return invalidUsage(
          "p2p transport: rank " + std::to_string(r) + " uses " +
          std::to_string(info[r].maxChannels) + " channels of " + std::to_string(info[r].nslots) +
          " slots of " + std::to_string(info[r].slotBytes) + " bytes where rank " +
          std::to_string(me) + " uses " + std::to_string(options.maxChannels) + " of " +
          std::to_string(options.nslots) + " of " + std::to_string(options.slotBytes) +
          " (BRAID_NCHANNELS, BRAID_NSLOTS or BRAID_CHUNK_BYTES differ)");
    }
    if (info[r].llLines != options.llLines) {
      return invalidUsage("p2p transport: rank " + std::to_string(r) +
                          (info[r].llLines != 0 ? " uses" : " does not use") +
                          " the low-latency protocol where rank " + std::to_string(me) +
                          (options.llLines != 0 ? " does" : " does not") +
                          " (BRAID_DEVICE_PROTO differs)");
    }
  }

  // Round 2: who reaches whom.
  t->how_.assign(n, "this rank");
  t->sameGpu_.assign(n, false);
  for (int r = 0; r < n; ++r) {
    t->sameGpu_[r] = std::memcmp(info[r].uuid, info[me].uuid, sizeof(info[me].uuid)) == 0;
  }
  // Only ranks of one host reach each other, so a rank's row covers its host's ranks.
  std::vector<uint64_t> hostOf(size_t(n), 0);
  for (int r = 0; r < n; ++r) hostOf[size_t(r)] = info[r].hostHash;
  t->reach_ = P2pReach(hostOf);
  for (int r = 0; r < n; ++r) {
    if (r != me) t->reach_.set(me, r, reaches(options, info[me], info[r], t->how_[r]));
  }
  const size_t width = size_t(t->reach_.rowBytes());
  std::vector<uint8_t> rows(width * size_t(n), 0);
  const std::vector<int>& hostRanks = t->reach_.hostRanks(me);
  for (size_t i = 0; i < hostRanks.size(); ++i) {
    rows[width * size_t(me) + i] = t->reach_.links(me, hostRanks[i]) ? 1 : 0;
  }
  RETURN_IF_ERROR(bootstrap.allGather(rows.data(), width));
  for (int s = 0; s < n; ++s) t->reach_.setRow(s, rows.data() + width * size_t(s));
  t->layouts_.resize(n);
  for (int r : hostRanks) {
    if (r != me && !t->reach_.links(me, r)) continue;
    t->layouts_[r] = P2pInboxLayout(t->reach_.sendersOf(r), options.maxChannels, options.nslots,
                                    options.slotBytes, options.llLines);
  }

  // Round 3: this rank's inbox, cleared and exported.
  std::vector<InboxExport> exports(n);
  std::memset(exports.data(), 0, sizeof(InboxExport) * n);
  Status made = [&]() -> Status {
    ASSIGN_OR_RETURN(t->inbox_, DeviceMemory::allocate(t->layouts_[me].totalBytes()));
    CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(t->inbox_.data(), 0, t->inbox_.size(), options.setupStream));
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(options.setupStream));
    bool remoteSender = false;
    for (int s : hostRanks) {
      remoteSender |= t->reach_.links(s, me) && !sameProcess(info[s], info[me]);
    }
    if (remoteSender) {
      CUDA_RETURN_IF_ERROR(cudaIpcGetMemHandle(&exports[me].handle, t->inbox_.data()));
    }
    exports[me].base = reinterpret_cast<uint64_t>(t->inbox_.data());
    return okStatus();
  }();
  if (!made.ok()) setError(exports[me].error, exports[me].failed, made);
  RETURN_IF_ERROR(bootstrap.allGather(exports.data(), sizeof(InboxExport)));
  RETURN_IF_ERROR(firstFailure(exports, "allocating inboxes"));

  // Round 4: open what this rank sends to; everyone learns whether everyone succeeded.
  t->peerInbox_.assign(n, nullptr);
  t->opened_.assign(n, false);
  std::vector<Outcome> outcomes(n);
  std::memset(outcomes.data(), 0, sizeof(Outcome) * n);
  Status opened = [&]() -> Status {
    for (int r = 0; r < n; ++r) {
      if (!t->reach_.links(me, r)) continue;
      if (sameProcess(info[r], info[me])) {
        if (info[r].device != options.device) {
          const cudaError_t e = cudaDeviceEnablePeerAccess(info[r].device, 0);
          if (e == cudaErrorPeerAccessAlreadyEnabled) {
            cudaGetLastError();
          } else {
            CUDA_RETURN_IF_ERROR(e);
          }
        }
        t->peerInbox_[r] = reinterpret_cast<char*>(exports[r].base);
        continue;
      }
      void* mapped = nullptr;
      RETURN_IF_ERROR(cudaStatus(
          cudaIpcOpenMemHandle(&mapped, exports[r].handle, cudaIpcMemLazyEnablePeerAccess),
          "cudaIpcOpenMemHandle (inbox of rank " + std::to_string(r) + ")"));
      t->peerInbox_[r] = static_cast<char*>(mapped);
      t->opened_[r] = true;
    }
    return okStatus();
  }();
  if (!opened.ok()) setError(outcomes[me].error, outcomes[me].failed, opened);
  RETURN_IF_ERROR(bootstrap.allGather(outcomes.data(), sizeof(Outcome)));
  RETURN_IF_ERROR(firstFailure(outcomes, "opening peer inboxes"));
  return t;
}

P2pTransport::~P2pTransport() {
  for (size_t r = 0; r < peerInbox_.size(); ++r) {
    if (opened_[r]) cudaIpcCloseMemHandle(peerInbox_[r]);
  }
}

bool P2pTransport::canSend(int peer) const {
  return reach_.links(options_.rank, peer);
}

bool P2pTransport::canRecv(int peer) const { return reach_.links(peer, options_.rank); }

bool P2pTransport::links(int sender, int receiver) const { return reach_.links(sender, receiver); }

std::string P2pTransport::describe(int peer) const {
  if (peer < 0 || peer >= options_.nranks) return "no such rank";
  return how_[peer];
}

gpu::DeviceFifo P2pTransport::fifoAt(char* base, const P2pInboxLayout& layout, int sender,
                                     int channel) {
  char* fifo = base + layout.fifoOffset(sender, channel);
  gpu::DeviceFifo f;
  f.head = reinterpret_cast<uint64_t*>(fifo + P2pInboxLayout::kHeadOffset);
  f.tail = reinterpret_cast<uint64_t*>(fifo + P2pInboxLayout::kTailOffset);
  f.headers = reinterpret_cast<SlotHeader*>(fifo + P2pInboxLayout::kHeadersOffset);
  f.data = fifo + layout.dataOffset();
  f.nslots = layout.nslots();
  f.slotBytes = layout.slotBytes();
  f.count = 0;
  return f;
}

gpu::DeviceFifo P2pTransport::sendFifo(int peer, int channel) const {
  return fifoAt(peerInbox_[peer], layouts_[peer], options_.rank, channel);
}

gpu::DeviceFifo P2pTransport::recvFifo(int peer, int channel) const {
  return fifoAt(inbox_.data(), layouts_[options_.rank], peer, channel);
}

gpu::LlFifo P2pTransport::ringAt(char* base, const P2pInboxLayout& layout, int sender, int channel,
                                 int peer) const {
  gpu::LlFifo f;
  if (layout.llLines() == 0) return f;
  char* fifo = base + layout.fifoOffset(sender, channel);
  f.credits = reinterpret_cast<uint64_t*>(fifo + layout.creditsOffset());
  f.lines = reinterpret_cast<gpu::LlLine*>(fifo + layout.creditsOffset() +
                                           P2pInboxLayout::kLinesAfterCredits);
  f.nlines = layout.llLines();
  f.gpuScope = sameGpu_[peer] ? 1 : 0;
  return f;
}

gpu::LlFifo P2pTransport::sendRing(int peer, int channel) const {
  return ringAt(peerInbox_[peer], layouts_[peer], options_.rank, channel, peer);
}

gpu::LlFifo P2pTransport::recvRing(int peer, int channel) const {
  return ringAt(inbox_.data(), layouts_[options_.rank], peer, channel, peer);
}

}  // namespace braid
