// Recursive doubling: all-reduce, all-gather, reduce-scatter and all-to-all in ceil(log2 n)
// rounds.
//
// All-reduce (a latency algorithm): in round d = 1, 2, 4, ... each rank exchanges its whole
// current vector with the rank whose virtual index differs in bit d and adds what arrives, so
// after log2 p rounds every rank holds the full sum; the last round finalizes. Both partners
// combine the same two operands, and ⊕ commutes, so all ranks end with the same bits. Within a
// round the chunks are skewed by one - step i sends chunk i while it receives and reduces chunk
// i-1 - so the two independent halves of a step never touch the same elements. Ranks beyond a
// power of two fold in and out as in rhd (FoldGroup).
//   cost: log2(p) (alpha + N beta + N gamma), + 2 (alpha + N beta) with a fold
// Compared with "direct" (every rank sends its vector to all others: alpha + (n-1) N beta of
// injected bytes, spread over n-1 links) recursive doubling sends only log2 n vectors per rank,
// so it is the small-message choice when n is large or ranks share a NIC; direct wins for tiny
// messages among few ranks on a full mesh (NVLink, NVSwitch, one host's shared memory), where its
// single round beats log2 n rounds. Past a few tens of KiB both lose to rhd and the ring.
//
// All-gather: with n a power of two, in round d each rank sends the d blocks it holds to the rank
// whose position differs in bit d and receives that rank's d blocks. Otherwise it is Bruck's
// algorithm: in round d a rank sends the blocks of positions x..x+m-1 (m = min(d, n-d)) to
// position x-d and receives those of x+d..x+d+m-1 from x+d. Blocks go straight to their place in
// Output, so no final rotation is needed. Blocks smaller than a chunk that lie side by side in
// Output (ranks numbered in ring order, one channel) travel as one message, so a round costs one
// alpha (two where it wraps past the last rank) however many blocks it moves.
//   cost: ceil(log2 n) alpha + (n-1)/n N' beta (N' = n * count * elemSize)
//
// Reduce-scatter is the all-gather run backwards over packed scratch (rdReduceScatter), one
// message per round and chunk: the latency choice for small blocks among many ranks, where the
// ring pays n-1 hand-offs and halving-doubling (rhd) sends each block of its first rounds as a
// message of its own.
//   cost: ceil(log2 n) (alpha + gamma) + (n-1)/n N' (beta + gamma) + N' of local copies
//
// All-to-all is Bruck's algorithm, for small blocks among many ranks: block i of a rank is the
// one for the position i after it, and in round d = 1, 2, 4, ... a rank sends every block whose
// index has bit d set to position x+d and receives the same indices from position x-d. After
// ceil(log2 n) rounds block i holds what position x-i has for x, and it got there in the round
// of its highest bit, so that round writes it straight to Output. A round's blocks are packed
// into scratch to travel in one message; a block between rounds waits in scratch at its index.
// Each rank talks to ceil(log2 n) peers each way rather than n-1, which at hundreds of ranks
// spares the connections and the per-message cost that pairwise exchange pays n-1 times.
//   cost: ceil(log2 n) (alpha + N/2 beta) + about 3 N of local copies (N = n * count * elemSize)
#include <bit>

#include "algorithms/builder.h"

