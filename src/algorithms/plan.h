// The Plan: what one rank does in one collective, as pure data.
//
// An algorithm never touches a transport or a pointer. It turns a PlanRequest (collective, ranks,
// count, chunking, ring order) into lanes of Steps. Each lane is a sequence executed in order;
// lanes progress concurrently and never share a connector. A step moves at most one FIFO slot per
// peer, so a plan for a large message is chunk-major: ring step after ring step for chunk 0, then
// the same for chunk 1, ... which is what lets consecutive ranks work on consecutive chunks at
// once.
//
// Buffers are named, not addressed: Input (the caller's sendbuff), Output (recvbuff) and Scratch (a
// communicator-owned area of scratchBytes). Offsets and sizes are bytes and always whole elements.
// The host executor, the device executor and the plan simulator in the tests all interpret the
// same steps, so a plan proven by the simulator is the plan that runs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace braid {

enum class Collective : uint8_t {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kSend,  ///< one point-to-point send (each braidSend is its own plan)
  kRecv,  ///< one point-to-point receive
};
constexpr int kNumCollectives = 8;

/// "allreduce", "broadcast", ... as braid-perf and BRAID_ALGO spell them.
std::string_view collectiveName(Collective coll);

enum class BufferId : uint8_t { kNone, kInput, kOutput, kScratch };

/// A byte offset into one of the named buffers.
struct BufferRef {
  BufferId buffer = BufferId::kNone;
  uint64_t offset = 0;

  bool operator==(const BufferRef&) const = default;
};

/// The step vocabulary. "recv" is the data arriving from every recv peer, "⊕" the reduction,
/// "send" the slot written to every send peer. Dependent steps compute their send from what they
/// received; the two SendRecv steps have independent halves that progress separately.
enum class StepOp : uint8_t {
  kSend,                ///< send ← src
  kRecv,                ///< dst ← recv
  kRecvReduceSend,      ///< send ← recv ⊕ src
  kRecvReduceCopy,      ///< dst ← recv ⊕ src
  kRecvCopySend,        ///< dst, send ← recv
  kRecvReduceCopySend,  ///< dst, send ← recv ⊕ src
  kCopySend,            ///< dst, send ← src
  kLocalCopy,           ///< dst ← src
  kLocalReduce,         ///< dst ← src ⊕ src2
  kSendRecv,            ///< send ← src; independently dst ← recv
  kSendRecvReduce,      ///< send ← src; independently dst ← recv ⊕ src2
};

std::string_view stepOpName(StepOp op);

/// What each op reads and writes; the executors and the simulator interpret steps through this.
struct StepShape {
  bool recvs;        ///< takes one slot from each recv peer
  bool sends;        ///< fills one slot for each send peer
  bool readsSrc;     ///< reads src
  bool readsSrc2;    ///< reads src2 (the local reduce operand of LocalReduce / SendRecvReduce)
  bool writesDst;    ///< writes dst
  bool reduces;      ///< combines its inputs with the reduction op
  bool independent;  ///< the send half does not depend on the recv half
};
StepShape stepShape(StepOp op);

constexpr int kMaxStepPeers = 3;

/// Flags on a step.
enum StepFlags : uint8_t {
  kStepFinalize = 1,  ///< apply the op's post-processing (Avg: divide by nranks) to the result
  /// A call check (makeCallCheck): a Send, Recv or SendRecv of 0 bytes whose slots are posted and
  /// taken all the same. They carry nothing but the call's descriptor, which the receiver
  /// compares with its own call as it does for every slot.
  kStepCallCheck = 2,
  /// What the step sends (lentSource) stays as it is in Input or Output until the call ends: no
  /// later step of its lane, and no step of another lane, writes any byte of it, in place too.
  /// A rank may then lend it to the receiver rather than copy it into a FIFO (markLendableSends).
  kStepLendable = 4,
};

