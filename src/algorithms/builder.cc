#include "algorithms/builder.h"

#include <bit>
#include <numeric>

namespace braid {

Span evenPart(Span whole, uint64_t parts, uint64_t i) {
  const uint64_t base = whole.len / parts;
  const uint64_t extra = whole.len % parts;
  return Span{whole.begin + i * base + std::min(i, extra), base + (i < extra ? 1 : 0)};
}

std::vector<ChannelPart> channelParts(uint64_t count, int nchannels) {
  std::vector<ChannelPart> parts;
  parts.reserve(nchannels);
  for (int c = 0; c < nchannels; ++c) {
    parts.push_back({c, evenPart(Span{0, count}, nchannels, c)});
  }
  return parts;
}

RingOrder::RingOrder(const PlanRequest& request, bool reversed) {
  rankAt_ = request.ring;
  if (rankAt_.empty()) {
    rankAt_.resize(request.nranks);
    std::iota(rankAt_.begin(), rankAt_.end(), 0);
  }
  if (reversed) std::reverse(rankAt_.begin(), rankAt_.end());
  posOf_.assign(rankAt_.size(), 0);
  for (size_t i = 0; i < rankAt_.size(); ++i) posOf_[rankAt_[i]] = static_cast<int>(i);
}

int RingOrder::rankAt(int64_t pos) const {
  const int64_t n = size();
  return rankAt_[((pos % n) + n) % n];
}

PlanContext::PlanContext(const PlanRequest& request)
    : request_(request), chunkElems_(request.chunkBytes / request.elemSize) {}

void PlanContext::appendCopy(Lane& lane, BufferRef src, BufferRef dst, uint64_t len) const {
  const uint64_t es = request_.elemSize;
  forEachChunk(Span{0, len}, chunkElems_, [&](Span c) {
    lane.steps.push_back(makeLocalCopy({src.buffer, src.offset + c.begin * es},
                                       {dst.buffer, dst.offset + c.begin * es}, bytes(c.len)));
  });
}

std::vector<ExchangePiece> joinAdjacent(const std::vector<ExchangePiece>& pieces,
                                        uint32_t maxBytes) {
  auto follows = [](const BufferRef& a, uint64_t bytes, const BufferRef& b) {
    return a.buffer == b.buffer && a.offset + bytes == b.offset;
  };
  struct Run {
    ExchangePiece first;
    uint64_t bytes = 0;
  };
  std::vector<Run> runs;
  for (const ExchangePiece& p : pieces) {
    if (!runs.empty()) {
      Run& last = runs.back();
      const bool src2Follows =
          (last.first.src2.buffer == BufferId::kNone && p.src2.buffer == BufferId::kNone) ||
          follows(last.first.src2, last.bytes, p.src2);
      if (follows(last.first.ref, last.bytes, p.ref) && src2Follows &&
          last.first.finalize == p.finalize) {
        last.bytes += p.bytes;
        continue;
      }
    }
    runs.push_back({p, p.bytes});
  }
  std::vector<ExchangePiece> joined;
  for (const Run& run : runs) {
    for (uint64_t at = 0; at < run.bytes; at += maxBytes) {
      ExchangePiece piece = run.first;
      piece.ref.offset += at;
      if (piece.src2.buffer != BufferId::kNone) piece.src2.offset += at;
      piece.bytes = static_cast<uint32_t>(std::min<uint64_t>(maxBytes, run.bytes - at));
      joined.push_back(piece);
    }
  }
  return joined;
}

void appendExchange(Lane& lane, int sendPeer, const std::vector<ExchangePiece>& sends, int recvPeer,
                    const std::vector<ExchangePiece>& recvs, bool reduce) {
  const size_t steps = std::max(sends.size(), recvs.size());
  for (size_t i = 0; i < steps; ++i) {
    const ExchangePiece* s = i < sends.size() ? &sends[i] : nullptr;
    const ExchangePiece* r = i < recvs.size() ? &recvs[i] : nullptr;
    Step step;
    if (s && r) {
      step = reduce ? makeSendRecvReduce(sendPeer, s->ref, s->bytes, recvPeer, r->src2, r->ref,
                                         r->bytes)
                    : makeSendRecv(sendPeer, s->ref, s->bytes, recvPeer, r->ref, r->bytes);
    } else if (s) {
      step = makeSend(sendPeer, s->ref, s->bytes);
    } else {
      step = reduce ? makeRecvReduceCopy(recvPeer, r->src2, r->ref, r->bytes)
                    : makeRecv(recvPeer, r->ref, r->bytes);
    }
    if (r && r->finalize) step.flags |= kStepFinalize;
    lane.steps.push_back(step);
  }
}

FoldGroup::FoldGroup(int n) {
  while (p_ * 2 <= n) {
    p_ *= 2;
    ++log2p_;
  }
  r_ = n - p_;
}

namespace {

// binaryTree's labels: member x is label x + 1 (variant 0) or (x + 1) mod m + 1 (variant 1).
int treeLabelOf(int m, int variant, int member) {
  return variant == 0 ? member + 1 : (member + 1) % m + 1;
}
int treeMemberOf(int m, int variant, int label) {
  return variant == 0 ? label - 1 : (label - 2 + m) % m;
}

// The children of label v, in binaryTree's order; returns how many.
int treeChildLabels(int m, int v, std::array<int, 2>& kids) {
  if (v % 2 != 0) return 0;
  const int h = std::countr_zero(static_cast<unsigned>(v));
  int count = 0;
  kids[count++] = v - (1 << (h - 1));
  for (int j = h - 1; j >= 0; --j) {
    if (v + (1 << j) <= m) {
      kids[count++] = v + (1 << j);
      break;
    }
  }
  return count;
}

int treeTopLabel(int m) {
  int top = 1;
  while (top * 2 <= m) top *= 2;
  return top;
}

}  // namespace

int binaryTreeRoot(int members, int variant) {
  return treeMemberOf(members, variant, treeTopLabel(members));
}

TreeLinks binaryTreeLinks(int members, int variant, int member) {
  const int m = members;
  const int u = treeLabelOf(m, variant, member);
  TreeLinks links;
  std::array<int, 2> kids{};
  links.nchildren = treeChildLabels(m, u, kids);
  for (int i = 0; i < links.nchildren; ++i) links.children[i] = treeMemberOf(m, variant, kids[i]);
  if (u == treeTopLabel(m)) return links;
  // A left child u of v has v = u + 2^ctz(u); a right child has v = u - 2^ctz(u).
  const int low = 1 << std::countr_zero(static_cast<unsigned>(u));
  for (int v : {u + low, u - low}) {
    if (v < 1 || v > m) continue;
    const int count = treeChildLabels(m, v, kids);
    for (int i = 0; i < count; ++i) {
      if (kids[i] == u) links.parent = treeMemberOf(m, variant, v);
    }
  }
  return links;
}

std::vector<TreePart> treeParts(uint64_t count, int nchannels) {
  if (nchannels == 1) return {TreePart{0, 0, Span{0, count}}};
  std::vector<TreePart> parts;
  for (int c = 0; c < nchannels; ++c) {
    const int variant = c % 2;
    const Span half = evenPart(Span{0, count}, 2, variant);
    const int ofTree = (nchannels - variant + 1) / 2;  // channels variant, variant+2, ...
    parts.push_back({c, variant, evenPart(half, ofTree, c / 2)});
  }
  return parts;
}

Plan emptyPlan(const PlanRequest& request) {
  Plan plan;
  plan.coll = request.coll;
  plan.algo = request.algo;
  plan.rank = request.rank;
  plan.nranks = request.nranks;
  plan.elemSize = request.elemSize;
  const uint64_t block = request.count * request.elemSize;
  const uint64_t all = block * request.nranks;
  const bool root = request.rank == request.root;
  switch (request.coll) {
    case Collective::kAllReduce:
      plan.inputBytes = block;
      plan.outputBytes = block;
      break;
    case Collective::kBroadcast:
      plan.inputBytes = root ? block : 0;
      plan.outputBytes = block;
      break;
    case Collective::kReduce:
      plan.inputBytes = block;
      plan.outputBytes = root ? block : 0;
      break;
    case Collective::kAllGather:
      plan.inputBytes = block;
      plan.outputBytes = all;
      break;
    case Collective::kReduceScatter:
      plan.inputBytes = all;
      plan.outputBytes = block;
      break;
    case Collective::kAllToAll:
      plan.inputBytes = all;
      plan.outputBytes = all;
      break;
    case Collective::kSend: plan.inputBytes = block; break;
    case Collective::kRecv: plan.outputBytes = block; break;
  }
  return plan;
}

void appendSingleRankCopy(const PlanContext& ctx, Plan& plan) {
  if (ctx.inPlace()) return;  // Input and Output are the same elements at n = 1
  for (const ChannelPart& part : channelParts(ctx.count(), ctx.request().nchannels)) {
    Lane lane;
    lane.channel = part.channel;
    ctx.appendCopy(lane, ctx.in(part.span.begin), ctx.out(part.span.begin), part.span.len);
    plan.lanes.push_back(std::move(lane));
  }
}

}  // namespace braid