namespace braid {

namespace {

void rdAllReduce(const PlanContext& ctx, const ChannelPart& part, Lane& lane) {
  const FoldGroup g(ctx.nranks());
  const RingOrder order(ctx.request(), false);
  const int x = order.posOf(ctx.rank());
  std::vector<Span> chunks;
  forEachChunk(part.span, ctx.chunkElems(), [&](Span c) { chunks.push_back(c); });
  if (g.sitsOut(x)) {
    const int partner = order.rankAt(x + 1);
    for (Span c : chunks)
      lane.steps.push_back(makeSend(partner, ctx.in(c.begin), ctx.bytes(c.len)));
    for (Span c : chunks)
      lane.steps.push_back(makeRecv(partner, ctx.out(c.begin), ctx.bytes(c.len)));
    return;
  }
  BufferId work = BufferId::kInput;
  if (g.takesOver(x)) {
    for (Span c : chunks) {
      lane.steps.push_back(makeRecvReduceCopy(order.rankAt(x - 1), ctx.in(c.begin),
                                              ctx.out(c.begin), ctx.bytes(c.len)));
    }
    work = BufferId::kOutput;
  }
  const int v = g.virtualOf(x);
  for (int d = 1; d < g.p(); d <<= 1) {
    const int partner = order.rankAt(g.posOfVirtual(v ^ d));
    const bool last = 2 * d == g.p();
    for (size_t i = 0; i <= chunks.size(); ++i) {
      Step s;
      if (i == 0) {
        s = makeSend(partner, ctx.at(work, chunks[0].begin), ctx.bytes(chunks[0].len));
      } else {
        const Span done = chunks[i - 1];
        if (i < chunks.size()) {
          const Span next = chunks[i];
          s = makeSendRecvReduce(partner, ctx.at(work, next.begin), ctx.bytes(next.len), partner,
                                 ctx.at(work, done.begin), ctx.out(done.begin),
                                 ctx.bytes(done.len));
        } else {
          s = makeRecvReduceCopy(partner, ctx.at(work, done.begin), ctx.out(done.begin),
                                 ctx.bytes(done.len));
        }
        if (last) s.flags |= kStepFinalize;
      }
      lane.steps.push_back(s);
    }
    work = BufferId::kOutput;
  }
  if (g.takesOver(x)) {
    for (Span c : chunks) {
      lane.steps.push_back(makeSend(order.rankAt(x - 1), ctx.out(c.begin), ctx.bytes(c.len)));
    }
  }
}

void rdAllGather(const PlanContext& ctx, const ChannelPart& part, Lane& lane) {
  const int n = ctx.nranks();
  const uint64_t count = ctx.count();
  const RingOrder order(ctx.request(), false);
  const int x = order.posOf(ctx.rank());
  // Blocks smaller than a chunk that lie side by side in Output (ranks in ring order, one
  // channel) go as one run, cut into chunks; the own block too, from Output once the copy below
  // has put it there, so that every rank's rounds have the same shape. Larger blocks fill chunks
  // on their own and each goes alone, the own one from Input, so that its first message need not
  // wait for the copy. Both ends cut the same runs, so the pieces match.
  const bool merge = part.span.begin == 0 && part.span.len == count && count < ctx.chunkElems();
  auto pieces = [&](const std::vector<int>& positions, int senderPos, bool send) {
    std::vector<ExchangePiece> out;
    for (size_t i = 0; i < positions.size();) {
      size_t j = i + 1;
      while (j < positions.size() && merge &&
             order.rankAt(positions[j]) == order.rankAt(positions[j - 1]) + 1) {
        ++j;
      }
      const int first = positions[i];
      const BufferRef start = send && !merge && first == senderPos
                                  ? ctx.in(part.span.begin)
                                  : ctx.out(order.rankAt(first) * count + part.span.begin);
      const uint64_t startElem = start.offset / ctx.elemSize();
      forEachChunk(Span{0, (j - i) * part.span.len}, ctx.chunkElems(), [&](Span c) {
        out.push_back({ctx.at(start.buffer, startElem + c.begin), {}, ctx.bytes(c.len), false});
      });
      i = j;
    }
    return out;
  };
  if (!ctx.inPlace()) {
    ctx.appendCopy(lane, ctx.in(part.span.begin), ctx.out(ctx.rank() * count + part.span.begin),
                   part.span.len);
  }
  const bool powerOfTwo = (n & (n - 1)) == 0;
  for (int d = 1; d < n; d <<= 1) {
    std::vector<int> sent;
    std::vector<int> received;
    int to = 0;
    int from = 0;
    if (powerOfTwo) {
      const int base = x & ~(d - 1);
      to = from = x ^ d;
      for (int i = 0; i < d; ++i) {
        sent.push_back(base + i);
        received.push_back((base ^ d) + i);
      }
    } else {
      const int m = std::min(d, n - d);
      to = (x - d + n) % n;
      from = (x + d) % n;
      for (int i = 0; i < m; ++i) {
        sent.push_back((x + i) % n);
        received.push_back((x + d + i) % n);
      }
    }
    appendExchange(lane, order.rankAt(to), pieces(sent, x, true), order.rankAt(from),
                   pieces(received, from, false), false);
  }
}

// Local copies in order, where one continues the last in both buffers merged into one.
class CopyRun {
 public:
  CopyRun(const PlanContext& ctx, Lane& lane) : ctx_(ctx), lane_(lane) {}
  ~CopyRun() { flush(); }
  void add(BufferRef src, BufferRef dst, uint64_t len) {
    const uint64_t bytes = len_ * ctx_.elemSize();
    if (len_ > 0 && src.buffer == src_.buffer && dst.buffer == dst_.buffer &&
        src.offset == src_.offset + bytes && dst.offset == dst_.offset + bytes) {
      len_ += len;
      return;
    }
    flush();
    src_ = src;
    dst_ = dst;
    len_ = len;
  }
  void flush() {
    if (len_ > 0) ctx_.appendCopy(lane_, src_, dst_, len_);
    len_ = 0;
  }

