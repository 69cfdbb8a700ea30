// Hierarchical all-reduce: cheap links inside a host, expensive ones between hosts.
//
// With h hosts of m_i ranks and K = max m_i, the message is cut into rounds of K shards, and each
// shard into h pieces of at most one chunk. In every round each rank of a host of m ranks holds
// the shards k with k mod m equal to its place in the host (a rank of a smaller host holds
// several, so every rank of the largest host holds one).
//   1. Reduce-scatter inside each host (rings over shared memory): afterwards the holder of shard
//      k has the host's sum of shard k in Output.
//   2. All-reduce across hosts: for each shard, a ring through its holders on every host (one
//      rank per host), over the shard's h pieces. This is the only traffic that leaves a host,
//      and every rank of the largest host carries a part of it, so all of a host's NICs work.
//   3. All-gather inside each host: every rank copies the shards its host mates hold.
// Each element is reduced at exactly one rank per step and copied everywhere else, so every rank
// ends with the same bits. A rank sends 2(m-1)/m N bytes inside its host and 2(h-1)/h N/K'
// across hosts (K' the shards it holds), against 2(n-1)/n N over the slowest link in a flat ring:
//   cost ~ 2(m-1) alpha_intra + 2(h-1) alpha_inter per round
//        + 2(m-1)/m N beta_intra + 2(h-1)/(h m) N beta_inter + N gamma
// The phases of a round follow each other in one lane and rounds are pipelined, as in ring.cc.
// With one host it is a ring reduce-scatter + all-gather; with one rank per host, a ring across
// hosts. Odd channels run both rings the other way round.
//
// hier_rhd is the same with phase 2 done by recursive halving and doubling among the shard's
// holders (as rhd.cc does among all ranks, folding at host counts that are not powers of two):
// the ring's 2(h-1) hand-offs between hosts per round become 2 log2(h), which is what decides a
// round's time once there are hundreds of hosts (docs/scale.md), for the same bytes on the wire:
//   cost ~ 2(m-1) alpha_intra + 2 log2(h) alpha_inter per round + the same beta and gamma terms
#include <algorithm>
#include <map>

#include "algorithms/builder.h"

namespace braid {

namespace {

/// Who sits where: hosts in ring order (by their first rank in it), members in ring order.
struct HostLayout {
  std::vector<std::vector<int>> members;  ///< per host position
  int hostPos = 0;                        ///< this rank's host
  int local = 0;                          ///< this rank's place in it
  int maxMembers = 1;                     ///< K

  HostLayout(const PlanRequest& request, bool reversed) {
    const RingOrder ring(request, reversed);
    std::map<int, int> positionOf;  // host number -> position
    for (int i = 0; i < ring.size(); ++i) {
      const int r = ring.rankAt(i);
      const int host = request.hosts.empty() ? 0 : request.hosts[r];
      auto [it, fresh] = positionOf.emplace(host, static_cast<int>(members.size()));
      if (fresh) members.emplace_back();
      if (r == request.rank) {
        hostPos = it->second;
        local = static_cast<int>(members[it->second].size());
      }
      members[it->second].push_back(r);
    }
    for (const auto& m : members) maxMembers = std::max(maxMembers, static_cast<int>(m.size()));
  }
  int hosts() const { return static_cast<int>(members.size()); }
  int size() const { return static_cast<int>(members[hostPos].size()); }
  /// The rank that holds shard k on the host at position pos (taken modulo the host count).
  int holder(int k, int pos) const {
    const auto& m = members[((pos % hosts()) + hosts()) % hosts()];
    return m[k % m.size()];
  }
  /// The rank `offset` places after this one inside the host.
  int mate(int offset) const {
    const auto& m = members[hostPos];
    const int s = static_cast<int>(m.size());
    return m[((local + offset) % s + s) % s];
  }
};

class HierRound {
 public:
  HierRound(const PlanContext& ctx, const HostLayout& layout, Span round, bool halving, Lane& lane)
      : ctx_(ctx), layout_(layout), round_(round), halving_(halving), lane_(lane) {
    // A ring across hosts needs a piece per host; halving-doubling splits shards itself, so
    // its shards are cut only into chunks (h pieces of one element each at thousands of ranks
    // would cost a step apiece inside the host).
    const uint64_t largest = shard(0).len;
    pieces_ = halving_ ? std::max<uint64_t>(1, (largest + ctx.chunkElems() - 1) / ctx.chunkElems())
                       : uint64_t(layout_.hosts());
  }

