// Tree algorithms: pipelined reduction up and broadcast down binary trees.
//
// All-reduce: chunks flow up a binary tree, each interior rank adding its share to what its (one
// or two) children send before passing the sum to its parent; the root adds its own share,
// finalizes (Avg), keeps the result and starts it down the tree, where each rank keeps a copy and
// forwards it to its children. A non-root rank runs the two directions as two lanes (reduce-up
// and broadcast-down): they use disjoint connectors, and keeping them apart lets chunk k+1 go up
// while chunk k comes down without one direction's FIFOs ever waiting on the other's. The root
// reduces once per chunk and every other rank copies that result, so all ranks get the same bits.
// The tree is the double binary tree: two trees over the ring order in which the interior ranks
// of one are leaves of the other, so with two or more channels each tree carries half the
// message and no rank forwards more than about the message size in either direction (a single
// tree makes its interior ranks do twice that). The trees use different channels because they
// may link the same two ranks in opposite directions.
//   cost: 2 ceil(log2 n) alpha + (chunks - 1) alpha + ~N beta + N/2 gamma per rank
// against the ring's 2(n-1) alpha: trees win on latency for mid-sized messages at large n.
//
// Broadcast and reduce are the two halves alone over trees of the n-1 other ranks hung below the
// root: the root sends each chunk to the top of the tree (broadcast) or receives the top's partial
// sum, adds its own share and finalizes (reduce).
//   cost: (ceil(log2 n) + chunks - 1) alpha + N beta (+ N gamma for reduce)
#include "algorithms/builder.h"

namespace braid {

namespace {

// Where one rank sits in one tree: its parent and children as ranks.
struct TreeSeat {
  int parent = -1;
  std::vector<int> children;
};

template <typename RankOfMember>
TreeSeat seatOf(int members, int variant, int member, RankOfMember rankOfMember) {
  const TreeLinks links = binaryTreeLinks(members, variant, member);
  TreeSeat seat;
  if (links.parent >= 0) seat.parent = rankOfMember(links.parent);
  for (int i = 0; i < links.nchildren; ++i)
    seat.children.push_back(rankOfMember(links.children[i]));
  return seat;
}

// A step receiving from every child (recvPeer list) and/or sending to every child.
void addChildren(Step& s, const std::vector<int>& children, bool recv, bool send) {
  for (size_t i = 1; i < children.size(); ++i) {
    if (recv) addRecvPeer(s, children[i]);
    if (send) addSendPeer(s, children[i]);
  }
}

Plan treeAllReduce(const PlanContext& ctx) {
  const int n = ctx.nranks();
  const RingOrder order(ctx.request(), false);
  auto rankOfMember = [&](int x) { return order.rankAt(x); };
  const int me = order.posOf(ctx.rank());
  auto addLanes = [&](const PlanContext&, const TreePart& part, Plan& plan) {
    const TreeSeat seat = seatOf(n, part.variant, me, rankOfMember);
    const std::vector<int>& kids = seat.children;
    Lane up{part.channel, {}};
    Lane down{part.channel, {}};
    forEachChunk(part.span, ctx.chunkElems(), [&](Span c) {
      const uint32_t bytes = ctx.bytes(c.len);
      if (seat.parent < 0) {  // the root: reduce, finalize, keep, send down
        Step s = makeRecvReduceCopySend(kids[0], kids[0], ctx.in(c.begin), ctx.out(c.begin), bytes);
        addChildren(s, kids, true, true);
        s.flags |= kStepFinalize;
        up.steps.push_back(s);
      } else if (kids.empty()) {
        up.steps.push_back(makeSend(seat.parent, ctx.in(c.begin), bytes));
        down.steps.push_back(makeRecv(seat.parent, ctx.out(c.begin), bytes));
      } else {
        Step s = makeRecvReduceSend(kids[0], seat.parent, ctx.in(c.begin), bytes);
        addChildren(s, kids, true, false);
        up.steps.push_back(s);
        Step d = makeRecvCopySend(seat.parent, kids[0], ctx.out(c.begin), bytes);
        addChildren(d, kids, false, true);
        down.steps.push_back(d);
      }
    });
    plan.lanes.push_back(std::move(up));
    plan.lanes.push_back(std::move(down));
  };
  return buildOverParts(ctx, treeParts(ctx.count(), ctx.request().nchannels), addLanes);
}

// Broadcast (down = true) or reduce over trees of the other ranks, hung below the root.
Plan treeRooted(const PlanContext& ctx, bool down) {
  const int n = ctx.nranks();
  const int root = ctx.request().root;
  const RingOrder order(ctx.request(), false);
  const int rootPos = order.posOf(root);
  auto rankOfMember = [&](int m) { return order.rankAt(rootPos + 1 + m); };
  const int me = ((order.posOf(ctx.rank()) - rootPos - 1) % n + n) % n;  // n-1: the root
  auto addLane = [&](const PlanContext&, const TreePart& part, Plan& plan) {
    const int top = rankOfMember(binaryTreeRoot(n - 1, part.variant));
    TreeSeat seat;
    if (me < n - 1) {
      seat = seatOf(n - 1, part.variant, me, rankOfMember);
      if (seat.parent < 0) seat.parent = root;
    }
    const std::vector<int>& kids = seat.children;
    Lane lane{part.channel, {}};
    forEachChunk(part.span, ctx.chunkElems(), [&](Span c) {
      const uint32_t bytes = ctx.bytes(c.len);
      const BufferRef in = ctx.in(c.begin);
      const BufferRef out = ctx.out(c.begin);
      Step s;
      if (down) {
        if (ctx.rank() == root) {
          s = ctx.inPlace() ? makeSend(top, in, bytes) : makeCopySend(top, in, out, bytes);
        } else if (kids.empty()) {
          s = makeRecv(seat.parent, out, bytes);
        } else {
          s = makeRecvCopySend(seat.parent, kids[0], out, bytes);
          addChildren(s, kids, false, true);
        }
      } else {
        if (ctx.rank() == root) {
          s = makeRecvReduceCopy(top, in, out, bytes);
          s.flags |= kStepFinalize;
        } else if (kids.empty()) {
          s = makeSend(seat.parent, in, bytes);
        } else {
          s = makeRecvReduceSend(kids[0], seat.parent, in, bytes);
          addChildren(s, kids, true, false);
        }
      }
      lane.steps.push_back(s);
    });
    plan.lanes.push_back(std::move(lane));
  };
  return buildOverParts(ctx, treeParts(ctx.count(), ctx.request().nchannels), addLane);
}

}  // namespace

Plan buildTreePlan(const PlanRequest& request) {
  const PlanContext ctx(request);
  if (request.coll == Collective::kAllReduce) return treeAllReduce(ctx);
  return treeRooted(ctx, request.coll == Collective::kBroadcast);
}

}  // namespace braid