/// One step: at most one FIFO slot per peer. POD so that it can be copied to a device as is.
struct Step {
  StepOp op = StepOp::kLocalCopy;
  uint8_t flags = 0;
  uint8_t nrecv = 0;
  uint8_t nsend = 0;
  int32_t recvPeers[kMaxStepPeers] = {-1, -1, -1};
  int32_t sendPeers[kMaxStepPeers] = {-1, -1, -1};
  uint32_t bytes = 0;      ///< bytes received / produced (all of them, for dependent steps)
  uint32_t sendBytes = 0;  ///< bytes sent; differs from bytes only in the SendRecv steps
  BufferRef src;
  BufferRef src2;
  BufferRef dst;
};

/// A sequence of steps executed in order over connectors of one channel.
struct Lane {
  int channel = 0;
  std::vector<Step> steps;
};

/// Algorithms. Not every algorithm serves every collective (see algorithms.h).
enum class Algorithm : uint8_t {
  kRing,      ///< pipelined ring (chain for rooted collectives)
  kPairwise,  ///< pairwise exchange: all-to-all; the direct path of send/recv
  kTree,      ///< pipelined binary trees (a double binary tree over two channels)
  kRhd,       ///< recursive halving (reduce-scatter) and doubling (all-gather), Rabenseifner
  kRd,        ///< recursive doubling; Bruck for all-to-all, and all-gather at other n
  kDirect,    ///< one-shot: every transfer goes straight to the rank that needs it
  kHier,      ///< hierarchical: reduce-scatter in each host, all-reduce across hosts, all-gather
  kHierRhd,   ///< kHier with halving-doubling across hosts: log2 of the hosts, not their count
};
constexpr int kNumAlgorithms = 8;
std::string_view algorithmName(Algorithm algo);

/// Everything that determines a plan. Plans are cached by this key per communicator.
struct PlanRequest {
  Collective coll = Collective::kAllReduce;
  Algorithm algo = Algorithm::kRing;
  int nranks = 1;
  int rank = 0;
  int root = 0;        ///< Broadcast / Reduce
  int peer = -1;       ///< Send / Recv
  uint64_t count = 0;  ///< elements as the public API counts them (per rank / per peer)
  uint32_t elemSize = 4;
  bool inPlace = false;     ///< sendbuff and recvbuff overlap as the API defines in-place
  uint32_t chunkBytes = 0;  ///< most bytes per step and peer; at most the FIFO slot size
  int nchannels = 1;
  std::vector<int> ring;   ///< ring order of ranks (ring[i+1] follows ring[i]); empty: 0..n-1
  std::vector<int> hosts;  ///< host number of each rank (any values < nranks); empty: one host

  bool operator==(const PlanRequest&) const = default;
};

/// The result of an algorithm: lanes plus the buffer extents the steps may touch.
struct Plan {
  Collective coll = Collective::kAllReduce;
  Algorithm algo = Algorithm::kRing;
  int rank = 0;
  int nranks = 1;
  uint32_t elemSize = 4;
  uint64_t inputBytes = 0;    ///< steps read Input only inside [0, inputBytes)
  uint64_t outputBytes = 0;   ///< steps touch Output only inside [0, outputBytes)
  uint64_t scratchBytes = 0;  ///< scratch the executor must provide
  /// Payload bytes each send connector keeps in flight at most over a FIFO whose depth counts
  /// bytes (the shm transport's); 0: all the FIFO holds. See sendWindowFor.
  uint64_t sendWindow = 0;
  std::vector<Lane> lanes;

  size_t stepCount() const;
};

/// Checks that a plan is well formed: ops have the peers and buffers they need, sizes are whole
/// elements within the slot size, buffer ranges lie inside the declared extents, no two lanes use
/// the same connector. Every plan an algorithm builds passes this (the tests check it).
Status validatePlan(const Plan& plan, uint32_t slotBytes);