  void build() {
    const int m = layout_.size();
    if (m == 1) {
      if (!ctx_.inPlace())
        ctx_.appendCopy(lane_, ctx_.in(round_.begin), ctx_.out(round_.begin), round_.len);
    } else {
      forEachGroup([&](const std::vector<Span>& spans) { reduceScatter(spans); });
    }
    if (layout_.hosts() > 1) {
      for (int k = layout_.local; k < layout_.maxMembers; k += m) {
        if (halving_) {
          halvingDoublingAcrossHosts(k);
        } else {
          allReduceAcrossHosts(k);
        }
      }
    }
    if (m > 1) forEachGroup([&](const std::vector<Span>& spans) { allGather(spans); });
  }

 private:
  Span shard(int k) const { return evenPart(round_, layout_.maxMembers, k); }
  Span piece(int k, uint64_t b) const { return evenPart(shard(k), pieces_, b); }

  /// Calls f with the spans that end at each place of this host: for piece b of group g, place j
  /// gets piece b of shard g*m + j (empty past the last shard).
  template <typename F>
  void forEachGroup(F&& f) const {
    const int m = layout_.size();
    const int groups = (layout_.maxMembers + m - 1) / m;
    std::vector<Span> spans(m);
    for (uint64_t b = 0; b < pieces_; ++b) {
      for (int g = 0; g < groups; ++g) {
        for (int j = 0; j < m; ++j) {
          const int k = g * m + j;
          spans[j] = k < layout_.maxMembers ? piece(k, b) : Span{};
        }
        f(spans);
      }
    }
  }

  void push(Step s) { lane_.steps.push_back(s); }

  /// Ring reduce-scatter inside the host: span j ends, summed over the host, at place j.
  void reduceScatter(const std::vector<Span>& spans) {
    const int m = layout_.size();
    const int p = layout_.local;
    const int next = layout_.mate(1);
    const int prev = layout_.mate(-1);
    auto at = [&](int j) { return spans[((j % m) + m) % m]; };
    Span s = at(p - 1);
    if (s.len) push(makeSend(next, ctx_.in(s.begin), ctx_.bytes(s.len)));
    for (int t = 1; t <= m - 2; ++t) {
      s = at(p - 1 - t);
      if (s.len) push(makeRecvReduceSend(prev, next, ctx_.in(s.begin), ctx_.bytes(s.len)));
    }
    s = at(p);
    if (s.len) {
      Step step = makeRecvReduceCopy(prev, ctx_.in(s.begin), ctx_.out(s.begin), ctx_.bytes(s.len));
      if (layout_.hosts() == 1) step.flags |= kStepFinalize;
      push(step);
    }
  }

  /// Ring all-reduce of shard k among its holders, one per host, over the shard's pieces.
  void allReduceAcrossHosts(int k) {
    const int h = layout_.hosts();
    const int p = layout_.hostPos;
    const int next = layout_.holder(k, p + 1);
    const int prev = layout_.holder(k, p - 1);
    auto block = [&](int j) { return piece(k, ((j % h) + h) % h); };
    Span b = block(p);
    if (b.len) push(makeSend(next, ctx_.out(b.begin), ctx_.bytes(b.len)));
    for (int t = 1; t <= h - 2; ++t) {
      b = block(p - t);
      if (b.len) push(makeRecvReduceSend(prev, next, ctx_.out(b.begin), ctx_.bytes(b.len)));
    }
    b = block(p + 1);
    if (b.len) {
      Step s = makeRecvReduceCopySend(prev, next, ctx_.out(b.begin), ctx_.out(b.begin),
                                      ctx_.bytes(b.len));
      s.flags |= kStepFinalize;
      push(s);
    }
    for (int t = 1; t <= h - 2; ++t) {
      b = block(p + 1 - t);
      if (b.len) push(makeRecvCopySend(prev, next, ctx_.out(b.begin), ctx_.bytes(b.len)));
    }
    b = block(p + 2);
    if (b.len) push(makeRecv(prev, ctx_.out(b.begin), ctx_.bytes(b.len)));
  }

  /// The pieces of `span` in Output, one chunk each (a range of a shard may hold several).
  std::vector<ExchangePiece> outPieces(Span span) const {
    std::vector<ExchangePiece> pieces;
    forEachChunk(span, ctx_.chunkElems(), [&](Span c) {
      pieces.push_back({ctx_.out(c.begin), {}, ctx_.bytes(c.len), false});
    });
    return pieces;
  }

