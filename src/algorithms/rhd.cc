// Recursive halving and doubling (Rabenseifner): all-reduce and reduce-scatter in log2 steps.
//
// All-reduce: in halving step d = 1, 2, 4, ... each rank pairs with the rank whose virtual index
// differs in bit d, sends the half of its current range the partner keeps and receives (and adds)
// the partner's copy of the half it keeps itself, so after log2 p steps it holds 1/p of the
// message fully reduced; the last step finalizes. The all-gather runs the same pairs backwards,
// each step doubling the range a rank holds. Each step is one SendRecv(Reduce) per chunk whose
// halves touch disjoint halves of the range. Each element is reduced at one rank and copied to the
// others, so results are identical everywhere.
//   cost: 2 log2(p) alpha + 2 (p-1)/p N beta + (p-1)/p N gamma
// Ranks that are not a power of two fold first (see FoldGroup): of the first 2r positions each
// even one hands its whole vector to the next, which adds it and takes part for both; at the end
// it sends the result back. That adds 2 (alpha + N beta) for the r folded pairs.
// Reduce-scatter is the halving half over whole blocks: in step d a rank keeps the blocks of the
// virtual ranks that agree with it in bit d and gives the partner the others, so the last step
// leaves each rank its own block, finalized; a rank that took over a folded neighbour also holds
// the neighbour's block and sends it back. Both algorithms start with d = 1, the nearest partner
// in the ring order, where the exchanges are biggest. Partial sums of reduce-scatter live in
// scratch, one block per block kept after the first step (all n at a folding rank), ordered by
// their virtual ranks' bits reversed: each later step then gives away one run of scratch and
// keeps one, and between the first step and the last its blocks travel joined, a chunk a message
// (the first step's alternate in the input, one every other rank).
//   cost: log2(p) alpha + (p-1)/p N' beta (N' = n * count * elemSize), + N' beta with a fold
// Halving-doubling beats the ring when n is large and messages are mid-sized: it moves the same
// bytes in log2 n instead of n-1 steps, but its partners are far apart in the ring order in the
// late steps, so on a hierarchy (NVLink islands, NICs) the ring keeps the bandwidth crown.
#include "algorithms/builder.h"

