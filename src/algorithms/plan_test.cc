#include "algorithms/plan.h"

#include <gtest/gtest.h>

namespace braid {
namespace {

constexpr uint32_t kSlot = 64;

// A 4-rank all-reduce plan of rank 1 with 64-byte buffers and one lane holding `steps`.
Plan planWith(std::vector<Step> steps, int channel = 0) {
  Plan plan;
  plan.coll = Collective::kAllReduce;
  plan.rank = 1;
  plan.nranks = 4;
  plan.elemSize = 4;
  plan.inputBytes = 64;
  plan.outputBytes = 64;
  plan.scratchBytes = 32;
  plan.lanes.push_back(Lane{channel, std::move(steps)});
  return plan;
}

void expectRejected(const Plan& plan, const std::string& why) {
  const Status status = validatePlan(plan, kSlot);
  EXPECT_FALSE(status.ok()) << "accepted a plan that " << why << ":\n" << describePlan(plan, true);
}

PlanRequest layout(Collective coll, bool inPlace, int rank = 1, uint64_t count = 16) {
  PlanRequest request;
  request.coll = coll;
  request.nranks = 4;
  request.rank = rank;
  request.count = count;
  request.elemSize = 4;
  request.inPlace = inPlace;
  return request;
}

std::vector<bool> lendableSteps(Plan plan, const PlanRequest& request) {
  markLendableSends(plan, request);
  std::vector<bool> marked;
  for (const Lane& lane : plan.lanes) {
    for (const Step& s : lane.steps) marked.push_back((s.flags & kStepLendable) != 0);
  }
  return marked;
}

// What a step sends lies where it read it (Send, copies, the send half of independent steps)
// or where it wrote it first; reductions it sends without keeping, finalized Sends and call
// checks lie nowhere.
TEST(LentSource, NamesWhereTheSentValueLies) {
  EXPECT_EQ(lentSource(makeSend(2, input(8), 32)), input(8));
  EXPECT_EQ(lentSource(makeCopySend(2, input(8), output(0), 32)), input(8));
  EXPECT_EQ(lentSource(makeRecvCopySend(0, 2, output(16), 32)), output(16));
  EXPECT_EQ(lentSource(makeRecvReduceCopySend(0, 2, input(0), output(4), 32)), output(4));
  EXPECT_EQ(lentSource(makeSendRecv(2, input(4), 16, 0, output(0), 16)), input(4));
  EXPECT_EQ(lentSource(makeRecvReduceSend(0, 2, input(0), 32)).buffer, BufferId::kNone);
  EXPECT_EQ(lentSource(makeRecv(0, output(0), 32)).buffer, BufferId::kNone);
  EXPECT_EQ(lentSource(makeCallCheck(2, 0)).buffer, BufferId::kNone);
  Step finalized = makeCopySend(2, input(0), output(0), 32);
  finalized.flags |= kStepFinalize;
  EXPECT_EQ(lentSource(finalized), output(0));  // the dst holds the finalized value
  finalized = makeSend(2, input(0), 32);
  finalized.flags |= kStepFinalize;
  EXPECT_EQ(lentSource(finalized).buffer, BufferId::kNone);
}

// Out of place no step writes Input, so its sends may always be lent; what a step sends from
// Output may be lent unless a later step of its lane, or any step of another lane, writes a
// byte of it. Writes to Scratch do not count.
TEST(MarkLendableSends, OutOfPlaceSendsLendUnlessALaterWriteReachesThem) {
  const PlanRequest apart = layout(Collective::kAllReduce, false);
  EXPECT_EQ(lendableSteps(planWith({makeRecv(0, output(0), 32), makeSend(2, output(0), 32),
                                    makeLocalCopy(input(0), scratch(0), 32),
                                    makeSend(2, input(0), 64), makeSend(2, output(0), 64)}),
                          apart),
            (std::vector<bool>{false, true, false, true, true}));
  EXPECT_EQ(
      lendableSteps(planWith({makeRecvCopySend(0, 2, output(0), 32), makeRecv(3, output(28), 8)}),
                    apart),
      (std::vector<bool>{false, false}));
  Plan twoLanes = planWith({makeRecvCopySend(0, 2, output(0), 32)});
  twoLanes.lanes.push_back(Lane{1, {makeLocalCopy(input(0), output(16), 4)}});
  EXPECT_EQ(lendableSteps(twoLanes, apart), (std::vector<bool>{false, false}));
  twoLanes.lanes[1].steps[0].dst = output(32);
  EXPECT_EQ(lendableSteps(twoLanes, apart), (std::vector<bool>{true, false}));
}

// In place Input is Output (at the rank's block for all-gather, Output at the rank's block of
// Input for reduce-scatter): a send of Input lends only if no later step writes over it.
TEST(MarkLendableSends, InPlaceWritesToOutputReachTheInputTheyOverlay) {
  const std::vector<Step> steps = {makeSend(2, input(0), 32), makeSend(2, input(32), 32),
                                   makeRecv(0, output(0), 32)};
  EXPECT_EQ(lendableSteps(planWith(steps), layout(Collective::kAllReduce, true)),
            (std::vector<bool>{false, true, false}));
  EXPECT_EQ(lendableSteps(planWith(steps), layout(Collective::kAllReduce, false)),
            (std::vector<bool>{true, true, false}));

  // All-gather, rank 1, 64-byte blocks: Input is Output bytes 64-127.
  Plan gather = planWith({makeSend(2, input(0), 64), makeRecv(0, output(0), 64),
                          makeSend(2, input(0), 64), makeRecv(0, output(96), 32)});
  gather.outputBytes = 256;
  EXPECT_EQ(lendableSteps(gather, layout(Collective::kAllGather, true)),
            (std::vector<bool>{false, false, false, false}));
  gather.lanes[0].steps[3].dst = output(128);
  EXPECT_EQ(lendableSteps(gather, layout(Collective::kAllGather, true)),
            (std::vector<bool>{true, false, true, false}));

  // Reduce-scatter, rank 1, 16-byte blocks: Output is Input bytes 16-31.
  Plan scatter = planWith({makeSend(2, input(16), 16), makeSend(2, input(32), 16),
                           makeRecvReduceCopy(0, input(16), output(0), 16)});
  EXPECT_EQ(lendableSteps(scatter, layout(Collective::kReduceScatter, true, 1, 4)),
            (std::vector<bool>{false, true, false}));
}

TEST(ValidatePlan, AcceptsWellFormedSteps) {
  Step tree = makeRecvReduceCopySend(0, 2, input(0), output(0), 16);
  addRecvPeer(tree, 3);
  addSendPeer(tree, 3);
  Plan plan =
      planWith({makeSend(2, input(0), 16), makeRecvReduceSend(0, 2, input(16), 16),
                makeRecvCopySend(0, 2, output(32), 32), makeLocalCopy(input(0), scratch(0), 32),
                makeLocalReduce(input(0), scratch(0), output(0), 32),
                makeSendRecv(2, input(0), 8, 0, output(60), 4),
                makeSendRecvReduce(2, output(0), 64, 0, input(0), output(0), 64)});
  plan.lanes.push_back(Lane{1, {tree}});
  const Status status = validatePlan(plan, kSlot);
  EXPECT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(plan.stepCount(), 8u);
}

TEST(ValidatePlan, RejectsSizesThatAreNotWholeElements) {
  expectRejected(planWith({makeSend(2, input(0), 6)}), "sends 1.5 elements");
  expectRejected(planWith({makeSendRecv(2, input(0), 4, 0, output(0), 6)}),
                 "receives 1.5 elements");
  expectRejected(planWith({makeSend(2, input(2), 4)}), "reads at a byte offset inside an element");
  Plan noElem = planWith({makeSend(2, input(0), 4)});
  noElem.elemSize = 0;
  expectRejected(noElem, "has no element size");
}

TEST(ValidatePlan, RejectsBadPeers) {
  expectRejected(planWith({makeSend(1, input(0), 4)}), "sends to itself");
  expectRejected(planWith({makeSend(4, input(0), 4)}), "sends past the last rank");
  expectRejected(planWith({makeRecv(-1, output(0), 4)}), "receives from rank -1");
  Step noPeer = makeRecv(0, output(0), 4);
  noPeer.nrecv = 0;
  expectRejected(planWith({noPeer}), "receives from nobody");
  Step copyTwo = makeRecvCopySend(0, 2, output(0), 4);
  addRecvPeer(copyTwo, 3);
  expectRejected(planWith({copyTwo}), "copies from two peers at once");
  Step strayPeer = makeLocalCopy(input(0), output(0), 4);
  strayPeer.nrecv = 1;
  strayPeer.recvPeers[0] = 0;
  expectRejected(planWith({strayPeer}), "names a recv peer on a local copy");
  Step straySend = makeRecv(0, output(0), 4);
  straySend.nsend = 1;
  straySend.sendPeers[0] = 2;
  expectRejected(planWith({straySend}), "names a send peer on a receive");
}

TEST(ValidatePlan, RejectsTransfersLargerThanASlot) {
  expectRejected(planWith({makeSend(2, input(0), 68)}), "sends more than a slot");
  expectRejected(planWith({makeSendRecv(2, input(0), 4, 0, output(0), 68)}),
                 "receives more than a slot");
  Step uneven = makeRecvReduceSend(0, 2, input(0), 8);
  uneven.sendBytes = 4;
  expectRejected(planWith({uneven}), "sends a different size than a dependent step received");
}

TEST(ValidatePlan, RejectsRangesOutsideTheBuffers) {
  expectRejected(planWith({makeSend(2, input(60), 8)}), "reads past Input");
  expectRejected(planWith({makeRecv(0, output(64), 4)}), "writes past Output");
  expectRejected(planWith({makeLocalCopy(input(0), scratch(32), 4)}), "writes past Scratch");
  expectRejected(planWith({makeLocalReduce(input(0), scratch(28), output(0), 8)}),
                 "reads src2 past Scratch");
  expectRejected(planWith({makeRecv(0, BufferRef{}, 4)}), "writes to no buffer");
  expectRejected(planWith({makeRecv(0, input(0), 4)}), "writes the Input buffer");
  expectRejected(planWith({makeRecvReduceCopy(0, input(0), input(0), 4)}),
                 "reduces into the Input buffer");
}

TEST(ValidatePlan, RejectsLanesSharingAConnector) {
  Plan plan = planWith({makeSend(2, input(0), 4)});
  plan.lanes.push_back(Lane{0, {makeRecvReduceSend(0, 2, input(4), 4)}});
  expectRejected(plan, "sends to rank 2 from two lanes of one channel");
  plan.lanes[1].channel = 1;
  EXPECT_TRUE(validatePlan(plan, kSlot).ok()) << "lanes on different channels may share a peer";
  // Receiving from and sending to the same peer are different connectors.
  Plan both = planWith({makeSend(2, input(0), 4)});
  both.lanes.push_back(Lane{0, {makeRecv(2, output(0), 4)}});
  EXPECT_TRUE(validatePlan(both, kSlot).ok());
}

TEST(ValidatePlan, AcceptsCallChecksAndRejectsOnesThatMoveData) {
  Plan plan = planWith({makeSend(2, input(0), 4)});
  plan.lanes.push_back(Lane{4, {makeCallCheck(2, 0)}});
  plan.lanes.push_back(Lane{5, {makeCallCheck(2, -1), makeCallCheck(-1, 3)}});
  const Status status = validatePlan(plan, kSlot);
  EXPECT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(makeCallCheck(2, -1).op, StepOp::kSend);
  EXPECT_EQ(makeCallCheck(-1, 3).op, StepOp::kRecv);
  EXPECT_EQ(makeCallCheck(2, 0).op, StepOp::kSendRecv);

  Step bytes = makeCallCheck(2, 0);
  bytes.bytes = bytes.sendBytes = 4;
  expectRejected(planWith({bytes}), "has a call check that moves data");
  Step buffer = makeCallCheck(2, -1);
  buffer.src = input(0);
  expectRejected(planWith({buffer}), "has a call check that reads a buffer");
  expectRejected(planWith({makeCallCheck(1, 0)}), "has a call check to itself");
  Step reduce = makeCallCheck(2, 0);
  reduce.op = StepOp::kRecvReduceSend;
  expectRejected(planWith({reduce}), "has a call check that reduces");
  Step twice = makeCallCheck(2, -1);
  addSendPeer(twice, 3);
  expectRejected(planWith({twice}), "has a call check to two peers");
  Plan shared = planWith({makeSend(2, input(0), 4)});
  shared.lanes.push_back(Lane{0, {makeCallCheck(2, 0)}});
  expectRejected(shared, "has a call check on a connector of another lane");
  EXPECT_NE(describePlan(planWith({makeCallCheck(2, 0)}), true).find("callCheck"),
            std::string::npos);
}

TEST(Plan, NamesRoundTrip) {
  EXPECT_EQ(collectiveName(Collective::kReduceScatter), "reducescatter");
  EXPECT_EQ(collectiveName(Collective::kRecv), "recv");
  EXPECT_EQ(algorithmName(Algorithm::kRing), "ring");
  EXPECT_EQ(algorithmName(Algorithm::kDirect), "direct");
  EXPECT_EQ(stepOpName(StepOp::kSendRecvReduce), "sendRecvReduce");
  const std::string text = describePlan(planWith({makeSend(2, input(0), 4)}), true);
  EXPECT_NE(text.find("send bytes=4 to=2 src=in+0"), std::string::npos) << text;
}

Plan sends(int n, uint32_t bytes, int peer = 2) {
  return planWith(std::vector<Step>(n, makeSend(peer, input(0), bytes)));
}

TEST(SendWindow, SharesTheBudgetAmongConnectorsWithLargePayloads) {
  constexpr uint64_t kBudget = 1 << 20;
  // One connector carrying 16 x 64 KiB: the whole budget.
  Plan ring = sends(16, 64 << 10);
  EXPECT_EQ(sendWindowFor(ring, kBudget), kBudget);
  // A second channel to the same peer is a second connector: half each.
  ring.lanes.push_back(Lane{1, ring.lanes[0].steps});
  EXPECT_EQ(sendWindowFor(ring, kBudget), kBudget / 2);
  // Two peers on one channel (a tree's children) likewise.
  Plan tree = sends(16, 64 << 10);
  for (Step& s : std::vector<Step>(16, makeSend(3, input(0), 64 << 10))) {
    tree.lanes[0].steps.push_back(s);
  }
  EXPECT_EQ(sendWindowFor(tree, kBudget), kBudget / 2);
}

TEST(SendWindow, NeverUnderThreeOfTheLargestPayloadsAndNothingForSmallOnes) {
  // 512 KiB payloads on four connectors: a quarter of 1 MiB would not hold one.
  Plan wide = sends(8, 512 << 10);
  for (int c = 1; c < 4; ++c) wide.lanes.push_back(Lane{c, wide.lanes[0].steps});
  EXPECT_EQ(sendWindowFor(wide, 1 << 20), 3u * (512 << 10));
  // A small call walks the whole budget too.
  EXPECT_EQ(sendWindowFor(sends(2, 16 << 10), 1 << 20), 1u << 20);
  // Rounded to whole cache lines, as the FIFO stores them.
  EXPECT_EQ(sendWindowFor(sends(10, 100000), 1000), 3u * 100032);
  // Payloads that ride in the FIFO's lines and call checks take no window.
  Plan small = planWith({makeSend(2, input(0), kLinePayloadBytes), makeSend(2, input(0), 0)});
  EXPECT_EQ(sendWindowFor(small, 1 << 20), 0u);
}

}  // namespace
}  // namespace braid
