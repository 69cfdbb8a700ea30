// Direct (one-shot) algorithms: the smallest-latency plans for tiny messages among a few ranks.
//
// Every transfer goes straight from the rank that has the data to the rank that needs it, so a
// call costs one hop whatever n is:
//   all-reduce      each rank sends its share to all n-1 others at once and folds the n shares;
//   reduce-scatter  each rank sends block j of its input to rank j and folds the n shares of its
//                   own block;
//   all-gather      each rank sends its block to all others and receives theirs;
//   broadcast       the root sends to all others;
//   reduce          every other rank sends its share to the root, which folds them.
// A fold adds the shares in the fixed rank order 0, 1, ..., n-1: it receives rank 0's share (or
// starts from its own), then reduces in each next rank's share as it arrives, its own share
// included at its own turn, and the last reduction finalizes. Every rank evaluates the same
// expression ((x0 ⊕ x1) ⊕ x2) ⊕ ..., so all-reduce results are identical everywhere. The
// running sum lives in Output, or in a chunk of scratch per channel when the call is in place
// (Output then overlaps the own share, which must stay intact until it has been added). Sends go
// to the peers in ring order from this rank's successor, up to kMaxStepPeers per Send step.
//   cost: alpha + (n-1) N beta injected per rank (spread over n-1 links) + (n-1) N gamma
// One hop instead of log2 n (rd, trees) or n-1 and more (ring): it wins for messages of a few KiB
// among a handful of ranks on a full mesh (one host's shared memory, NVLink/NVSwitch), and loses
// as soon as n - 1 copies of the message cost more than the rounds it saves.
#include "algorithms/builder.h"

namespace braid {

namespace {

/// The other ranks in ring order, starting with this rank's successor.
std::vector<int> othersInRingOrder(const PlanContext& ctx) {
  const RingOrder ring(ctx.request(), false);
  const int p = ring.posOf(ctx.rank());
  std::vector<int> peers;
  for (int k = 1; k < ctx.nranks(); ++k) peers.push_back(ring.rankAt(p + k));
  return peers;
}

/// Sends `src` to every peer, kMaxStepPeers per step; the first step also copies it to `copyTo`
/// when that names a buffer.
void appendSendToAll(Lane& lane, const std::vector<int>& peers, BufferRef src, BufferRef copyTo,
                     uint32_t bytes) {
  for (size_t i = 0; i < peers.size(); i += kMaxStepPeers) {
    Step s = i == 0 && copyTo.buffer != BufferId::kNone ? makeCopySend(peers[i], src, copyTo, bytes)
                                                        : makeSend(peers[i], src, bytes);
    for (size_t k = i + 1; k < std::min(peers.size(), i + kMaxStepPeers); ++k) {
      addSendPeer(s, peers[k]);
    }
    lane.steps.push_back(s);
  }
}

/// Folds the n shares of one chunk in rank order into `dst`: `own` is this rank's share, the
/// others arrive from their ranks; partial sums go to `acc`.
void appendFold(const PlanContext& ctx, Lane& lane, BufferRef own, BufferRef acc, BufferRef dst,
                uint32_t bytes) {
  const int n = ctx.nranks();
  BufferRef sum{};  // where the running sum of ranks 0..q-1 is; none before rank 0
  for (int q = 0; q < n; ++q) {
    const BufferRef to = q == n - 1 ? dst : acc;
    Step s;
    if (sum.buffer == BufferId::kNone) {
      if (q == ctx.rank()) {
        sum = own;  // nothing to do: the running sum is the own share
        continue;
      }
      s = makeRecv(q, to, bytes);
    } else if (q == ctx.rank()) {
      s = makeLocalReduce(sum, own, to, bytes);
    } else {
      s = makeRecvReduceCopy(q, sum, to, bytes);
    }
    if (q == n - 1) s.flags |= kStepFinalize;
    lane.steps.push_back(s);
    sum = to;
  }
}

/// The lane of one channel; when in place, its running sums use scratch chunk `part.channel` of
/// accElems elements.
void directLane(const PlanContext& ctx, const ChannelPart& part, Lane& lane, uint64_t accElems) {
  const uint64_t accBase = part.channel * accElems;
  const int rank = ctx.rank();
  const int root = ctx.request().root;
  const uint64_t count = ctx.count();
  const std::vector<int> peers = othersInRingOrder(ctx);
  forEachChunk(part.span, ctx.chunkElems(), [&](Span c) {
    const uint32_t bytes = ctx.bytes(c.len);
    const BufferRef in = ctx.in(c.begin);
    const BufferRef out = ctx.out(c.begin);
    const BufferRef acc = ctx.inPlace() ? ctx.scr(accBase) : out;
    switch (ctx.request().coll) {
      case Collective::kAllReduce:
        appendSendToAll(lane, peers, in, {}, bytes);
        appendFold(ctx, lane, in, acc, out, bytes);
        break;
      case Collective::kReduceScatter:
        for (int peer : peers) {
          lane.steps.push_back(makeSend(peer, ctx.in(peer * count + c.begin), bytes));
        }
        appendFold(ctx, lane, ctx.in(rank * count + c.begin), acc, out, bytes);
        break;
      case Collective::kAllGather:
        // In place the own block already sits in Output (Input points into it).
        appendSendToAll(lane, peers, in,
                        ctx.inPlace() ? BufferRef{} : ctx.out(rank * count + c.begin), bytes);
        for (int peer : peers) {
          lane.steps.push_back(makeRecv(peer, ctx.out(peer * count + c.begin), bytes));
        }
        break;
      case Collective::kBroadcast:
        if (rank == root) {
          appendSendToAll(lane, peers, in, ctx.inPlace() ? BufferRef{} : out, bytes);
        } else {
          lane.steps.push_back(makeRecv(root, out, bytes));
        }
        break;
      case Collective::kReduce:
        if (rank == root) {
          appendFold(ctx, lane, in, acc, out, bytes);
        } else {
          lane.steps.push_back(makeSend(root, in, bytes));
        }
        break;
      default: break;  // not in direct's catalogue entry
    }
  });
}

/// Whether this rank folds shares, and so needs a scratch accumulator when in place (at n = 1 the
/// plan only copies).
bool folds(const PlanRequest& request) {
  if (request.nranks == 1) return false;
  return request.coll == Collective::kAllReduce || request.coll == Collective::kReduceScatter ||
         (request.coll == Collective::kReduce && request.rank == request.root);
}

}  // namespace

Plan buildDirectPlan(const PlanRequest& request) {
  const PlanContext ctx(request);
  // Channel 0's part is the largest.
  const uint64_t accElems =
      std::min(ctx.chunkElems(), evenPart(Span{0, request.count}, request.nchannels, 0).len);
  auto fillLane = [accElems](const PlanContext& c, const ChannelPart& part, Lane& lane) {
    directLane(c, part, lane, accElems);
  };
  Plan plan = buildLanePerChannel(ctx, fillLane);
  if (request.inPlace && folds(request)) {
    plan.scratchBytes = request.nchannels * accElems * request.elemSize;
  }
  return plan;
}

}  // namespace braid