namespace braid {

namespace {

std::vector<ExchangePiece> chunkPieces(const PlanContext& ctx, Span span, BufferId buffer,
                                       uint64_t base) {
  std::vector<ExchangePiece> pieces;
  forEachChunk(span, ctx.chunkElems(), [&](Span c) {
    pieces.push_back({ctx.at(buffer, base + c.begin), {}, ctx.bytes(c.len), false});
  });
  return pieces;
}

void rhdAllReduce(const PlanContext& ctx, const ChannelPart& part, Lane& lane) {
  const FoldGroup g(ctx.nranks());
  const RingOrder order(ctx.request(), false);
  const int x = order.posOf(ctx.rank());
  const Span span = part.span;
  if (g.sitsOut(x)) {
    const int partner = order.rankAt(x + 1);
    for (ExchangePiece& p : chunkPieces(ctx, span, BufferId::kInput, 0)) {
      lane.steps.push_back(makeSend(partner, p.ref, p.bytes));
    }
    for (ExchangePiece& p : chunkPieces(ctx, span, BufferId::kOutput, 0)) {
      lane.steps.push_back(makeRecv(partner, p.ref, p.bytes));
    }
    return;
  }
  BufferId work = BufferId::kInput;
  if (g.takesOver(x)) {
    forEachChunk(span, ctx.chunkElems(), [&](Span c) {
      lane.steps.push_back(makeRecvReduceCopy(order.rankAt(x - 1), ctx.in(c.begin),
                                              ctx.out(c.begin), ctx.bytes(c.len)));
    });
    work = BufferId::kOutput;
  }
  const int v = g.virtualOf(x);
  std::vector<Span> ranges;  // the range before each halving step, for the way back
  Span range = span;
  for (int d = 1; d < g.p(); d <<= 1) {
    const int partner = order.rankAt(g.posOfVirtual(v ^ d));
    const Span lower{range.begin, range.len / 2};
    const Span upper{lower.end(), range.len - lower.len};
    const bool keepLower = (v & d) == 0;
    const Span keep = keepLower ? lower : upper;
    const Span give = keepLower ? upper : lower;
    std::vector<ExchangePiece> recvs = chunkPieces(ctx, keep, BufferId::kOutput, 0);
    for (ExchangePiece& r : recvs) {
      r.src2 = {work, r.ref.offset};  // this rank's partial of the same elements
      r.finalize = 2 * d == g.p();
    }
    appendExchange(lane, partner, chunkPieces(ctx, give, work, 0), partner, recvs, true);
    ranges.push_back(range);
    range = keep;
    work = BufferId::kOutput;
  }
  for (int d = g.p() / 2; d >= 1; d >>= 1) {
    const int partner = order.rankAt(g.posOfVirtual(v ^ d));
    const Span whole = ranges.back();
    ranges.pop_back();
    const Span theirs = range.begin == whole.begin ? Span{range.end(), whole.len - range.len}
                                                   : Span{whole.begin, whole.len - range.len};
    appendExchange(lane, partner, chunkPieces(ctx, range, BufferId::kOutput, 0), partner,
                   chunkPieces(ctx, theirs, BufferId::kOutput, 0), false);
    range = whole;
  }
  if (g.takesOver(x)) {
    for (ExchangePiece& p : chunkPieces(ctx, span, BufferId::kOutput, 0)) {
      lane.steps.push_back(makeSend(order.rankAt(x - 1), p.ref, p.bytes));
    }
  }
}

// Reduce-scatter over whole blocks; `span` is this channel's part of every block.
void rhReduceScatter(const PlanContext& ctx, const ChannelPart& part, Lane& lane,
                     uint64_t& scratchBlocks) {
  const int n = ctx.nranks();
  const uint64_t count = ctx.count();
  const FoldGroup g(n);
  const RingOrder order(ctx.request(), false);
  const int x = order.posOf(ctx.rank());
  const Span span = part.span;
  auto inputBlock = [&](int pos) { return static_cast<uint64_t>(order.rankAt(pos)) * count; };
  auto pieces = [&](int pos, auto&& ref) {
    forEachChunk(span, ctx.chunkElems(), [&](Span c) { ref(pos, c); });
  };
  if (g.sitsOut(x)) {
    const int partner = order.rankAt(x + 1);
    for (int q = 0; q < n; ++q) {
      pieces(q, [&](int pos, Span c) {
        lane.steps.push_back(
            makeSend(partner, ctx.in(inputBlock(pos) + c.begin), ctx.bytes(c.len)));
      });
    }
    pieces(x, [&](int, Span c) {
      lane.steps.push_back(makeRecv(partner, ctx.out(c.begin), ctx.bytes(c.len)));
    });
    return;
  }
  // Virtual ranks in the order scratch keeps their blocks: by their bits reversed, so that each
  // halving step after the first gives away, and keeps, one contiguous run of scratch.
  std::vector<int> held(g.p());  // virtual ranks whose blocks this rank still reduces
  for (int u = 0; u < g.p(); ++u) held[u] = u;
  auto reversed = [&](int u) {
    int r = 0;
    for (int b = 0; b < g.log2p(); ++b) r |= ((u >> b) & 1) << (g.log2p() - 1 - b);
    return r;
  };
  std::sort(held.begin(), held.end(), [&](int a, int b) { return reversed(a) < reversed(b); });
  // slot[pos]: the scratch block holding the partial sum of position pos once it is there.
  std::vector<int> slot(n, -1);
  auto assignSlots = [&](const std::vector<int>& virtuals) {
    int next = 0;
    for (int u : virtuals) {
      for (int q = g.firstPos(u); q < g.firstPos(u + 1); ++q) slot[q] = next++;
    }
  };
  bool inScratch = false;
  if (g.takesOver(x)) {
    assignSlots(held);
    for (int q = 0; q < n; ++q) {
      pieces(q, [&](int pos, Span c) {
        lane.steps.push_back(
            makeRecvReduceCopy(order.rankAt(x - 1), ctx.in(inputBlock(pos) + c.begin),
                               ctx.scr(slot[pos] * count + c.begin), ctx.bytes(c.len)));
      });
    }
    inScratch = true;
  }
  auto current = [&](int pos, uint64_t elem) {
    return inScratch ? ctx.scr(slot[pos] * count + elem) : ctx.in(inputBlock(pos) + elem);
  };
  const int v = g.virtualOf(x);
  const uint32_t chunk = ctx.bytes(ctx.chunkElems());
  for (int d = 1; d < g.p(); d <<= 1) {
    const int partner = order.rankAt(g.posOfVirtual(v ^ d));
    const bool last = 2 * d == g.p();
    std::vector<int> keep;
    std::vector<int> give;
    for (int u : held) ((u & d) == (v & d) ? keep : give).push_back(u);
    if (!inScratch && !last) assignSlots(keep);  // the first step picks the blocks scratch holds
    std::vector<ExchangePiece> sends;
    std::vector<ExchangePiece> recvs;
    for (int u : give) {
      for (int q = g.firstPos(u); q < g.firstPos(u + 1); ++q) {
        pieces(q, [&](int pos, Span c) {
          sends.push_back({current(pos, c.begin), {}, ctx.bytes(c.len), false});
        });
      }
    }
    for (int u : keep) {
      for (int q = g.firstPos(u); q < g.firstPos(u + 1); ++q) {
        pieces(q, [&](int pos, Span c) {
          const BufferRef dst =
              last && pos == x ? ctx.out(c.begin) : ctx.scr(slot[pos] * count + c.begin);
          recvs.push_back({dst, current(pos, c.begin), ctx.bytes(c.len), last});
        });
      }
    }
    // Between the first step (blocks of every other rank in the input) and the last (a block
    // bound for Output), both partners hold these blocks in runs of scratch alike, and join
    // each run and cut it into chunks at the same places.
    if (d > 1 && !last) {
      sends = joinAdjacent(sends, chunk);
      recvs = joinAdjacent(recvs, chunk);
    }
    appendExchange(lane, partner, sends, partner, recvs, true);
    inScratch = true;
    held = keep;
  }
  if (g.takesOver(x)) {
    pieces(x - 1, [&](int pos, Span c) {
      lane.steps.push_back(
          makeSend(order.rankAt(x - 1), ctx.scr(slot[pos] * count + c.begin), ctx.bytes(c.len)));
    });
  }
  uint64_t used = 0;
  for (int q : slot) used += q >= 0;
  scratchBlocks = std::max(scratchBlocks, used);
}

}  // namespace

Plan buildRhdPlan(const PlanRequest& request) {
  uint64_t scratchBlocks = 0;
  auto fillLane = [&](const PlanContext& ctx, const ChannelPart& part, Lane& lane) {
    if (request.coll == Collective::kAllReduce) {
      rhdAllReduce(ctx, part, lane);
    } else {
      rhReduceScatter(ctx, part, lane, scratchBlocks);
    }
  };
  Plan plan = buildLanePerChannel(PlanContext(request), fillLane);
  plan.scratchBytes = scratchBlocks * request.count * request.elemSize;
  return plan;
}

}  // namespace braid