 private:
  const PlanContext& ctx_;
  Lane& lane_;
  BufferRef src_;
  BufferRef dst_;
  uint64_t len_ = 0;
};

// Reduce-scatter: the all-gather run backwards. Scratch holds this part of every block, one
// slice each, so that every round sends one run of it (one message per chunk, whatever n is).
// With n a power of two the slices are in position order and a round with d = n/2, ..., 2, 1
// halves the run [base, base + 2d) a rank holds: it sends the half without its own block to
// position x ^ d and adds what comes back into the other. Otherwise it is Bruck's all-gather
// backwards: slice j is the block of position x+j, and a round that starts with slices [0, h)
// sends [d, h) (d the largest power of two below h) to position x+d, where they are its slices
// [0, h-d), and adds what position x-d sends into its own [0, h-d); then [0, d) remain.
void rdReduceScatter(const PlanContext& ctx, const ChannelPart& part, Lane& lane) {
  const int n = ctx.nranks();
  const uint64_t count = ctx.count();
  const uint64_t len = part.span.len;
  const RingOrder order(ctx.request(), false);
  const int x = order.posOf(ctx.rank());
  if (n == 1) {
    if (!ctx.inPlace()) {
      ctx.appendCopy(lane, ctx.in(part.span.begin), ctx.out(part.span.begin), len);
    }
    return;
  }
  const bool powerOfTwo = (n & (n - 1)) == 0;
  // Slice j of this part's n, parts one after another; and the position whose block it holds.
  const uint64_t base = n * part.span.begin;
  auto slice = [&](uint64_t j) { return base + j * len; };
  auto positionOf = [&](int j) { return powerOfTwo ? j : (x + j) % n; };
  {
    CopyRun copies(ctx, lane);
    for (int j = 0; j < n; ++j) {
      copies.add(ctx.in(order.rankAt(positionOf(j)) * count + part.span.begin), ctx.scr(slice(j)),
                 len);
    }
  }
  // One round: `blocks` slices from `give` go to `to`; as many from `from` are added into `keep`.
  auto round = [&](int to, uint64_t give, int from, uint64_t keep, uint64_t blocks, bool last) {
    std::vector<ExchangePiece> sends;
    std::vector<ExchangePiece> recvs;
    forEachChunk(Span{0, blocks * len}, ctx.chunkElems(), [&](Span c) {
      sends.push_back({ctx.scr(slice(give) + c.begin), {}, ctx.bytes(c.len), false});
      const BufferRef dst =
          last ? ctx.out(part.span.begin + c.begin) : ctx.scr(slice(keep) + c.begin);
      recvs.push_back({dst, ctx.scr(slice(keep) + c.begin), ctx.bytes(c.len), last});
    });
    appendExchange(lane, to, sends, from, recvs, true);
  };
  if (powerOfTwo) {
    for (int d = n / 2; d >= 1; d /= 2) {
      const int low = x & ~(2 * d - 1);  // the run held: [low, low + 2d)
      const bool upper = (x & d) != 0;
      const int partner = order.rankAt(x ^ d);
      round(partner, upper ? low : low + d, partner, upper ? low + d : low, d, d == 1);
    }
    return;
  }
  for (int h = n; h > 1;) {
    const int d = std::bit_floor(static_cast<unsigned>(h - 1));
    round(order.rankAt(x + d), d, order.rankAt(x - d), 0, h - d, d == 1);
    h = d;
  }
}

// Scratch of Bruck's all-to-all, in blocks: n waiting places (block i at place i), then the
// blocks of the largest round, packed to go and packed as they come.
int bruckMostMoved(int n) {
  int most = 0;
  for (int d = 1; d < n; d <<= 1) {
    int moved = 0;
    for (int i = 1; i < n; ++i) moved += (i & d) != 0;
    most = std::max(most, moved);
  }
  return most;
}

void rdAllToAll(const PlanContext& ctx, const ChannelPart& part, Lane& lane) {
  const int n = ctx.nranks();
  const uint64_t count = ctx.count();
  const uint64_t len = part.span.len;
  const RingOrder order(ctx.request(), false);
  const int x = order.posOf(ctx.rank());
  const uint64_t most = static_cast<uint64_t>(bruckMostMoved(n));
  // This part's packed areas: `most` slices of len elements each, parts one after another.
  const uint64_t sendPack = n * count + most * part.span.begin;
  const uint64_t recvPack = n * count + most * count + most * part.span.begin;
  auto blockOf = [&](int64_t pos) { return order.rankAt(pos) * count + part.span.begin; };
  auto waiting = [&](int i) { return ctx.scr(i * count + part.span.begin); };
  // Where block i is now: in Input until it first moves (in place: all in scratch from the start,
  // since Output's blocks are written before every Input block has left).
  std::vector<BufferRef> at(static_cast<size_t>(n));
  {
    CopyRun copies(ctx, lane);
    for (int i = 1; i < n; ++i) {
      at[size_t(i)] = ctx.in(blockOf(x + i));
      if (ctx.inPlace()) {
        copies.add(at[size_t(i)], waiting(i), len);
        at[size_t(i)] = waiting(i);
      }
    }
    if (!ctx.inPlace()) copies.add(ctx.in(blockOf(x)), ctx.out(blockOf(x)), len);
  }
  for (int d = 1; d < n; d <<= 1) {
    std::vector<int> moved;
    for (int i = 1; i < n; ++i) {
      if (i & d) moved.push_back(i);
    }
    {
      CopyRun copies(ctx, lane);
      for (size_t j = 0; j < moved.size(); ++j) {
        copies.add(at[size_t(moved[j])], ctx.scr(sendPack + j * len), len);
      }
    }
    std::vector<ExchangePiece> sends;
    std::vector<ExchangePiece> recvs;
    forEachChunk(Span{0, moved.size() * len}, ctx.chunkElems(), [&](Span c) {
      sends.push_back({ctx.scr(sendPack + c.begin), {}, ctx.bytes(c.len), false});
      recvs.push_back({ctx.scr(recvPack + c.begin), {}, ctx.bytes(c.len), false});
    });
    appendExchange(lane, order.rankAt(x + d), sends, order.rankAt(x - d), recvs, false);
    CopyRun copies(ctx, lane);
    for (size_t j = 0; j < moved.size(); ++j) {
      const int i = moved[j];
      const bool arrived = i < 2 * d;  // d is i's highest bit: no later round moves it
      const BufferRef to = arrived ? ctx.out(blockOf(x - i)) : waiting(i);
      copies.add(ctx.scr(recvPack + j * len), to, len);
      at[size_t(i)] = to;
    }
  }
}

// An empty part gets no steps: rdAllReduce's skewed rounds start from the part's first chunk.
void rdLane(const PlanContext& ctx, const ChannelPart& part, Lane& lane) {
  if (part.span.len == 0) return;
  switch (ctx.request().coll) {
    case Collective::kAllReduce: rdAllReduce(ctx, part, lane); break;
    case Collective::kAllToAll: rdAllToAll(ctx, part, lane); break;
    case Collective::kReduceScatter: rdReduceScatter(ctx, part, lane); break;
    default: rdAllGather(ctx, part, lane); break;
  }
}

}  // namespace

Plan buildRdPlan(const PlanRequest& request) {
  Plan plan = buildLanePerChannel(PlanContext(request), rdLane);
  if (request.coll == Collective::kAllToAll && request.nranks > 1) {
    const uint64_t blocks = request.nranks + 2 * uint64_t(bruckMostMoved(request.nranks));
    plan.scratchBytes = blocks * request.count * request.elemSize;
  }
  if (request.coll == Collective::kReduceScatter && request.nranks > 1) {
    plan.scratchBytes = uint64_t(request.nranks) * request.count * request.elemSize;
  }
  return plan;
}

}  // namespace braid
