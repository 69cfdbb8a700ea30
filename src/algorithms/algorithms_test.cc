#include "algorithms/algorithms.h"

#include <gtest/gtest.h>

#include <bit>
#include <map>

#include "algorithms/builder.h"
#include "algorithms/plan_simulator.h"

namespace braid {
namespace {

PlanRequest validRequest(Collective coll, Algorithm algo) {
  PlanRequest q;
  q.coll = coll;
  q.algo = algo;
  q.nranks = 4;
  q.rank = 1;
  q.root = 2;
  q.peer = 3;
  q.count = 100;
  q.elemSize = 4;
  q.chunkBytes = 64;
  return q;
}

void expectInvalid(const PlanRequest& q, const std::string& fragment) {
  Result<Plan> plan = buildPlan(q);
  ASSERT_FALSE(plan.ok()) << "built a plan for a bad request (" << fragment << ")";
  EXPECT_EQ(plan.status().code(), braidInvalidArgument);
  EXPECT_NE(plan.status().message().find(fragment), std::string::npos) << plan.status().message();
}

TEST(Algorithms, CatalogueListsWhatServesEachCollective) {
  using A = Algorithm;
  EXPECT_EQ(algorithmsFor(Collective::kAllToAll), (std::vector<A>{A::kPairwise, A::kRd}));
  EXPECT_EQ(algorithmsFor(Collective::kSend), std::vector<A>{A::kPairwise});
  EXPECT_EQ(algorithmsFor(Collective::kReduceScatter),
            (std::vector<A>{A::kRing, A::kRhd, A::kRd, A::kDirect}));
  EXPECT_TRUE(algorithmServes(A::kRing, Collective::kAllReduce));
  EXPECT_FALSE(algorithmServes(A::kPairwise, Collective::kAllReduce));
  EXPECT_FALSE(algorithmServes(A::kRing, Collective::kAllToAll));
  for (int c = 0; c < kNumCollectives; ++c) {
    EXPECT_FALSE(algorithmsFor(static_cast<Collective>(c)).empty())
        << collectiveName(static_cast<Collective>(c)) << " has no algorithm";
  }
  for (int a = 0; a < kNumAlgorithms; ++a) {
    const auto algo = static_cast<Algorithm>(a);
    EXPECT_EQ(findAlgorithm(algorithmName(algo)), algo);
  }
  EXPECT_FALSE(findAlgorithm("bogus").has_value());
}

TEST(Algorithms, RejectsBadRequestsWithAReason) {
  using C = Collective;
  using A = Algorithm;
  PlanRequest q = validRequest(C::kAllReduce, A::kPairwise);
  expectInvalid(q, "does not serve allreduce");
  q = validRequest(C::kAllReduce, A::kRing);
  q.nranks = 0;
  expectInvalid(q, "nranks");
  q = validRequest(C::kAllReduce, A::kRing);
  q.rank = 4;
  expectInvalid(q, "rank 4 out of range");
  q = validRequest(C::kBroadcast, A::kRing);
  q.root = -1;
  expectInvalid(q, "root -1");
  q = validRequest(C::kSend, A::kPairwise);
  q.peer = 1;
  expectInvalid(q, "peer 1");
  q = validRequest(C::kRecv, A::kPairwise);
  q.peer = 9;
  expectInvalid(q, "peer 9");
  q = validRequest(C::kAllReduce, A::kRing);
  q.chunkBytes = 0;
  expectInvalid(q, "chunkBytes 0");
  q.chunkBytes = 3;
  expectInvalid(q, "smaller than one element");
  q = validRequest(C::kAllReduce, A::kRing);
  q.elemSize = 0;
  expectInvalid(q, "element size");
  q = validRequest(C::kAllReduce, A::kRing);
  q.nchannels = 0;
  expectInvalid(q, "nchannels");
  q = validRequest(C::kAllGather, A::kRing);
  q.count = UINT64_MAX / 8;
  expectInvalid(q, "overflows");
  q = validRequest(C::kAllReduce, A::kRing);
  q.ring = {0, 1, 2};
  expectInvalid(q, "ring order has 3 ranks");
  q.ring = {0, 1, 1, 3};
  expectInvalid(q, "not a permutation");
  q.algo = static_cast<Algorithm>(200);
  expectInvalid(q, "unknown algorithm");
}

TEST(Algorithms, CountZeroGivesAnEmptyPlan) {
  for (int c = 0; c < kNumCollectives; ++c) {
    const auto coll = static_cast<Collective>(c);
    for (Algorithm algo : algorithmsFor(coll)) {
      PlanRequest q = validRequest(coll, algo);
      q.count = 0;
      Result<Plan> plan = buildPlan(q);
      ASSERT_TRUE(plan.ok()) << plan.status().message();
      EXPECT_TRUE(plan->lanes.empty()) << describePlan(*plan);
      EXPECT_EQ(plan->inputBytes + plan->outputBytes + plan->scratchBytes, 0u);
    }
  }
}

TEST(Algorithms, SmallCallsWhoseDataReachesTheSuccessorFirstNeedNoCheckLane) {
  // Direct all-reduce: every rank's first step sends to every other at once.
  for (int n = 2; n <= 4; ++n) {
    PlanRequest q = validRequest(Collective::kAllReduce, Algorithm::kDirect);
    q.nranks = n;
    q.rank = n - 1;
    q.root = 0;
    q.peer = 0;
    EXPECT_TRUE(dataChecksTheCall(q)) << describeRequest(q);
    Result<Plan> plan = buildPlan(q);
    ASSERT_TRUE(plan.ok());
    const size_t lanes = plan->lanes.size();
    addCallCheckLane(*plan, q, 7);
    EXPECT_EQ(plan->lanes.size(), lanes) << "a check lane beside data that does its job";
  }
  // Recursive doubling all-gather out of place copies its own block first; nothing waits
  // before its first send, which at n = 2 goes to the successor.
  PlanRequest rdPair = validRequest(Collective::kAllGather, Algorithm::kRd);
  rdPair.nranks = 2;
  rdPair.rank = 0;
  rdPair.root = rdPair.peer = 1;
  Result<Plan> rdPlan = buildPlan(rdPair);
  ASSERT_TRUE(rdPlan.ok());
  ASSERT_EQ(rdPlan->lanes.front().steps.front().op, StepOp::kLocalCopy) << describePlan(*rdPlan);
  EXPECT_TRUE(dataChecksTheCall(rdPair));
  // Rooted collectives (non-roots wait first), tree all-reduce (the root waits first), large
  // calls and many ranks keep the lane.
  PlanRequest bcast = validRequest(Collective::kBroadcast, Algorithm::kRing);
  EXPECT_FALSE(dataChecksTheCall(bcast));
  PlanRequest tree = validRequest(Collective::kAllReduce, Algorithm::kTree);
  EXPECT_FALSE(dataChecksTheCall(tree));
  PlanRequest large = validRequest(Collective::kAllReduce, Algorithm::kDirect);
  large.count = 1 << 20;
  EXPECT_FALSE(dataChecksTheCall(large));
  PlanRequest many = validRequest(Collective::kAllReduce, Algorithm::kDirect);
  many.nranks = 8;
  EXPECT_FALSE(dataChecksTheCall(many));
  PlanRequest send = validRequest(Collective::kSend, Algorithm::kPairwise);
  EXPECT_FALSE(dataChecksTheCall(send));
  // Whatever the answer, it is the same for every rank of a call.
  for (int c = 0; c < kNumCollectives; ++c) {
    const auto coll = static_cast<Collective>(c);
    for (Algorithm algo : algorithmsFor(coll)) {
      for (int n = 2; n <= 4; ++n) {
        PlanRequest q = validRequest(coll, algo);
        q.nranks = n;
        q.root = 0;
        q.peer = 0;
        q.rank = 1;
        const bool answer = dataChecksTheCall(q);
        for (int r = 0; r < n; ++r) {
          q.rank = r;
          q.peer = (r + 1) % n;
          EXPECT_EQ(dataChecksTheCall(q), answer) << describeRequest(q);
        }
      }
    }
  }
}

TEST(Algorithms, CallCheckLaneLinksRingNeighboursOrThePeer) {
  for (int c = 0; c < kNumCollectives; ++c) {
    const auto coll = static_cast<Collective>(c);
    for (Algorithm algo : algorithmsFor(coll)) {
      PlanRequest q = validRequest(coll, algo);
      q.nranks = 5;
      q.rank = 3;
      q.peer = 1;
      q.ring = {2, 4, 0, 3, 1};  // rank 3 follows 0 and precedes 1
      Result<Plan> plan = buildPlan(q);
      ASSERT_TRUE(plan.ok()) << plan.status().message();
      const size_t lanes = plan->lanes.size();
      addCallCheckLane(*plan, q, 7);
      ASSERT_EQ(plan->lanes.size(), lanes + 1) << describeRequest(q);
      const Lane& lane = plan->lanes.back();
      EXPECT_EQ(lane.channel, 7);
      ASSERT_EQ(lane.steps.size(), 1u);
      const Step& s = lane.steps[0];
      EXPECT_TRUE(s.flags & kStepCallCheck);
      EXPECT_EQ(s.nsend, coll == Collective::kRecv ? 0 : 1);
      EXPECT_EQ(s.nrecv, coll == Collective::kSend ? 0 : 1);
      if (coll == Collective::kSend) {
        EXPECT_EQ(s.sendPeers[0], 1);
      } else if (coll == Collective::kRecv) {
        EXPECT_EQ(s.recvPeers[0], 1);
      } else {
        EXPECT_EQ(s.sendPeers[0], 1);
        EXPECT_EQ(s.recvPeers[0], 0);
      }
      EXPECT_TRUE(validatePlan(*plan, 64).ok()) << describePlan(*plan, true);
    }
  }
  // Nothing to check where nothing is exchanged.
  PlanRequest empty = validRequest(Collective::kAllReduce, Algorithm::kRing);
  empty.count = 0;
  Result<Plan> plan = buildPlan(empty);
  ASSERT_TRUE(plan.ok());
  addCallCheckLane(*plan, empty, 4);
  EXPECT_TRUE(plan->lanes.empty());
  PlanRequest alone = validRequest(Collective::kAllReduce, Algorithm::kRing);
  alone.nranks = 1;
  alone.rank = 0;
  alone.root = 0;
  plan = buildPlan(alone);
  ASSERT_TRUE(plan.ok());
  const size_t lanes = plan->lanes.size();
  addCallCheckLane(*plan, alone, 4);
  EXPECT_EQ(plan->lanes.size(), lanes);
}

TEST(Algorithms, StepsStayWithinWholeElementsOfTheChunk) {
  // chunkBytes 30 with 8-byte elements: no transfer above 24 bytes.
  for (int c = 0; c < kNumCollectives; ++c) {
    const auto coll = static_cast<Collective>(c);
    for (Algorithm algo : algorithmsFor(coll)) {
      for (bool inPlace : {false, true}) {
        PlanRequest q = validRequest(coll, algo);
        q.nranks = 5;
        q.elemSize = 8;
        q.chunkBytes = 30;
        q.count = 97;
        q.nchannels = 3;
        q.inPlace = inPlace && coll != Collective::kSend && coll != Collective::kRecv;
        Result<Plan> plan = buildPlan(q);
        ASSERT_TRUE(plan.ok()) << plan.status().message();
        EXPECT_TRUE(validatePlan(*plan, 24).ok()) << describeRequest(q);
        for (const Lane& lane : plan->lanes) {
          EXPECT_GE(lane.channel, 0);
          EXPECT_LT(lane.channel, q.nchannels);
          for (const Step& s : lane.steps) {
            EXPECT_LE(s.bytes, 24u);
            EXPECT_LE(s.sendBytes, 24u);
            EXPECT_TRUE(s.bytes > 0 || s.sendBytes > 0) << "an empty step";
          }
        }
      }
    }
  }
}

// Where the bytes of a step's buffer ref lie in the caller's memory, as the API lays out
// in-place calls: one space for Input and Output (apart out of place).
uint64_t callerByte(const PlanRequest& q, const Plan& plan, BufferRef ref) {
  const uint64_t block = q.count * q.elemSize;
  if (ref.buffer == BufferId::kOutput) {
    if (!q.inPlace) return plan.inputBytes + ref.offset;
    return ref.offset + (q.coll == Collective::kReduceScatter ? q.rank * block : 0);
  }
  return ref.offset + (q.inPlace && q.coll == Collective::kAllGather ? q.rank * block : 0);
}

// A send marked lendable is read by its receiver until the call ends, so nothing may write
// over it after it is posted: checked step against step over every plan of every algorithm.
// And the marking is not idle: out of place every send of Input lends, in place a ring
// all-reduce lends its all-gather half.
TEST(Algorithms, NoStepWritesOverWhatAnEarlierStepLent) {
  for (int c = 0; c < kNumCollectives; ++c) {
    const auto coll = static_cast<Collective>(c);
    for (Algorithm algo : algorithmsFor(coll)) {
      for (int n : {2, 3, 4, 5}) {
        for (int rank = 0; rank < n; ++rank) {
          for (bool inPlace : {false, true}) {
            PlanRequest q = validRequest(coll, algo);
            q.nranks = n;
            q.rank = rank;
            q.root = n - 1;
            q.peer = (rank + 1) % n;
            q.count = 97;
            q.chunkBytes = 64;
            q.nchannels = 2;
            q.inPlace = inPlace && coll != Collective::kSend && coll != Collective::kRecv;
            Result<Plan> plan = buildPlan(q);
            ASSERT_TRUE(plan.ok()) << plan.status().message();
            markLendableSends(*plan, q);
            for (size_t l = 0; l < plan->lanes.size(); ++l) {
              const std::vector<Step>& steps = plan->lanes[l].steps;
              for (size_t i = 0; i < steps.size(); ++i) {
                const Step& s = steps[i];
                const BufferRef from = lentSource(s);
                const bool fromCaller =
                    from.buffer == BufferId::kInput || from.buffer == BufferId::kOutput;
                if (from.buffer == BufferId::kInput && !q.inPlace) {
                  EXPECT_TRUE(s.flags & kStepLendable)
                      << describeRequest(q) << " lane " << l << " step " << i;
                }
                if (!(s.flags & kStepLendable)) continue;
                ASSERT_TRUE(fromCaller) << describeRequest(q);
                const uint32_t bytes = stepShape(s.op).independent ? s.sendBytes : s.bytes;
                const uint64_t begin = callerByte(q, *plan, from);
                for (size_t l2 = 0; l2 < plan->lanes.size(); ++l2) {
                  const std::vector<Step>& others = plan->lanes[l2].steps;
                  for (size_t j = l2 == l ? i + 1 : 0; j < others.size(); ++j) {
                    const Step& w = others[j];
                    if (!stepShape(w.op).writesDst || w.dst.buffer != BufferId::kOutput) continue;
                    const uint64_t wBegin = callerByte(q, *plan, w.dst);
                    EXPECT_FALSE(wBegin < begin + bytes && begin < wBegin + w.bytes)
                        << describeRequest(q) << ": lane " << l2 << " step " << j
                        << " writes over what lane " << l << " step " << i << " lent";
                  }
                }
              }
            }
            if (coll == Collective::kAllReduce && algo == Algorithm::kRing && inPlace) {
              for (const Lane& lane : plan->lanes) {
                for (const Step& s : lane.steps) {
                  if (s.op == StepOp::kRecvCopySend || s.op == StepOp::kRecvReduceCopySend) {
                    EXPECT_TRUE(s.flags & kStepLendable) << describeRequest(q);
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

TEST(Algorithms, RingAllReduceTakesTwoNMinusOneStepsPerRound) {
  PlanRequest q = validRequest(Collective::kAllReduce, Algorithm::kRing);
  q.nranks = 4;
  q.count = 64;  // 4 blocks of 16 elements = one round with 64-byte chunks
  Result<Plan> plan = buildPlan(q);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->lanes.size(), 1u);
  // send, 2 x recvReduceSend, recvReduceCopySend, 2 x recvCopySend, recv
  EXPECT_EQ(plan->lanes[0].steps.size(), 7u);
  EXPECT_EQ(plan->lanes[0].steps.front().op, StepOp::kSend);
  EXPECT_EQ(plan->lanes[0].steps[3].op, StepOp::kRecvReduceCopySend);
  EXPECT_TRUE(plan->lanes[0].steps[3].flags & kStepFinalize);
  EXPECT_EQ(plan->lanes[0].steps.back().op, StepOp::kRecv);
  q.count = 640;  // ten rounds
  plan = buildPlan(q);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->lanes[0].steps.size(), 70u);
}

TEST(Algorithms, RingRunsOddChannelsTheOtherWay) {
  PlanRequest q = validRequest(Collective::kAllGather, Algorithm::kRing);
  q.nchannels = 2;
  Result<Plan> plan = buildPlan(q);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->lanes.size(), 2u);
  EXPECT_EQ(plan->lanes[0].steps[0].sendPeers[0], 2);  // rank 1 sends to 2 on channel 0
  EXPECT_EQ(plan->lanes[1].steps[0].sendPeers[0], 0);  // and to 0 on channel 1
  q.ring = {3, 1, 0, 2};
  plan = buildPlan(q);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->lanes[0].steps[0].sendPeers[0], 0);
  EXPECT_EQ(plan->lanes[1].steps[0].sendPeers[0], 3);
}

TEST(Algorithms, InPlaceAllToAllUsesScratchAndOutOfPlaceDoesNot) {
  PlanRequest q = validRequest(Collective::kAllToAll, Algorithm::kPairwise);
  q.nranks = 5;
  Result<Plan> plan = buildPlan(q);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->scratchBytes, 0u);
  EXPECT_EQ(plan->lanes.size(), 5u);  // four distances and the local copy
  q.inPlace = true;
  plan = buildPlan(q);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->scratchBytes, 2u * 100 * 4);  // floor(5/2) saved blocks
  EXPECT_EQ(plan->lanes.size(), 2u);            // distances {1,4} and {2,3}
}

// Bruck's all-to-all keeps n waiting blocks and two packed rounds of at most ceil((n-1)/2)
// blocks in scratch, in place or not, and at 5 ranks exchanges in three rounds.
TEST(Algorithms, BruckAllToAllPacksEachRoundIntoOneExchange) {
  PlanRequest q = validRequest(Collective::kAllToAll, Algorithm::kRd);
  q.nranks = 5;
  q.chunkBytes = 4096;  // one step per round
  Result<Plan> plan = buildPlan(q);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->scratchBytes, (5u + 2 * 2) * 100 * 4);  // rounds move {1,3}, {2,3}, {4}
  ASSERT_EQ(plan->lanes.size(), 1u);
  std::vector<int> sendTo;
  for (const Step& s : plan->lanes[0].steps) {
    if (s.op == StepOp::kSendRecv) {
      sendTo.push_back(s.sendPeers[0]);
      EXPECT_EQ(s.bytes, s.sendBytes);
    }
  }
  EXPECT_EQ(sendTo, (std::vector<int>{2, 3, 0}));  // rank 1: ranks 1, 2 and 4 after it
  q.inPlace = true;
  plan = buildPlan(q);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->scratchBytes, (5u + 2 * 2) * 100 * 4);
}

// Rank `rank` of n with 16-byte blocks, one channel, one chunk a message.
PlanRequest smallBlocks(Collective coll, Algorithm algo, int n, int rank) {
  PlanRequest q = validRequest(coll, algo);
  q.nranks = n;
  q.rank = rank;
  q.count = 4;
  q.elemSize = 4;
  q.nchannels = 1;
  q.chunkBytes = 1 << 20;
  return q;
}

// Among 1000 ranks (and 1024) with small blocks, rd's reduce-scatter moves each round as one
// message (the ring takes n-1 hand-offs; rhd sends a message per block in its first round), and
// together the rounds carry the n-1 blocks a rank gives.
TEST(Algorithms, RdReduceScatterSendsOneMessageARound) {
  for (int n : {1000, 1024}) {
    constexpr int rounds = 10;  // ceil(log2 n)
    const Collective coll = Collective::kReduceScatter;
    for (int rank : {0, 1, 500, 999}) {
      Result<Plan> plan = buildPlan(smallBlocks(coll, Algorithm::kRd, n, rank));
      ASSERT_TRUE(plan.ok()) << plan.status().message();
      ASSERT_EQ(plan->lanes.size(), 1u);
      int messages = 0;
      int copies = 0;
      uint64_t sent = 0;
      std::vector<int> sendTo;
      for (const Step& s : plan->lanes[0].steps) {
        if (s.op == StepOp::kLocalCopy) ++copies;
        if (s.nsend == 0) continue;
        ++messages;
        sent += s.sendBytes;
        sendTo.push_back(s.sendPeers[0]);
      }
      const std::string what = std::to_string(n) + " ranks, rank " + std::to_string(rank);
      EXPECT_EQ(sent, uint64_t(n - 1) * 16) << what;
      EXPECT_EQ(messages, rounds) << what;
      EXPECT_EQ(plan->scratchBytes, uint64_t(n) * 16) << what;
      // Packing the blocks into scratch: in position order one run; rotated to start at this
      // rank's, one run or two where it wraps past the last rank.
      EXPECT_EQ(copies, n == 1024 || rank == 0 ? 1 : 2) << what;
      std::vector<int> expected;
      for (int d = 512; d >= 1; d /= 2) expected.push_back(n == 1024 ? rank ^ d : (rank + d) % n);
      EXPECT_EQ(sendTo, expected) << what;
    }
  }
}

// rhd's reduce-scatter keeps the blocks it still reduces in scratch by their virtual ranks' bits
// reversed, so each halving step after the first gives away one run of them, cut into chunks. The
// first step's blocks alternate in the input and the last one's own block goes to Output, so those
// go block by block.
TEST(Algorithms, RhdReduceScatterJoinsBlocksBetweenItsFirstAndLastSteps) {
  // 20 ranks: p = 16, positions 0-7 fold in pairs. Rank 19 is virtual rank 15; its partners at
  // d = 1, 2, 4, 8 are ranks 18, 17, 15 and 11.
  const std::map<int, int> partnerAt = {{1, 18}, {2, 17}, {4, 15}, {8, 11}};
  // 48 B: runs cut into chunks of three blocks; 16 B: a block a chunk, nothing to join.
  for (uint32_t chunk : {1u << 20, 48u, 16u}) {
    PlanRequest q = smallBlocks(Collective::kReduceScatter, Algorithm::kRhd, 20, 19);
    q.chunkBytes = chunk;
    Result<Plan> plan = buildPlan(q);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    std::map<int, int> messages;
    std::map<int, uint64_t> bytes;
    for (const Lane& lane : plan->lanes) {
      for (const Step& s : lane.steps) {
        if (s.nsend == 0) continue;
        ++messages[s.sendPeers[0]];
        bytes[s.sendPeers[0]] += s.sendBytes;
      }
    }
    for (auto [d, peer] : partnerAt) {
      const int blocks = int(bytes[peer] / 16);
      const bool joined = d != 1 && d != 8;
      const int chunks = int((bytes[peer] + chunk - 1) / chunk);
      EXPECT_EQ(messages[peer], joined ? chunks : blocks) << "d " << d << ", chunk " << chunk;
    }
    EXPECT_EQ(bytes[18] / 16, 10u);  // the virtual ranks that differ in bit 0, 4 of them folded
  }
}

// rd's all-gather sends the small blocks of a round that lie side by side in Output as one
// message: one a round with n a power of two, at most two otherwise (the run may wrap past the
// last rank), where each block once went as a message of its own.
TEST(Algorithms, RdAllGatherSendsNeighbouringBlocksAsOneMessage) {
  for (int n : {1000, 1024}) {
    for (bool inPlace : {false, true}) {
      for (int rank : {0, 1, 500, 999}) {
        PlanRequest q = smallBlocks(Collective::kAllGather, Algorithm::kRd, n, rank);
        q.inPlace = inPlace;
        Result<Plan> plan = buildPlan(q);
        ASSERT_TRUE(plan.ok()) << plan.status().message();
        int messages = 0;
        uint64_t sent = 0;
        for (const Step& s : plan->lanes[0].steps) {
          if (s.nsend == 0) continue;
          ++messages;
          sent += s.sendBytes;
        }
        const std::string what = std::to_string(n) + " ranks, rank " + std::to_string(rank) +
                                 (inPlace ? ", in place" : "");
        EXPECT_EQ(sent, uint64_t(n - 1) * 16) << what;
        EXPECT_LE(messages, 2 * 10) << what;
        if (n == 1024) {
          EXPECT_EQ(messages, 10) << what;
        }
      }
    }
  }
}

TEST(Algorithms, EvenPartsCoverTheWhole) {
  const Span whole{10, 23};
  uint64_t next = whole.begin;
  for (uint64_t i = 0; i < 5; ++i) {
    const Span part = evenPart(whole, 5, i);
    EXPECT_EQ(part.begin, next);
    EXPECT_TRUE(part.len == 4 || part.len == 5);
    next = part.end();
  }
  EXPECT_EQ(next, whole.end());
}

// The whole binary tree of builder.h's TreeLinks, built label by label as the description
// reads: the reference the one-member links are checked against.
struct BinaryTree {
  int root = 0;
  std::vector<int> parent;                 // -1 at the root
  std::vector<std::vector<int>> children;  // at most two each
};

BinaryTree binaryTree(int members, int variant) {
  const int m = members;
  auto memberOf = [&](int label) { return variant == 0 ? label - 1 : (label - 2 + m) % m; };
  BinaryTree tree;
  tree.parent.assign(m, -1);
  tree.children.assign(m, {});
  int top = 1;
  while (top * 2 <= m) top *= 2;
  tree.root = memberOf(top);
  for (int v = 2; v <= m; v += 2) {
    const int h = std::countr_zero(static_cast<unsigned>(v));
    std::vector<int> kids = {v - (1 << (h - 1))};
    for (int j = h - 1; j >= 0; --j) {
      if (v + (1 << j) <= m) {
        kids.push_back(v + (1 << j));
        break;
      }
    }
    for (int kid : kids) {
      tree.children[memberOf(v)].push_back(memberOf(kid));
      tree.parent[memberOf(kid)] = memberOf(v);
    }
  }
  return tree;
}

TEST(Algorithms, FoldGroupPairsTheFirstPositions) {
  const FoldGroup g(6);  // p = 4, r = 2: positions 0..3 fold into virtual ranks 0 and 1
  EXPECT_EQ(g.p(), 4);
  EXPECT_EQ(g.r(), 2);
  EXPECT_TRUE(g.sitsOut(0));
  EXPECT_TRUE(g.takesOver(3));
  EXPECT_FALSE(g.sitsOut(4));
  EXPECT_EQ(g.virtualOf(3), 1);
  EXPECT_EQ(g.virtualOf(5), 3);
  EXPECT_EQ(g.posOfVirtual(1), 3);
  EXPECT_EQ(g.firstPos(2), 4);
  EXPECT_EQ(g.firstPos(4), 6);
  const FoldGroup power(8);
  EXPECT_EQ(power.r(), 0);
  EXPECT_EQ(power.log2p(), 3);
}

TEST(Algorithms, BinaryTreesSpanAllMembersWithLogDepth) {
  for (int m = 1; m <= 70; ++m) {
    int depthBound = 1;
    while ((1 << (depthBound - 1)) < m + 1) ++depthBound;
    for (int variant : {0, 1}) {
      const BinaryTree t = binaryTree(m, variant);
      ASSERT_EQ(t.parent.size(), static_cast<size_t>(m));
      EXPECT_EQ(t.parent[t.root], -1);
      for (int x = 0; x < m; ++x) {
        EXPECT_LE(t.children[x].size(), 2u);
        for (int kid : t.children[x]) EXPECT_EQ(t.parent[kid], x);
        // Every member reaches the root within the depth bound.
        int at = x;
        int steps = 0;
        while (at != t.root && steps <= depthBound) {
          at = t.parent[at];
          ++steps;
          ASSERT_GE(at, 0) << "m=" << m << " variant=" << variant << " member " << x;
        }
        EXPECT_LE(steps, depthBound) << "m=" << m << " member " << x;
      }
    }
  }
}

TEST(Algorithms, OneMembersTreeLinksAreTheWholeTreesLinks) {
  for (int m = 1; m <= 300; ++m) {
    for (int variant : {0, 1}) {
      const BinaryTree t = binaryTree(m, variant);
      EXPECT_EQ(binaryTreeRoot(m, variant), t.root) << "m=" << m;
      for (int x = 0; x < m; ++x) {
        const TreeLinks links = binaryTreeLinks(m, variant, x);
        ASSERT_EQ(links.parent, t.parent[x]) << "m=" << m << " variant=" << variant << " x=" << x;
        ASSERT_EQ(size_t(links.nchildren), t.children[x].size()) << "m=" << m << " x=" << x;
        for (int i = 0; i < links.nchildren; ++i) EXPECT_EQ(links.children[i], t.children[x][i]);
      }
    }
  }
}

TEST(Algorithms, DoubleBinaryTreeInteriorsAreLeavesOfTheOtherTree) {
  for (int m = 2; m <= 70; ++m) {
    const BinaryTree a = binaryTree(m, 0);
    const BinaryTree b = binaryTree(m, 1);
    int bothLeaves = 0;
    for (int x = 0; x < m; ++x) {
      EXPECT_FALSE(!a.children[x].empty() && !b.children[x].empty())
          << "member " << x << " of " << m << " is interior in both trees";
      bothLeaves += a.children[x].empty() && b.children[x].empty();
    }
    EXPECT_LE(bothLeaves, 1) << m;
  }
}

TEST(Algorithms, TreePartsGiveEachTreeHalfTheMessage) {
  const std::vector<TreePart> one = treeParts(100, 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].span.len, 100u);
  const std::vector<TreePart> three = treeParts(101, 3);
  ASSERT_EQ(three.size(), 3u);
  uint64_t perTree[2] = {0, 0};
  uint64_t next = 0;
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(three[c].channel, c);
    EXPECT_EQ(three[c].variant, c % 2);
    perTree[three[c].variant] += three[c].span.len;
  }
  EXPECT_EQ(perTree[0], 51u);  // channels 0 and 2
  EXPECT_EQ(perTree[1], 50u);  // channel 1
  for (int c : {0, 2, 1}) {    // tree 0's half first, then tree 1's
    EXPECT_EQ(three[c].span.begin, next);
    next = three[c].span.end();
  }
}

TEST(Algorithms, TreeAllReduceSplitsUpAndDownLanes) {
  PlanRequest q = validRequest(Collective::kAllReduce, Algorithm::kTree);
  q.nranks = 7;
  q.nchannels = 2;
  for (int r = 0; r < q.nranks; ++r) {
    q.rank = r;
    Result<Plan> plan = buildPlan(q);
    ASSERT_TRUE(plan.ok());
    int roots = 0;
    for (const Lane& lane : plan->lanes) {
      for (const Step& s : lane.steps) {
        roots += s.op == StepOp::kRecvReduceCopySend;
        if (s.op == StepOp::kRecvReduceCopySend) {
          EXPECT_TRUE(s.flags & kStepFinalize);
        }
      }
    }
    // Two trees, two roots among seven ranks; a non-root has an up and a down lane per tree.
    EXPECT_LE(plan->lanes.size(), 4u);
    if (roots == 0) {
      EXPECT_EQ(plan->lanes.size(), 4u);
    }
  }
}

TEST(Algorithms, DirectSendsToEveryPeerAndReducesInRankOrder) {
  PlanRequest q = validRequest(Collective::kAllReduce, Algorithm::kDirect);
  q.nranks = 5;
  q.rank = 2;
  q.count = 16;  // one chunk
  Result<Plan> plan = buildPlan(q);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->lanes.size(), 1u);
  const std::vector<Step>& steps = plan->lanes[0].steps;
  ASSERT_EQ(steps.size(), 2u + 5u);  // sends to 3 + 1 peers, then ranks 0, 1, own, 3, 4
  EXPECT_EQ(steps[0].nsend, 3);
  EXPECT_EQ(steps[1].nsend, 1);
  EXPECT_EQ(steps[2].op, StepOp::kRecv);
  EXPECT_EQ(steps[2].recvPeers[0], 0);
  EXPECT_EQ(steps[3].recvPeers[0], 1);
  EXPECT_EQ(steps[4].op, StepOp::kLocalReduce);
  EXPECT_EQ(steps[6].recvPeers[0], 4);
  EXPECT_TRUE(steps[6].flags & kStepFinalize);
  EXPECT_EQ(plan->scratchBytes, 0u);
  q.inPlace = true;
  plan = buildPlan(q);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->scratchBytes, 64u);  // one chunk of running sum
}

}  // namespace
}  // namespace braid
