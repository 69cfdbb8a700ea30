// Shared pieces of the algorithm builders (internal to src/algorithms): element ranges, the split
// of a message over channels, the ring order, chunked emission of local copies and of two-way
// exchanges, the frame every builder starts from (one-rank shortcut, a pass over the message's
// parts), and the builder entry points that algorithms.cc dispatches to.
//
// Builders think in elements; PlanContext turns element offsets into the byte BufferRefs of Steps.
// Every builder receives a request that buildPlan has already validated.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "algorithms/plan.h"

namespace braid {

/// A range of elements [begin, begin + len).
struct Span {
  uint64_t begin = 0;
  uint64_t len = 0;
  uint64_t end() const { return begin + len; }
};

/// Piece i of `parts` near-equal consecutive pieces of `whole` (the first whole.len % parts pieces
/// get one element more).
Span evenPart(Span whole, uint64_t parts, uint64_t i);

/// One lane's share of a message: the channel it runs on and the elements it moves.
struct ChannelPart {
  int channel = 0;
  Span span;
};

/// [0, count) in nchannels contiguous parts, part c on channel c (empty parts included).
std::vector<ChannelPart> channelParts(uint64_t count, int nchannels);

/// The chunks of `span`: consecutive pieces of at most chunkElems elements.
template <typename F>
void forEachChunk(Span span, uint64_t chunkElems, F&& f) {
  for (uint64_t off = 0; off < span.len; off += chunkElems) {
    f(Span{span.begin + off, std::min(chunkElems, span.len - off)});
  }
}

/// A ring order of ranks: position -> rank and rank -> position, positions taken modulo n.
class RingOrder {
 public:
  /// request.ring (or 0..n-1), reversed when `reversed`.
  RingOrder(const PlanRequest& request, bool reversed);
  int size() const { return static_cast<int>(rankAt_.size()); }
  int rankAt(int64_t pos) const;
  int posOf(int rank) const { return posOf_[rank]; }

 private:
  std::vector<int> rankAt_;
  std::vector<int> posOf_;
};

/// What every builder reads from a request, with element-offset buffer references.
class PlanContext {
 public:
  explicit PlanContext(const PlanRequest& request);

  const PlanRequest& request() const { return request_; }
  int nranks() const { return request_.nranks; }
  int rank() const { return request_.rank; }
  uint64_t count() const { return request_.count; }
  uint32_t elemSize() const { return request_.elemSize; }
  uint64_t chunkElems() const { return chunkElems_; }
  bool inPlace() const { return request_.inPlace; }

  BufferRef in(uint64_t elem) const { return input(elem * request_.elemSize); }
  BufferRef out(uint64_t elem) const { return output(elem * request_.elemSize); }
  BufferRef scr(uint64_t elem) const { return scratch(elem * request_.elemSize); }
  BufferRef at(BufferId buffer, uint64_t elem) const { return {buffer, elem * request_.elemSize}; }
  /// Bytes of `elems` elements; only called for at most one chunk.
  uint32_t bytes(uint64_t elems) const { return static_cast<uint32_t>(elems * request_.elemSize); }

  /// Appends localCopy steps moving `len` elements from src to dst, one chunk per step.
  void appendCopy(Lane& lane, BufferRef src, BufferRef dst, uint64_t len) const;

 private:
  const PlanRequest& request_;
  uint64_t chunkElems_;
};

/// One side of a two-way exchange step: the send half reads `ref`; the recv half writes `ref`
/// (reducing with `src2` when the exchange reduces).
struct ExchangePiece {
  BufferRef ref;
  BufferRef src2;
  uint32_t bytes = 0;
  bool finalize = false;
};

/// The pieces with each run that follows on in memory (ref, and src2 where set) joined and cut
/// again into pieces of maxBytes from its start (the last shorter), in order; pieces that
/// finalize and pieces that do not stay apart. maxBytes: a multiple of the element size. Two
/// ranks that join lists of the same sizes laid out alike cut them at the same places.
std::vector<ExchangePiece> joinAdjacent(const std::vector<ExchangePiece>& pieces,
                                        uint32_t maxBytes);

/// Appends steps that send `sends` to sendPeer and receive `recvs` from recvPeer, pairing the
/// i-th send with the i-th recv in one SendRecv(Reduce) step and emitting a lone Send or
/// Recv(ReduceCopy) where one list is longer. The partner enumerates the same lists swapped, so
/// the slots on each connector match in order.
void appendExchange(Lane& lane, int sendPeer, const std::vector<ExchangePiece>& sends, int recvPeer,
                    const std::vector<ExchangePiece>& recvs, bool reduce);

/// The fold that recursive algorithms use at a rank count n that is not a power of two. With p the
/// largest power of two <= n and r = n - p, each even position below 2r hands its data to the odd
/// position after it and sits out; the other p positions form a virtual power-of-two group, where
/// virtual rank v stands for positions [firstPos(v), firstPos(v + 1)): two positions for v < r,
/// one otherwise.
class FoldGroup {
 public:
  explicit FoldGroup(int n);
  int p() const { return p_; }
  int r() const { return r_; }
  int log2p() const { return log2p_; }
  /// Whether `pos` hands its data to pos + 1 and sits out of the power-of-two group.
  bool sitsOut(int pos) const { return pos < 2 * r_ && pos % 2 == 0; }
  /// Whether `pos` takes over the data of pos - 1.
  bool takesOver(int pos) const { return pos < 2 * r_ && pos % 2 == 1; }
  /// The virtual rank of a position that does not sit out.
  int virtualOf(int pos) const { return pos < 2 * r_ ? pos / 2 : pos - r_; }
  /// The position that acts for virtual rank v.
  int posOfVirtual(int v) const { return v < r_ ? 2 * v + 1 : v + r_; }
  /// The first position virtual rank v stands for; firstPos(p) = n.
  int firstPos(int v) const { return v < r_ ? 2 * v : v + r_; }

