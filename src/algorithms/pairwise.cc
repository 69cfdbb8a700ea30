// Pairwise exchange: all-to-all, and the point-to-point send and receive plans.
//
// All-to-all: for each distance s = 1..n-1 a lane sends this rank's block for rank+s and receives
// the block rank-s holds for this rank, chunk by chunk, in SendRecv steps whose halves progress
// independently; a lane of local copies moves the block a rank keeps for itself. All n-1 exchanges
// run at once, each over its own pair of connectors, so every link of a full mesh is busy:
//   cost: chunks alpha + (n-1)/n N beta per rank (N = n * count * elemSize), links permitting
// In place (Input == Output) a block may be overwritten by what arrives before it has left, so
// distances s and n-s share one lane: it saves the block for rank-s in scratch, exchanges the
// block for rank+s (sending from Input, receiving into the block of rank-s), then sends the saved
// block to rank-s while receiving the block of rank+s, which has left by then. That costs one
// local copy of half the data and floor(n/2) * count * elemSize bytes of scratch.
//
// Send and Recv: one lane per channel streams that channel's part of the buffer in chunks to or
// from the peer: chunks alpha + N beta.
#include "algorithms/builder.h"

namespace braid {

namespace {

int mod(int a, int n) { return ((a % n) + n) % n; }

// One channel's lanes: the local copy, then one lane per distance s: send to rank+s, receive
// from rank-s.
void allToAllOutOfPlace(const PlanContext& ctx, const ChannelPart& part, Plan& plan) {
  const int n = ctx.nranks();
  const int rank = ctx.rank();
  const uint64_t count = ctx.count();
  Lane local;
  local.channel = part.channel;
  ctx.appendCopy(local, ctx.in(rank * count + part.span.begin),
                 ctx.out(rank * count + part.span.begin), part.span.len);
  plan.lanes.push_back(std::move(local));
  for (int s = 1; s < n; ++s) {
    const int to = mod(rank + s, n);
    const int from = mod(rank - s, n);
    Lane lane;
    lane.channel = part.channel;
    forEachChunk(part.span, ctx.chunkElems(), [&](Span c) {
      lane.steps.push_back(makeSendRecv(to, ctx.in(to * count + c.begin), ctx.bytes(c.len), from,
                                        ctx.out(from * count + c.begin), ctx.bytes(c.len)));
    });
    plan.lanes.push_back(std::move(lane));
  }
}

// One channel's lanes, one per pair of distances {s, n-s}; see the narrative above. Lane s uses
// scratch block s-1.
void allToAllInPlace(const PlanContext& ctx, const ChannelPart& part, Plan& plan) {
  const int n = ctx.nranks();
  const int rank = ctx.rank();
  const uint64_t count = ctx.count();
  const int pairs = n / 2;
  for (int s = 1; s <= pairs; ++s) {
    const int up = mod(rank + s, n);
    const int down = mod(rank - s, n);
    const uint64_t saved = (s - 1) * count;  // this lane's scratch block
    Lane lane;
    lane.channel = part.channel;
    // Sends block srcBlock of srcBuf to `to` while receiving the block of `from` into Output.
    auto exchange = [&](int to, BufferId srcBuf, uint64_t srcBlock, int from) {
      forEachChunk(part.span, ctx.chunkElems(), [&](Span c) {
        lane.steps.push_back(makeSendRecv(to, ctx.at(srcBuf, srcBlock + c.begin), ctx.bytes(c.len),
                                          from, ctx.out(from * count + c.begin), ctx.bytes(c.len)));
      });
    };
    if (up == down) {  // s = n/2: one partner, the same block goes and comes
      ctx.appendCopy(lane, ctx.in(up * count + part.span.begin), ctx.scr(saved + part.span.begin),
                     part.span.len);
      exchange(up, BufferId::kScratch, saved, up);
    } else {
      ctx.appendCopy(lane, ctx.in(down * count + part.span.begin), ctx.scr(saved + part.span.begin),
                     part.span.len);
      exchange(up, BufferId::kInput, up * count, down);
      exchange(down, BufferId::kScratch, saved, up);
    }
    plan.lanes.push_back(std::move(lane));
  }
}

void pointToPoint(const PlanContext& ctx, const ChannelPart& part, Lane& lane) {
  const int peer = ctx.request().peer;
  const bool send = ctx.request().coll == Collective::kSend;
  forEachChunk(part.span, ctx.chunkElems(), [&](Span c) {
    lane.steps.push_back(send ? makeSend(peer, ctx.in(c.begin), ctx.bytes(c.len))
                              : makeRecv(peer, ctx.out(c.begin), ctx.bytes(c.len)));
  });
}

}  // namespace

Plan buildPairwisePlan(const PlanRequest& request) {
  const PlanContext ctx(request);
  // A point-to-point request always has two ranks or more (its peer is another rank).
  if (request.coll == Collective::kSend || request.coll == Collective::kRecv) {
    return buildLanePerChannel(ctx, pointToPoint);
  }
  const std::vector<ChannelPart> parts = channelParts(request.count, request.nchannels);
  if (!request.inPlace) return buildOverParts(ctx, parts, allToAllOutOfPlace);
  Plan plan = buildOverParts(ctx, parts, allToAllInPlace);
  plan.scratchBytes = static_cast<uint64_t>(request.nranks / 2) * request.count * request.elemSize;
  return plan;
}

}  // namespace braid