/// The largest payloads that ride in a shared-memory FIFO's lines rather than its ring of bytes
/// (fifo/fifo.h's kSmallBytes): they take none of a send window.
constexpr uint32_t kLinePayloadBytes = 4096;

/// What a payload of `bytes` takes of a shared-memory FIFO's data area: whole cache lines, or
/// nothing when it rides in a line.
inline uint64_t ringPayloadBytes(uint64_t bytes) {
  return bytes <= kLinePayloadBytes ? 0 : (bytes + 63) / 64 * 64;
}

/// A plan's sendWindow for a rank that keeps `budget` payload bytes in flight (BRAID_FIFO_BYTES):
/// the budget shared among the connectors it sends larger payloads on, since what the rank's
/// core keeps in its cache at once is what the pipeline's depth costs; but never less than three
/// of its largest payloads (two always fit then; a ring deadlocks with one). Payloads count in
/// whole cache lines, as the FIFO stores them. 0 when it sends no such payload. Small calls too
/// walk through the whole window rather than reuse their first bytes: a line the peer has just
/// read costs more to write again than one that has left both cores' caches
/// (docs/performance-notes.md#walking-the-send-window).
uint64_t sendWindowFor(const Plan& plan, uint64_t budget);

/// Where the value a step sends already lies unchanged: the src of a Send or a copy that sends
/// it as it is (not finalized) or of an independent step's send half, else the dst a dependent
/// step writes the same value to before it sends it. BufferId::kNone where there is none.
BufferRef lentSource(const Step& step);

/// Sets kStepLendable on every step whose lentSource in Input or Output is never written after
/// it (see the flag), Input and Output overlapping as `request` lays them out in place.
void markLendableSends(Plan& plan, const PlanRequest& request);

/// A one-line summary and, with all=true, every step; for logs and test failures.
std::string describePlan(const Plan& plan, bool all = false);

// ---- Step constructors: name the op, its peers and its buffers; bytes are set by the builder.

Step makeSend(int peer, BufferRef src, uint32_t bytes);
Step makeRecv(int peer, BufferRef dst, uint32_t bytes);
Step makeRecvReduceSend(int recvPeer, int sendPeer, BufferRef src, uint32_t bytes);
Step makeRecvReduceCopy(int recvPeer, BufferRef src, BufferRef dst, uint32_t bytes);
Step makeRecvCopySend(int recvPeer, int sendPeer, BufferRef dst, uint32_t bytes);
Step makeRecvReduceCopySend(int recvPeer, int sendPeer, BufferRef src, BufferRef dst,
                            uint32_t bytes);
Step makeCopySend(int sendPeer, BufferRef src, BufferRef dst, uint32_t bytes);
Step makeLocalCopy(BufferRef src, BufferRef dst, uint32_t bytes);
Step makeLocalReduce(BufferRef src, BufferRef src2, BufferRef dst, uint32_t bytes);
Step makeSendRecv(int sendPeer, BufferRef src, uint32_t sendBytes, int recvPeer, BufferRef dst,
                  uint32_t recvBytes);
Step makeSendRecvReduce(int sendPeer, BufferRef src, uint32_t sendBytes, int recvPeer,
                        BufferRef src2, BufferRef dst, uint32_t recvBytes);

/// A call check (kStepCallCheck): an empty slot to sendPeer and one from recvPeer; either may be
/// -1 for none (a Recv or a Send of the check alone).
Step makeCallCheck(int sendPeer, int recvPeer);

/// Adds a peer to a step built by a constructor above (a tree node reducing from two children,
/// or sending to both); at most kMaxStepPeers each.
void addRecvPeer(Step& step, int peer);
void addSendPeer(Step& step, int peer);

inline BufferRef input(uint64_t offset) { return {BufferId::kInput, offset}; }
inline BufferRef output(uint64_t offset) { return {BufferId::kOutput, offset}; }
inline BufferRef scratch(uint64_t offset) { return {BufferId::kScratch, offset}; }

}  // namespace braid
