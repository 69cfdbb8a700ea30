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

// One lane per (distance, channel): send to rank+s, receive from rank-s.
void allToAllOutOfPlace(const PlanContext& ctx, Plan& plan) {
  const int n = ctx.nranks();
  const int rank = ctx.rank();
  const uint64_t count = ctx.count();
  for (const ChannelPart& part : channelParts(count, ctx.request().nchannels)) {
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
}

// One lane per (pair of distances {s, n-s}, channel); see the narrative above.
void allToAllInPlace(const PlanContext& ctx, Plan& plan) {
  const int n = ctx.nranks();
  const int rank = ctx.rank();
  const uint64_t count = ctx.count();
  const int pairs = n / 2;
  plan.scratchBytes = static_cast<uint64_t>(pairs) * count * ctx.elemSize();
  for (const ChannelPart& part : channelParts(count, ctx.request().nchannels)) {
    for (int s = 1; s <= pairs; ++s) {
      const int up = mod(rank + s, n);
      const int down = mod(rank - s, n);
      const uint64_t saved = (s - 1) * count;  // this lane's scratch block
      Lane lane;
      lane.channel = part.channel;
      // Sends block srcBlock of srcBuf to `to` while receiving the block of `from` into Output.
      auto exchange = [&](int to, BufferId srcBuf, uint64_t srcBlock, int from) {
        forEachChunk(part.span, ctx.chunkElems(), [&](Span c) {
          lane.steps.push_back(makeSendRecv(to, ctx.at(srcBuf, srcBlock + c.begin),
                                            ctx.bytes(c.len), from, ctx.out(from * count + c.begin),
                                            ctx.bytes(c.len)));
        });
      };
      if (up == down) {  // s = n/2: one partner, the same block goes and comes
        ctx.appendCopy(lane, ctx.in(up * count + part.span.begin), ctx.scr(saved + part.span.begin),
                       part.span.len);
        exchange(up, BufferId::kScratch, saved, up);
      } else {
        ctx.appendCopy(lane, ctx.in(down * count + part.span.begin),
                       ctx.scr(saved + part.span.begin), part.span.len);
        exchange(up, BufferId::kInput, up * count, down);
        exchange(down, BufferId::kScratch, saved, up);
      }
      plan.lanes.push_back(std::move(lane));
    }
  }
}

void pointToPoint(const PlanContext& ctx, Plan& plan) {
  const int peer = ctx.request().peer;
  const bool send = ctx.request().coll == Collective::kSend;
  for (const ChannelPart& part : channelParts(ctx.count(), ctx.request().nchannels)) {
    Lane lane;
    lane.channel = part.channel;
    forEachChunk(part.span, ctx.chunkElems(), [&](Span c) {
      lane.steps.push_back(send ? makeSend(peer, ctx.in(c.begin), ctx.bytes(c.len))
                                : makeRecv(peer, ctx.out(c.begin), ctx.bytes(c.len)));
    });
    plan.lanes.push_back(std::move(lane));
  }
}

}  // namespace

Plan buildPairwisePlan(const PlanRequest& request) {
  const PlanContext ctx(request);
  Plan plan = emptyPlan(request);
  if (request.coll == Collective::kSend || request.coll == Collective::kRecv) {
    pointToPoint(ctx, plan);
  } else if (request.nranks == 1) {
    appendSingleRankCopy(ctx, plan);
  } else if (request.inPlace) {
    allToAllInPlace(ctx, plan);
  } else {
    allToAllOutOfPlace(ctx, plan);
  }
  return plan;
}

}  // namespace braid