 private:
  int p_ = 1;
  int r_ = 0;
  int log2p_ = 0;
};

/// One member's place in a binary tree over members 0..m-1, found in O(log m) without building
/// the tree (a plan at n ranks needs only its own rank's links). Variant 0 labels member x with
/// x+1 and links label v with ctz(v) = h > 0 to the children v - 2^(h-1) and the largest
/// v + 2^j <= m (j < h), rooted at the largest power of two <= m: odd labels are leaves, even
/// labels interior. Variant 1 is the same shape over labels shifted by one member
/// ((x+1) mod m + 1), which makes the interior members of one variant leaves of the other: the
/// double binary tree.
struct TreeLinks {
  int parent = -1;                ///< -1 at the root
  std::array<int, 2> children{};  ///< the first `nchildren` are set
  int nchildren = 0;
};
TreeLinks binaryTreeLinks(int members, int variant, int member);
/// The root member of that tree.
int binaryTreeRoot(int members, int variant);

/// A tree algorithm's share of a message: the channel, the tree variant that carries it, the
/// elements. With one channel everything goes over tree 0; with more, each tree carries half the
/// message, tree 0 on the even channels and tree 1 on the odd ones. The two trees cannot share a
/// channel: where one has the edge a->b the other may have b->a, and a connector belongs to one
/// lane.
struct TreePart {
  int channel = 0;
  int variant = 0;
  Span span;
};
std::vector<TreePart> treeParts(uint64_t count, int nchannels);

/// A plan with the request's identity and the buffer extents its collective defines, no lanes.
Plan emptyPlan(const PlanRequest& request);

/// Steps of an n = 1 collective that only copies Input to Output (none when in place).
void appendSingleRankCopy(const PlanContext& ctx, Plan& plan);

/// The frame of every builder: emptyPlan, then at n = 1 only appendSingleRankCopy (every
/// collective is a copy there, so `addLanes` is not called); otherwise addLanes(ctx, part, plan)
/// for each part of the message in order, appending that part's lanes.
template <typename Part, typename AddLanes>
Plan buildOverParts(const PlanContext& ctx, const std::vector<Part>& parts, AddLanes&& addLanes) {
  Plan plan = emptyPlan(ctx.request());
  if (ctx.nranks() == 1) {
    appendSingleRankCopy(ctx, plan);
    return plan;
  }
  for (const Part& part : parts) addLanes(ctx, part, plan);
  return plan;
}

/// buildOverParts over channelParts with one lane per channel, which fillLane(ctx, part, lane)
/// fills: the shape of most builders.
template <typename FillLane>
Plan buildLanePerChannel(const PlanContext& ctx, FillLane&& fillLane) {
  return buildOverParts(ctx, channelParts(ctx.count(), ctx.request().nchannels),
                        [&](const PlanContext& c, const ChannelPart& part, Plan& plan) {
                          Lane lane{part.channel, {}};
                          fillLane(c, part, lane);
                          plan.lanes.push_back(std::move(lane));
                        });
}

// ---- Builders, one family per file. Each serves the collectives algorithms.cc lists for it.

Plan buildRingPlan(const PlanRequest& request);      // ring.cc
Plan buildPairwisePlan(const PlanRequest& request);  // pairwise.cc
Plan buildTreePlan(const PlanRequest& request);      // tree.cc
Plan buildRhdPlan(const PlanRequest& request);       // rhd.cc
Plan buildRdPlan(const PlanRequest& request);        // rd.cc
Plan buildDirectPlan(const PlanRequest& request);    // direct.cc
Plan buildHierPlan(const PlanRequest& request);      // hier.cc
Plan buildHierRhdPlan(const PlanRequest& request);   // hier.cc

}  // namespace braid
