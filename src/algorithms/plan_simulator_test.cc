#include "algorithms/plan_simulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "algorithms/algorithms.h"

namespace braid {
namespace {

// ---- The sweep: every algorithm for every collective it serves, n = 1..17.

struct Case {
  Collective coll;
  Algorithm algo;
};

std::vector<Case> catalogueCases() {
  std::vector<Case> cases;
  for (int c = 0; c < kNumCollectives; ++c) {
    const auto coll = static_cast<Collective>(c);
    if (coll == Collective::kRecv) continue;  // a Send case simulates both ends
    for (Algorithm algo : algorithmsFor(coll)) cases.push_back({coll, algo});
  }
  return cases;
}

std::string caseName(const ::testing::TestParamInfo<Case>& info) {
  return std::string(collectiveName(info.param.coll)) + "_" +
         std::string(algorithmName(info.param.algo));
}

class PlanSimulatorSweep : public ::testing::TestWithParam<Case> {};

constexpr uint64_t kCounts[] = {0, 1, 2, 7, 273, 1000};
constexpr uint32_t kElemSizes[] = {1, 2, 4, 8};
constexpr uint32_t kChunkBytes[] = {64, 256, 1 << 20};

// One sampled configuration: sample k of rank count n. Across the samples of one n every count
// appears (sample 6 is the many-chunk case) and the other dimensions rotate with different strides,
// so that every (n, dimension value) pair is met without running the whole cross product.
struct Sample {
  PlanRequest request;
  SimulationOptions options;
};

Sample makeSample(const Case& c, int n, int k, std::mt19937_64& rng) {
  Sample s;
  PlanRequest& q = s.request;
  q.coll = c.coll;
  q.algo = c.algo;
  q.nranks = n;
  const bool manyChunks = k % 7 == 6;
  q.count = manyChunks ? 1000 + (rng() % 200) : kCounts[k % 7];
  q.elemSize = kElemSizes[(k + n) % 4];
  q.chunkBytes = manyChunks ? 64 : kChunkBytes[(k + 2 * n) % 3];
  q.nchannels = 1 + (k + n) % 3;
  q.inPlace = ((k / 2) + n) % 2 == 1;
  q.root = static_cast<int>((k * 5 + n * 3) % n);
  if (c.coll == Collective::kSend) {
    q.rank = static_cast<int>(rng() % n);
    q.peer = (q.rank + 1 + static_cast<int>(rng() % std::max(1, n - 1))) % n;
    q.inPlace = false;
  }
  if ((k + n) % 3 != 0) {  // a shuffled ring order two times in three
    q.ring.resize(n);
    for (int i = 0; i < n; ++i) q.ring[i] = i;
    std::shuffle(q.ring.begin(), q.ring.end(), rng);
  }
  s.options.nslots = (k % 2 == 0) ? minSlotsFor(c.algo, c.coll) : 4;
  s.options.seed = rng();
  // The call check lane as the communicator appends it, on the channel after the algorithm's.
  if (k % 3 != 2) s.options.callCheckChannel = q.nchannels;
  return s;
}

TEST_P(PlanSimulatorSweep, ProvesEveryRankCount) {
  const Case c = GetParam();
  constexpr int kSamplesPerN = 14;
  for (int n = 1; n <= 17; ++n) {
    if (c.coll == Collective::kSend && n == 1) continue;
    std::mt19937_64 rng(n * 7919 + static_cast<int>(c.coll) * 31 + static_cast<int>(c.algo));
    for (int k = 0; k < kSamplesPerN; ++k) {
      const Sample s = makeSample(c, n, k, rng);
      const Status status = buildAndSimulate(s.request, s.options);
      ASSERT_TRUE(status.ok()) << describeRequest(s.request) << " nslots=" << s.options.nslots
                               << " seed=" << s.options.seed << "\n  " << status.message();
    }
  }
}

TEST_P(PlanSimulatorSweep, ManyInterleavingsOfOneShape) {
  // The same plans under many schedules: a data race shows up in some of them.
  const Case c = GetParam();
  for (int n : {2, 3, 5, 8}) {
    PlanRequest q;
    q.coll = c.coll;
    q.algo = c.algo;
    q.nranks = n;
    q.count = 37;
    q.elemSize = 2;
    q.chunkBytes = 8;
    q.nchannels = 2;
    q.root = n - 1;
    if (c.coll == Collective::kSend) q.peer = n - 1;
    for (bool inPlace : {false, true}) {
      q.inPlace = inPlace && c.coll != Collective::kSend;
      for (uint64_t seed = 1; seed <= 6; ++seed) {
        SimulationOptions options;
        options.seed = seed;
        options.nslots = minSlotsFor(c.algo, c.coll) + static_cast<int>(seed % 2);
        options.callCheckChannel = seed <= 4 ? q.nchannels : -1;
        const Status status = buildAndSimulate(q, options);
        ASSERT_TRUE(status.ok()) << describeRequest(q) << " seed=" << seed << "\n  "
                                 << status.message();
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Catalogue, PlanSimulatorSweep, ::testing::ValuesIn(catalogueCases()),
                         caseName);

TEST(PlanSimulator, PointToPointCallsOfSeveralRanksRunTogether) {
  // A shift: every rank sends to the next and receives from the previous, in one group.
  const int n = 5;
  std::vector<SimCall> calls;
  for (int r = 0; r < n; ++r) {
    for (Collective coll : {Collective::kSend, Collective::kRecv}) {
      PlanRequest q;
      q.coll = coll;
      q.algo = Algorithm::kPairwise;
      q.nranks = n;
      q.rank = r;
      q.peer = coll == Collective::kSend ? (r + 1) % n : (r + n - 1) % n;
      q.count = 100;
      q.elemSize = 4;
      q.chunkBytes = 64;
      q.nchannels = 2;
      Result<Plan> plan = buildPlan(q);
      ASSERT_TRUE(plan.ok()) << plan.status().message();
      calls.push_back({q, std::move(plan.value())});
    }
  }
  const Status status = simulate(calls, SimulationOptions{});
  EXPECT_TRUE(status.ok()) << status.message();
}

// ---- The simulator itself must catch broken plans.

PlanRequest requestOf(Collective coll, Algorithm algo, int n, uint64_t count) {
  PlanRequest q;
  q.coll = coll;
  q.algo = algo;
  q.nranks = n;
  q.count = count;
  q.elemSize = 4;
  q.chunkBytes = 64;
  return q;
}

std::vector<SimCall> builtCalls(const PlanRequest& request) {
  std::vector<SimCall> calls;
  for (int r = 0; r < request.nranks; ++r) {
    PlanRequest q = request;
    q.rank = r;
    Result<Plan> plan = buildPlan(q);
    EXPECT_TRUE(plan.ok()) << plan.status().message();
    calls.push_back({q, plan.ok() ? std::move(plan.value()) : Plan{}});
  }
  return calls;
}

// A plan for rank `rank` of an n-rank collective with the API extents of `request`.
SimCall manualCall(PlanRequest request, int rank, std::vector<Lane> lanes, uint64_t scratch = 0) {
  request.rank = rank;
  Result<Plan> shell = buildPlan(request);  // for the extents only
  Plan plan = shell.value();
  plan.lanes = std::move(lanes);
  plan.scratchBytes = scratch;
  return {request, plan};
}

void expectFailure(const std::vector<SimCall>& calls, const std::string& fragment,
                   const SimulationOptions& options = {}) {
  const Status status = simulate(calls, options);
  ASSERT_FALSE(status.ok()) << "expected an error mentioning '" << fragment << "'";
  EXPECT_NE(status.message().find(fragment), std::string::npos) << status.message();
}

Step* findStep(Plan& plan, StepOp op) {
  for (Lane& lane : plan.lanes) {
    for (Step& s : lane.steps) {
      if (s.op == op) return &s;
    }
  }
  return nullptr;
}

SimulationOptions twoSlots() {
  SimulationOptions options;
  options.nslots = 2;
  return options;
}

TEST(PlanSimulator, AcceptsAnUnmodifiedRingAllReduce) {
  const auto calls = builtCalls(requestOf(Collective::kAllReduce, Algorithm::kRing, 4, 100));
  const Status status = simulate(calls, twoSlots());
  EXPECT_TRUE(status.ok()) << status.message();
}

TEST(PlanSimulator, RingsNeedTwoSlotsPerConnector) {
  // Every rank sends first; with one slot all FIFOs of the ring are full and each dependent step
  // waits for room: this is why minSlotsFor says 2.
  for (Collective coll :
       {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter}) {
    ASSERT_EQ(minSlotsFor(Algorithm::kRing, coll), 2);
    const auto calls = builtCalls(requestOf(coll, Algorithm::kRing, 3, 90));
    expectFailure(calls, "deadlock");
    EXPECT_TRUE(simulate(calls, twoSlots()).ok());
  }
  EXPECT_EQ(minSlotsFor(Algorithm::kRing, Collective::kBroadcast), 1);
}

TEST(PlanSimulator, CatchesAMissingFinalize) {
  auto calls = builtCalls(requestOf(Collective::kAllReduce, Algorithm::kRing, 4, 100));
  Step* s = findStep(calls[2].plan, StepOp::kRecvReduceCopySend);
  ASSERT_NE(s, nullptr);
  s->flags = 0;
  expectFailure(calls, "never finalized", twoSlots());
}

TEST(PlanSimulator, CatchesASecondFinalize) {
  auto calls = builtCalls(requestOf(Collective::kAllReduce, Algorithm::kRing, 4, 100));
  Step* s = findStep(calls[1].plan, StepOp::kRecvCopySend);
  ASSERT_NE(s, nullptr);
  s->flags |= kStepFinalize;
  expectFailure(calls, "finalizes twice", twoSlots());
}

TEST(PlanSimulator, CatchesAFinalizeOfAPartialSum) {
  auto calls = builtCalls(requestOf(Collective::kAllReduce, Algorithm::kRing, 4, 100));
  Step* s = findStep(calls[1].plan, StepOp::kRecvReduceSend);
  ASSERT_NE(s, nullptr);
  s->flags |= kStepFinalize;
  expectFailure(calls, "finalizes an incomplete", twoSlots());
}

TEST(PlanSimulator, CatchesASlotOfTheWrongSize) {
  auto calls = builtCalls(requestOf(Collective::kAllGather, Algorithm::kRing, 3, 50));
  Step* s = findStep(calls[0].plan, StepOp::kRecvCopySend);
  ASSERT_NE(s, nullptr);
  s->bytes -= 4;
  s->sendBytes -= 4;
  expectFailure(calls, "receives a slot of", twoSlots());
}

TEST(PlanSimulator, CatchesADeadlock) {
  // Both ranks receive before they send, with nothing in flight.
  PlanRequest q = requestOf(Collective::kAllReduce, Algorithm::kRing, 2, 4);
  std::vector<SimCall> calls;
  for (int r = 0; r < 2; ++r) {
    Step last = makeRecvReduceCopy(1 - r, input(0), output(0), 16);
    last.flags = kStepFinalize;
    calls.push_back(manualCall(q, r, {Lane{0, {last, makeSend(1 - r, input(0), 16)}}}));
  }
  expectFailure(calls, "deadlock");
}

TEST(PlanSimulator, CatchesADeadlockThatOnlyBoundedFifosCause) {
  // Rank 0 sends two slots before receiving, and so does rank 1: fine with 2 slots, stuck with 1.
  PlanRequest q = requestOf(Collective::kAllGather, Algorithm::kRing, 2, 4);
  std::vector<SimCall> calls;
  for (int r = 0; r < 2; ++r) {
    const uint64_t mine = r * 16;
    const uint64_t theirs = (1 - r) * 16;
    calls.push_back(manualCall(
        q, r,
        {Lane{0,
              {makeCopySend(1 - r, input(0), output(mine), 8),
               makeCopySend(1 - r, input(8), output(mine + 8), 8),
               makeRecv(1 - r, output(theirs), 8), makeRecv(1 - r, output(theirs + 8), 8)}}}));
  }
  SimulationOptions two;
  two.nslots = 2;
  const Status status = simulate(calls, two);
  EXPECT_TRUE(status.ok()) << status.message();
  expectFailure(calls, "deadlock");  // nslots = 1
}

TEST(PlanSimulator, ZeroByteTransfersPostNoSlot) {
  PlanRequest q = requestOf(Collective::kAllGather, Algorithm::kRing, 2, 4);
  std::vector<SimCall> calls;
  for (int r = 0; r < 2; ++r) {
    const int peer = 1 - r;
    calls.push_back(
        manualCall(q, r,
                   {Lane{0,
                         {makeLocalCopy(input(0), output(r * 16), 16),
                          makeSendRecv(peer, input(0), 0, peer, output(peer * 16), 0),
                          makeSendRecv(peer, input(0), 16, peer, output(peer * 16), 16),
                          makeSend(peer, input(0), 0), makeRecv(peer, output(peer * 16), 0)}}}));
  }
  const Status status = simulate(calls, {});
  EXPECT_TRUE(status.ok()) << status.message();
}

TEST(PlanSimulator, CallChecksPostAndTakeEmptySlots) {
  PlanRequest q = requestOf(Collective::kAllGather, Algorithm::kRing, 3, 4);
  q.nchannels = 1;
  std::vector<SimCall> calls = builtCalls(q);
  for (int r = 0; r < 3; ++r) addCallCheckLane(calls[r].plan, calls[r].request, 1);
  const Status status = simulate(calls, twoSlots());
  EXPECT_TRUE(status.ok()) << status.message();
  // A rank that skips its check leaves its successor waiting, and its predecessor's slot unread.
  calls[1].plan.lanes.pop_back();
  expectFailure(calls, "deadlock", twoSlots());
  // Sent but never taken.
  calls = builtCalls(q);
  calls[0].plan.lanes.push_back(Lane{1, {makeCallCheck(1, -1)}});
  expectFailure(calls, "left unreceived", twoSlots());
}

TEST(PlanSimulator, CatchesUninitialisedReads) {
  PlanRequest q = requestOf(Collective::kBroadcast, Algorithm::kRing, 2, 4);
  q.root = 0;
  std::vector<SimCall> calls;
  calls.push_back(manualCall(q, 0, {Lane{0, {makeCopySend(1, output(0), output(0), 16)}}}));
  calls.push_back(manualCall(q, 1, {Lane{0, {makeRecv(0, output(0), 16)}}}));
  expectFailure(calls, "which nothing wrote");
}

TEST(PlanSimulator, CatchesALeftoverSlot) {
  auto calls = builtCalls(requestOf(Collective::kBroadcast, Algorithm::kRing, 3, 40));
  calls[0].plan.lanes[0].steps.push_back(makeSend(1, input(0), 4));
  expectFailure(calls, "left unreceived");
}

TEST(PlanSimulator, CatchesARankCountedTwice) {
  auto calls = builtCalls(requestOf(Collective::kReduce, Algorithm::kRing, 3, 8));
  // The first rank of the chain sends its share reduced with itself.
  Step* s = findStep(calls[1].plan, StepOp::kSend);
  ASSERT_NE(s, nullptr);
  calls[1].plan.scratchBytes = 32;
  calls[1].plan.lanes[0].steps.insert(calls[1].plan.lanes[0].steps.begin(),
                                      makeLocalReduce(input(0), input(0), scratch(0), 4));
  expectFailure(calls, "counts a rank twice");
}

TEST(PlanSimulator, CatchesAnInPlaceHazard) {
  // Out-of-place all-to-all plans run in place: blocks are overwritten before they are sent.
  PlanRequest q = requestOf(Collective::kAllToAll, Algorithm::kPairwise, 4, 12);
  auto calls = builtCalls(q);
  for (SimCall& call : calls) call.request.inPlace = true;
  int failures = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SimulationOptions options;
    options.seed = seed;
    failures += simulate(calls, options).ok() ? 0 : 1;
  }
  EXPECT_GT(failures, 0) << "aliasing never exposed the overwrite";
}

TEST(PlanSimulator, CatchesSendRecvHalvesRacingOnOneChunk) {
  // A whole-vector exchange that receives into the very chunk it is sending: correct only when the
  // send half happens to go first, so some interleaving must fail.
  PlanRequest q = requestOf(Collective::kAllReduce, Algorithm::kRing, 2, 4);
  q.inPlace = true;
  std::vector<SimCall> calls;
  for (int r = 0; r < 2; ++r) {
    Step s = makeSendRecvReduce(1 - r, input(0), 16, 1 - r, input(0), output(0), 16);
    s.flags = kStepFinalize;
    calls.push_back(manualCall(q, r, {Lane{0, {s}}}));
  }
  int failures = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SimulationOptions options;
    options.seed = seed;
    failures += simulate(calls, options).ok() ? 0 : 1;
  }
  EXPECT_GT(failures, 0);
  EXPECT_LT(failures, 20) << "the send-first order is correct and must pass";
}

TEST(PlanSimulator, CatchesDifferentReductionOrdersAcrossRanks) {
  // Three ranks gather everything into scratch; each reduces starting from its own share, so the
  // sums are equal mathematically but not bitwise.
  const int n = 3;
  PlanRequest q = requestOf(Collective::kAllReduce, Algorithm::kRing, n, 1);
  std::vector<SimCall> calls;
  for (int r = 0; r < n; ++r) {
    const int a = (r + 1) % n;
    const int b = (r + 2) % n;
    Step send = makeSend(a, input(0), 4);
    addSendPeer(send, b);
    Step last = makeLocalReduce(output(0), scratch(4), output(0), 4);
    last.flags = kStepFinalize;
    calls.push_back(manualCall(q, r,
                               {Lane{0,
                                     {send, makeRecv(a, scratch(0), 4), makeRecv(b, scratch(4), 4),
                                      makeLocalReduce(input(0), scratch(0), output(0), 4), last}}},
                               8));
  }
  expectFailure(calls, "different order than on rank 0");
}

TEST(PlanSimulator, CatchesAWrongDestination) {
  auto calls = builtCalls(requestOf(Collective::kAllGather, Algorithm::kRing, 3, 10));
  Step* s = findStep(calls[2].plan, StepOp::kRecv);
  ASSERT_NE(s, nullptr);
  s->dst.offset = (s->dst.offset + 40) % 120;  // the block of another rank
  expectFailure(calls, "expected token", twoSlots());
}

TEST(PlanSimulator, RejectsPlansWithWrongExtents) {
  auto calls = builtCalls(requestOf(Collective::kReduceScatter, Algorithm::kRing, 3, 10));
  calls[1].plan.outputBytes += 4;
  expectFailure(calls, "differ from the API");
}

}  // namespace
}  // namespace braid