  /// Recursive halving and doubling of shard k among its holders, one per host, in Output: host
  /// positions are the members, folded as rhd.cc folds ranks.
  void halvingDoublingAcrossHosts(int k) {
    const FoldGroup g(layout_.hosts());
    const int x = layout_.hostPos;
    const Span whole = shard(k);
    if (g.sitsOut(x)) {
      const int partner = layout_.holder(k, x + 1);
      for (const ExchangePiece& p : outPieces(whole)) push(makeSend(partner, p.ref, p.bytes));
      for (const ExchangePiece& p : outPieces(whole)) push(makeRecv(partner, p.ref, p.bytes));
      return;
    }
    if (g.takesOver(x)) {
      const int partner = layout_.holder(k, x - 1);
      for (const ExchangePiece& p : outPieces(whole)) {
        push(makeRecvReduceCopy(partner, p.ref, p.ref, p.bytes));
      }
    }
    const int v = g.virtualOf(x);
    std::vector<Span> ranges;  // the range before each halving step, for the way back
    Span range = whole;
    for (int d = 1; d < g.p(); d <<= 1) {
      const int partner = layout_.holder(k, g.posOfVirtual(v ^ d));
      const Span lower{range.begin, range.len / 2};
      const Span upper{lower.end(), range.len - lower.len};
      const bool keepLower = (v & d) == 0;
      const Span keep = keepLower ? lower : upper;
      std::vector<ExchangePiece> recvs = outPieces(keep);
      for (ExchangePiece& r : recvs) {
        r.src2 = r.ref;  // this holder's partial of the same elements
        r.finalize = 2 * d == g.p();
      }
      appendExchange(lane_, partner, outPieces(keepLower ? upper : lower), partner, recvs, true);
      ranges.push_back(range);
      range = keep;
    }
    for (int d = g.p() / 2; d >= 1; d >>= 1) {
      const int partner = layout_.holder(k, g.posOfVirtual(v ^ d));
      const Span before = ranges.back();
      ranges.pop_back();
      const Span theirs = range.begin == before.begin ? Span{range.end(), before.len - range.len}
                                                      : Span{before.begin, before.len - range.len};
      appendExchange(lane_, partner, outPieces(range), partner, outPieces(theirs), false);
      range = before;
    }
    if (g.takesOver(x)) {
      const int partner = layout_.holder(k, x - 1);
      for (const ExchangePiece& p : outPieces(whole)) push(makeSend(partner, p.ref, p.bytes));
    }
  }

  /// Ring all-gather inside the host: place j's span reaches every place.
  void allGather(const std::vector<Span>& spans) {
    const int m = layout_.size();
    const int p = layout_.local;
    const int next = layout_.mate(1);
    const int prev = layout_.mate(-1);
    auto at = [&](int j) { return spans[((j % m) + m) % m]; };
    Span s = at(p);
    if (s.len) push(makeSend(next, ctx_.out(s.begin), ctx_.bytes(s.len)));
    for (int t = 1; t <= m - 2; ++t) {
      s = at(p - t);
      if (s.len) push(makeRecvCopySend(prev, next, ctx_.out(s.begin), ctx_.bytes(s.len)));
    }
    s = at(p + 1);
    if (s.len) push(makeRecv(prev, ctx_.out(s.begin), ctx_.bytes(s.len)));
  }

  const PlanContext& ctx_;
  const HostLayout& layout_;
  Span round_;
  bool halving_;  ///< phase 2 by halving and doubling (hier_rhd), else by a ring
  Lane& lane_;
  uint64_t pieces_ = 1;  ///< pieces of a shard, each at most a chunk
};

void hierLane(const PlanContext& ctx, const ChannelPart& part, bool halving, Lane& lane) {
  const HostLayout layout(ctx.request(), part.channel % 2 == 1);
  // hier_rhd runs a channel's part in one round: its steps across hosts wait on a partner in
  // turn, so rounds in a row would each pay 2 log2(h) network latencies.
  const uint64_t roundElems =
      halving ? std::max<uint64_t>(1, part.span.len)
              : ctx.chunkElems() * uint64_t(layout.maxMembers) * uint64_t(layout.hosts());
  forEachChunk(part.span, roundElems,
               [&](Span round) { HierRound(ctx, layout, round, halving, lane).build(); });
}

}  // namespace

Plan buildHierPlan(const PlanRequest& request) {
  return buildLanePerChannel(PlanContext(request),
                             [](const PlanContext& ctx, const ChannelPart& part, Lane& lane) {
                               hierLane(ctx, part, false, lane);
                             });
}

Plan buildHierRhdPlan(const PlanRequest& request) {
  return buildLanePerChannel(PlanContext(request),
                             [](const PlanContext& ctx, const ChannelPart& part, Lane& lane) {
                               hierLane(ctx, part, true, lane);
                             });
}

}  // namespace braid
