// Direct (one-shot) all-reduce: the smallest-latency algorithm for tiny messages.
//
// For each chunk every rank sends its share to all n-1 others at once (Send steps of up to
// kMaxStepPeers peers each) and then folds the n shares in the fixed rank order 0, 1, ..., n-1:
// it receives rank 0's share (or starts from its own), then reduces in each next rank's share as
// it arrives, its own share included at its own turn, and the last reduction finalizes. Every rank
// evaluates the same expression ((x0 ⊕ x1) ⊕ x2) ⊕ ..., so all get the same bits. The running
// sum lives in Output, or in a chunk of scratch per channel when the call is in place (Output is
// then the Input, which must stay intact until the own share has been added).
//   cost: alpha + (n-1) N beta injected per rank (spread over n-1 links) + (n-1) N gamma
// One round trip instead of log2 n (rd) or 2(n-1) (ring): it wins for messages of a few KiB among
// a handful of ranks on a full mesh (one host's shared memory, NVLink/NVSwitch), and loses as soon
// as n - 1 copies of the message cost more than the rounds it saves - see rd.cc.
#include "algorithms/builder.h"

namespace braid {

namespace {

void directAllReduce(const PlanContext& ctx, const ChannelPart& part, Lane& lane,
                     uint64_t accBase) {
  const int n = ctx.nranks();
  const int rank = ctx.rank();
  forEachChunk(part.span, ctx.chunkElems(), [&](Span c) {
    const uint32_t bytes = ctx.bytes(c.len);
    const BufferRef in = ctx.in(c.begin);
    const BufferRef acc = ctx.inPlace() ? ctx.scr(accBase) : ctx.out(c.begin);
    for (int i = 1; i < n; i += kMaxStepPeers) {
      Step s = makeSend((rank + i) % n, in, bytes);
      for (int k = i + 1; k < std::min(n, i + kMaxStepPeers); ++k) addSendPeer(s, (rank + k) % n);
      lane.steps.push_back(s);
    }
    BufferRef sum{};  // where the running sum of ranks 0..q-1 is; none before rank 0
    for (int q = 0; q < n; ++q) {
      const BufferRef dst = q == n - 1 ? ctx.out(c.begin) : acc;
      Step s;
      if (sum.buffer == BufferId::kNone) {
        if (q == rank) {
          sum = in;  // nothing to do: the running sum is the own share
          continue;
        }
        s = makeRecv(q, dst, bytes);
      } else if (q == rank) {
        s = makeLocalReduce(sum, in, dst, bytes);
      } else {
        s = makeRecvReduceCopy(q, sum, dst, bytes);
      }
      if (q == n - 1) s.flags |= kStepFinalize;
      lane.steps.push_back(s);
      sum = dst;
    }
  });
}

}  // namespace

Plan buildDirectPlan(const PlanRequest& request) {
  const PlanContext ctx(request);
  Plan plan = emptyPlan(request);
  if (request.nranks == 1) {
    appendSingleRankCopy(ctx, plan);
    return plan;
  }
  const std::vector<ChannelPart> parts = channelParts(request.count, request.nchannels);
  const uint64_t accElems = std::min(ctx.chunkElems(), parts[0].span.len);  // part 0 is largest
  for (const ChannelPart& part : parts) {
    Lane lane{part.channel, {}};
    directAllReduce(ctx, part, lane, part.channel * accElems);
    plan.lanes.push_back(std::move(lane));
  }
  if (request.inPlace) plan.scratchBytes = parts.size() * accElems * request.elemSize;
  return plan;
}

}  // namespace braid
