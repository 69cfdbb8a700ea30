// Ring algorithms: every rank talks only to its two ring neighbours.
//
// All-reduce is a reduce-scatter followed by an all-gather around the ring. The message is cut
// into rounds of n chunks; in a round each rank first sends one block of its own data to the next
// rank, then n-2 times adds its share to the partial sum arriving from the previous rank and passes
// it on, and on the (n-1)-th receive holds one block fully reduced: it finalizes it (Avg), keeps it
// and sends it on; n-2 copy-and-forward steps and a last receive complete the all-gather. Each
// element is reduced at exactly one rank and copied everywhere else, so every rank ends with the
// same bits. Rounds follow each other in one lane, so while a rank works on round k its
// neighbours work on rounds k-1 and k+1: that pipelining is what hides the latency of long rings.
//   cost: 2(n-1) alpha per round + 2(n-1)/n N beta + (n-1)/n N gamma (N = message bytes)
// Reduce-scatter and all-gather are the two halves alone, chunk after chunk of each block:
//   cost: (n-1) alpha per chunk + (n-1)/n N' beta (N' = n * count * elemSize, the whole array)
// Broadcast is a pipelined chain that starts at the root and follows the ring; reduce is the same
// chain run backwards, ending at the root, which finalizes:
//   cost: (n-1 + chunks-1) alpha + N beta (+ N gamma for reduce)
// With several channels each takes a contiguous part of the message over its own connectors, and
// odd channels run the ring in the opposite direction so that both directions of a link carry data.
#include "algorithms/builder.h"

namespace braid {

namespace {

// The ring of one channel (odd channels run it backwards), this rank's position on it and its
// neighbours.
struct RingSeat {
  RingSeat(const PlanContext& ctx, int channel)
      : ring(ctx.request(), channel % 2 == 1),
        pos(ring.posOf(ctx.rank())),
        next(ring.rankAt(pos + 1)),
        prev(ring.rankAt(pos - 1)) {}
  RingOrder ring;
  int pos;
  int next;
  int prev;
};

void ringAllReduce(const PlanContext& ctx, const ChannelPart& part, Lane& lane) {
  const int n = ctx.nranks();
  const auto [ring, p, next, prev] = RingSeat(ctx, part.channel);
  auto push = [&](Step s) { lane.steps.push_back(s); };
  forEachChunk(part.span, ctx.chunkElems() * n, [&](Span round) {
    // Block j of the round belongs to ring position j; a block of a short round may be empty, and
    // then it is empty on every rank, so skipping its steps keeps both ends of each transfer
    // paired.
    auto block = [&](int k) { return evenPart(round, n, ((k % n) + n) % n); };
    Span b = block(p);
    if (b.len) push(makeSend(next, ctx.in(b.begin), ctx.bytes(b.len)));
    for (int k = 1; k <= n - 2; ++k) {
      b = block(p - k);
      if (b.len) push(makeRecvReduceSend(prev, next, ctx.in(b.begin), ctx.bytes(b.len)));
    }
    b = block(p + 1);  // complete here: finalize, keep, and start it around the ring
    if (b.len) {
      Step s =
          makeRecvReduceCopySend(prev, next, ctx.in(b.begin), ctx.out(b.begin), ctx.bytes(b.len));
      s.flags |= kStepFinalize;
      push(s);
    }
    for (int k = 1; k <= n - 2; ++k) {
      b = block(p + 1 - k);
      if (b.len) push(makeRecvCopySend(prev, next, ctx.out(b.begin), ctx.bytes(b.len)));
    }
    b = block(p + 2);
    if (b.len) push(makeRecv(prev, ctx.out(b.begin), ctx.bytes(b.len)));
  });
}

void ringBroadcast(const PlanContext& ctx, const ChannelPart& part, Lane& lane) {
  const int n = ctx.nranks();
  const auto [ring, p, next, prev] = RingSeat(ctx, part.channel);
  const int link = ((p - ring.posOf(ctx.request().root)) % n + n) % n;  // 0 = root
  forEachChunk(part.span, ctx.chunkElems(), [&](Span c) {
    const uint32_t bytes = ctx.bytes(c.len);
    if (link == 0) {
      lane.steps.push_back(ctx.inPlace()
                               ? makeSend(next, ctx.in(c.begin), bytes)
                               : makeCopySend(next, ctx.in(c.begin), ctx.out(c.begin), bytes));
    } else if (link < n - 1) {
      lane.steps.push_back(makeRecvCopySend(prev, next, ctx.out(c.begin), bytes));
    } else {
      lane.steps.push_back(makeRecv(prev, ctx.out(c.begin), bytes));
    }
  });
}

void ringReduce(const PlanContext& ctx, const ChannelPart& part, Lane& lane) {
  const int n = ctx.nranks();
  const auto [ring, p, next, prev] = RingSeat(ctx, part.channel);
  // The chain starts right after the root and ends at it: link n-1 is the root.
  const int link = ((p - ring.posOf(ctx.request().root) - 1) % n + n) % n;
  forEachChunk(part.span, ctx.chunkElems(), [&](Span c) {
    const uint32_t bytes = ctx.bytes(c.len);
    if (link == 0) {
      lane.steps.push_back(makeSend(next, ctx.in(c.begin), bytes));
    } else if (link < n - 1) {
      lane.steps.push_back(makeRecvReduceSend(prev, next, ctx.in(c.begin), bytes));
    } else {
      Step s = makeRecvReduceCopy(prev, ctx.in(c.begin), ctx.out(c.begin), bytes);
      s.flags |= kStepFinalize;
      lane.steps.push_back(s);
    }
  });
}

void ringAllGather(const PlanContext& ctx, const ChannelPart& part, Lane& lane) {
  const int n = ctx.nranks();
  const uint64_t count = ctx.count();
  const auto [ring, p, next, prev] = RingSeat(ctx, part.channel);
  forEachChunk(part.span, ctx.chunkElems(), [&](Span c) {
    const uint32_t bytes = ctx.bytes(c.len);
    auto dst = [&](int owner) { return ctx.out(owner * count + c.begin); };
    // In place the own block already sits in Output (Input points into it).
    lane.steps.push_back(ctx.inPlace()
                             ? makeSend(next, ctx.in(c.begin), bytes)
                             : makeCopySend(next, ctx.in(c.begin), dst(ctx.rank()), bytes));
    // Step k brings the block of the rank k positions back, which the previous rank got at k-1.
    for (int k = 1; k <= n - 2; ++k) {
      lane.steps.push_back(makeRecvCopySend(prev, next, dst(ring.rankAt(p - k)), bytes));
    }
    lane.steps.push_back(makeRecv(prev, dst(ring.rankAt(p + 1)), bytes));
  });
}

void ringReduceScatter(const PlanContext& ctx, const ChannelPart& part, Lane& lane) {
  const int n = ctx.nranks();
  const uint64_t count = ctx.count();
  const auto [ring, p, next, prev] = RingSeat(ctx, part.channel);
  forEachChunk(part.span, ctx.chunkElems(), [&](Span c) {
    const uint32_t bytes = ctx.bytes(c.len);
    auto src = [&](int owner) { return ctx.in(owner * count + c.begin); };
    // Step k carries the partial sum of the block owned k+1 positions back; after n-1 steps the
    // partial arriving is this rank's own block, missing only this rank's share.
    lane.steps.push_back(makeSend(next, src(ring.rankAt(p - 1)), bytes));
    for (int k = 1; k <= n - 2; ++k) {
      lane.steps.push_back(makeRecvReduceSend(prev, next, src(ring.rankAt(p - 1 - k)), bytes));
    }
    Step s = makeRecvReduceCopy(prev, src(ctx.rank()), ctx.out(c.begin), bytes);
    s.flags |= kStepFinalize;
    lane.steps.push_back(s);
  });
}

void ringLane(const PlanContext& ctx, const ChannelPart& part, Lane& lane) {
  switch (ctx.request().coll) {
    case Collective::kAllReduce: ringAllReduce(ctx, part, lane); break;
    case Collective::kBroadcast: ringBroadcast(ctx, part, lane); break;
    case Collective::kReduce: ringReduce(ctx, part, lane); break;
    case Collective::kAllGather: ringAllGather(ctx, part, lane); break;
    case Collective::kReduceScatter: ringReduceScatter(ctx, part, lane); break;
    default: break;  // not in the ring's catalogue entry
  }
}

}  // namespace

Plan buildRingPlan(const PlanRequest& request) {
  return buildLanePerChannel(PlanContext(request), ringLane);
}

}  // namespace braid
