#include "tuner/plan_cost.h"

#include <gtest/gtest.h>

#include "algorithms/algorithms.h"

namespace braid {
namespace {

// A machine with round numbers: every cost below is a sum of these.
SimMachine machine(int nranks, int cores = 0) {
  SimMachine m;
  m.nranks = nranks;
  m.hostOf.assign(nranks, 0);
  m.cores = {cores};
  m.hopUs = {1.0};
  m.nslots = 4;
  m.stepUs = 0.5;
  // Only the copy and reduce rates: a step's bytes cost 1 us per KB per copy, 2 per reduction.
  m.bytes.copy = 0.001;
  m.bytes.reduce = 0.002;
  return m;
}

Plan emptyPlan(int rank, int nranks) {
  Plan p;
  p.rank = rank;
  p.nranks = nranks;
  p.lanes.resize(1);
  return p;
}

// Rank 0 streams `chunks` chunks of `bytes` to rank 1.
std::vector<Plan> stream(int chunks, uint32_t bytes) {
  std::vector<Plan> plans = {emptyPlan(0, 2), emptyPlan(1, 2)};
  for (int i = 0; i < chunks; ++i) {
    plans[0].lanes[0].steps.push_back(makeSend(1, input(0), bytes));
    plans[1].lanes[0].steps.push_back(makeRecv(0, output(0), bytes));
  }
  return plans;
}

TEST(PlanCost, OneTransferIsSendHopReceive) {
  const SimMachine m = machine(2);
  Result<double> t = simulatePlans(stream(1, 1000), m);
  ASSERT_TRUE(t.ok()) << t.status().message();
  // send step (0.5 + 1000 * 0.001) + hop 1 + receive step (0.5 + 1)
  EXPECT_DOUBLE_EQ(t.value(), 1.5 + 1.0 + 1.5);
}

TEST(PlanCost, StreamsPipelineAndTheFifoDepthThrottles) {
  SimMachine m = machine(2);
  // Both sides cost 1.5 us per chunk: after the first chunk's latency, one chunk per 1.5 us.
  Result<double> t = simulatePlans(stream(10, 1000), m);
  ASSERT_TRUE(t.ok());
  EXPECT_DOUBLE_EQ(t.value(), 4.0 + 9 * 1.5);
  // A receiver twice as slow (reduce) sets the pace.
  std::vector<Plan> slow = stream(10, 1000);
  for (Step& s : slow[1].lanes[0].steps) s = makeRecvReduceCopy(0, input(0), output(0), 1000);
  Result<double> ts = simulatePlans(slow, m);
  ASSERT_TRUE(ts.ok());
  EXPECT_DOUBLE_EQ(ts.value(), 1.5 + 1.0 + 10 * 2.5);
  // With one slot the sender waits for every release to come back (a hop) before sending on.
  m.nslots = 1;
  Result<double> t1 = simulatePlans(stream(10, 1000), m);
  ASSERT_TRUE(t1.ok());
  EXPECT_GT(t1.value(), t.value() + 9 * 1.0);
}

uint64_t footprint(const std::vector<Plan>& plans, int nslots) {
  SimMachine m = machine(2);
  m.nslots = nslots;
  return slotFootprint(plans, m);
}

TEST(PlanCost, SlotFootprintCountsTheSlotsEachConnectorCycles) {
  // Two chunks use two of the four slots; ten use all four; the largest item sizes them.
  EXPECT_EQ(footprint(stream(2, 1000), 4), 2u * 1000);
  EXPECT_EQ(footprint(stream(10, 1000), 4), 4u * 1000);
  EXPECT_EQ(footprint(stream(10, 1000), 2), 2u * 1000);
  // Receives add nothing of their own: the slots are the sender's connector's.
  std::vector<Plan> both = stream(10, 1000);
  both[1].lanes[0].steps.push_back(makeSend(0, input(0), 3000));
  EXPECT_EQ(footprint(both, 4), 4u * 1000 + 3000);
  // A second channel is a second connector between the same ranks.
  std::vector<Plan> two = stream(10, 1000);
  for (Plan& p : two) p.lanes.push_back(Lane{1, p.lanes[0].steps});
  EXPECT_EQ(footprint(two, 4), 2u * 4 * 1000);
}

TEST(PlanCost, WithinAHostTheSendWindowBoundsTheFootprint) {
  SimMachine m = machine(2);
  m.shmBudgetBytes = 64 * 1024;
  // Ten 8 KiB chunks: all 80 KiB pass through a 64 KiB window, which they fill.
  EXPECT_EQ(slotFootprint(stream(10, 8192), m), 64u * 1024);
  EXPECT_EQ(slotFootprint(stream(3, 8192), m), 3u * 8192);
  // Small messages ride in the lines, one per message, 64 at most.
  EXPECT_EQ(slotFootprint(stream(10, 1000), m), 10u * 1000);
  EXPECT_EQ(slotFootprint(stream(100, 1000), m), uint64_t{kHostFifoMessages} * 1000);
  // Ranks on two hosts use a network FIFO: nslots messages.
  m.hostOf = {0, 1};
  m.cores = {0, 0};
  m.hopUs = {1.0, 1.0};
  EXPECT_EQ(slotFootprint(stream(10, 8192), m), 4u * 8192);
}

TEST(PlanCost, WithinAHostTheSendWindowSetsTheDepth) {
  // A window of payload bytes holds as many chunks as fit in it: the same call takes the same
  // time as with a FIFO of that many slots, whatever the chunk size.
  auto time = [](const SimMachine& m, const std::vector<Plan>& plans) {
    Result<double> t = simulatePlans(plans, m);
    EXPECT_TRUE(t.ok());
    return t.ok() ? t.value() : -1.0;
  };
  auto slots = [](int n) {
    SimMachine m = machine(2);
    m.nslots = n;
    return m;
  };
  auto budget = [](uint64_t bytes) {
    SimMachine m = machine(2);
    m.nslots = 1;  // between hosts only: these ranks share one
    m.shmBudgetBytes = bytes;
    return m;
  };
  EXPECT_DOUBLE_EQ(time(budget(4 * 8192), stream(12, 8192)), time(slots(4), stream(12, 8192)));
  // Chunks of 4160 bytes (whole cache lines) in a window of 8 of them: eight deep.
  EXPECT_DOUBLE_EQ(time(budget(8 * 4160), stream(24, 4160)), time(slots(8), stream(24, 4160)));
  // Never fewer than three chunks, whatever the budget (see sendWindowFor).
  EXPECT_DOUBLE_EQ(time(budget(8192), stream(12, 8192)), time(slots(3), stream(12, 8192)));
  EXPECT_GT(time(slots(1), stream(12, 8192)), time(budget(8192), stream(12, 8192)));
  // Two channels share the rank's budget: each connector gets half.
  std::vector<Plan> two = stream(12, 8192);
  for (Plan& p : two) p.lanes.push_back(Lane{1, p.lanes[0].steps});
  EXPECT_DOUBLE_EQ(time(budget(8 * 8192), two), time(slots(4), two));
}

TEST(PlanCost, RanksOnOneCoreTakeTurns) {
  // Sender and receiver each need 4.5 us per chunk. With a core each they overlap (one chunk per
  // 4.5 us after the first); sharing one core, every step waits for the other's.
  Result<double> alone = simulatePlans(stream(10, 4000), machine(2, 2));
  Result<double> crowded = simulatePlans(stream(10, 4000), machine(2, 1));
  ASSERT_TRUE(alone.ok());
  ASSERT_TRUE(crowded.ok());
  EXPECT_DOUBLE_EQ(alone.value(), 4.5 + 1 + 4.5 + 9 * 4.5);
  EXPECT_DOUBLE_EQ(crowded.value(), 20 * 4.5);
  // Work is conserved: two ranks with nothing to exchange each run their own steps; on one
  // core they take twice as long as on two.
  std::vector<Plan> idle = {emptyPlan(0, 2), emptyPlan(1, 2)};
  for (Plan& p : idle) {
    for (int i = 0; i < 5; ++i)
      p.lanes[0].steps.push_back(makeLocalCopy(input(0), output(0), 1000));
  }
  EXPECT_DOUBLE_EQ(simulatePlans(idle, machine(2, 1)).value(), 10 * 1.5);
  EXPECT_DOUBLE_EQ(simulatePlans(idle, machine(2, 2)).value(), 5 * 1.5);
}

TEST(PlanCost, CrowdedRanksKeepTheirCoresAndPaySwitchesInBytes) {
  // Three ranks on two cores, each with two local copies of 1.5 us (0.5 step + 1.0 bytes): ranks
  // 0 and 2 share core 0 (6 us) while rank 1 has core 1 to itself - not the 4.5 us of six steps
  // spread over two cores.
  std::vector<Plan> plans = {emptyPlan(0, 3), emptyPlan(1, 3), emptyPlan(2, 3)};
  for (Plan& p : plans) {
    for (int i = 0; i < 2; ++i)
      p.lanes[0].steps.push_back(makeLocalCopy(input(0), output(0), 1000));
  }
  SimMachine m = machine(3, 2);
  EXPECT_DOUBLE_EQ(simulatePlans(plans, m).value(), 6.0);
  // Rank 0 keeps core 0 while it has a step ready, so the core switches once: rank 2's first
  // step pays its bytes 3x: 2 * 1.5 + (0.5 + 3.0) + 1.5.
  m.switchFactor = 3;
  EXPECT_DOUBLE_EQ(simulatePlans(plans, m).value(), 8.0);
  // A core per rank: nobody switches.
  EXPECT_DOUBLE_EQ(simulatePlans(plans, machine(3, 3)).value(), 3.0);
}

TEST(PlanCost, ACrowdedRankKeepsItsCoreWhileItHasAStepReady) {
  // Ranks 0 and 2 share core 0. Rank 0 streams three chunks to rank 2 (1.5 us each to send, 1.5
  // to receive, a 1 us hop); rank 2 also has a local copy ready at once. Rank 0 keeps the core
  // for all its sends (4.5 us), as the executor runs on until it must wait; then rank 2 takes it
  // for its copy and the three receives (6 us). Taking turns by readiness would interleave them.
  std::vector<Plan> plans;
  for (int r = 0; r < 4; ++r) plans.push_back(emptyPlan(r, 4));
  plans[2].lanes[0].steps.push_back(makeLocalCopy(input(0), output(4000), 1000));
  for (int i = 0; i < 3; ++i) {
    plans[0].lanes[0].steps.push_back(makeSend(2, input(0), 1000));
    plans[2].lanes[0].steps.push_back(makeRecv(0, output(uint64_t(i) * 1000), 1000));
  }
  SimMachine m = machine(4, 2);
  m.switchFactor = 3;  // the one switch costs rank 2's copy 0.5 + 3.0
  Result<double> t = simulatePlans(plans, m);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_DOUBLE_EQ(t.value(), 4.5 + 3.5 + 3 * 1.5);
}

TEST(PlanCost, WhatTheLanesLastStepWroteIsStillInTheCache) {
  // Memory costs 1 us per KB per operand in the caller's buffers (`user`). A copy from Input to
  // Output pays it twice; a second copy that reads back what the first wrote pays it for its
  // destination only.
  SimMachine m = machine(1);
  m.bytes.user = 0.001;
  auto twoCopies = [](BufferRef secondSource) {
    std::vector<Plan> plans = {emptyPlan(0, 1)};
    plans[0].lanes[0].steps = {makeLocalCopy(input(0), output(0), 1000),
                               makeLocalCopy(secondSource, output(1000), 1000)};
    return plans;
  };
  EXPECT_DOUBLE_EQ(simulatePlans(twoCopies(input(1000)), m).value(), 3.5 + 3.5);
  EXPECT_DOUBLE_EQ(simulatePlans(twoCopies(output(0)), m).value(), 3.5 + 2.5);
}

TEST(PlanCost, ASlotFromARankThatStaysOnTheSameCoreCostsNoTransfer) {
  // Four ranks on two cores: ranks 0 and 2 share core 0, 1 and 3 core 1. Rank 0 sends 1000 B
  // (0.5 + 1.0 us, then a 1 us hop); receiving it costs 0.5 + 1.0 for the copy, plus 4.0 for the
  // transfer only when the slot comes from another core.
  auto sendTo = [](int nranks, int peer) {
    std::vector<Plan> plans;
    for (int r = 0; r < nranks; ++r) plans.push_back(emptyPlan(r, nranks));
    plans[0].lanes[0].steps.push_back(makeSend(peer, input(0), 1000));
    plans[size_t(peer)].lanes[0].steps.push_back(makeRecv(0, output(0), 1000));
    return plans;
  };
  SimMachine four = machine(4, 2);
  four.bytes.transfer = 0.004;
  EXPECT_DOUBLE_EQ(simulatePlans(sendTo(4, 2), four).value(), 1.5 + 1.0 + 1.5);
  EXPECT_DOUBLE_EQ(simulatePlans(sendTo(4, 1), four).value(), 1.5 + 1.0 + 5.5);
  // Three ranks on two cores do not stay paired: the transfer is paid either way.
  SimMachine three = machine(3, 2);
  three.bytes.transfer = 0.004;
  EXPECT_DOUBLE_EQ(simulatePlans(sendTo(3, 2), three).value(), 1.5 + 1.0 + 5.5);
  // Ranks bound as pairs: now rank 1 is rank 0's core-mate, rank 2 is not.
  four.coreOf = {0, 0, 1, 1};
  EXPECT_DOUBLE_EQ(simulatePlans(sendTo(4, 1), four).value(), 1.5 + 1.0 + 1.5);
  EXPECT_DOUBLE_EQ(simulatePlans(sendTo(4, 2), four).value(), 1.5 + 1.0 + 5.5);
}

TEST(PlanCost, TransfersOnOneWireGoOneAtATime) {
  // Ranks 0 and 1 on host 0 each send one chunk to ranks 2 and 3 on host 1 over one wire.
  SimMachine m = machine(4);
  m.hostOf = {0, 0, 1, 1};
  m.cores = {0, 0};
  m.hopUs = {1.0, 1.0};
  m.links.assign(16, PairLink{});
  m.wires = 1;
  for (int a : {0, 1}) {
    for (int b : {2, 3}) m.links[size_t(a) * 4 + b] = PairLink{2.0, 0, 0.01};
  }
  std::vector<Plan> plans;
  for (int r = 0; r < 4; ++r) plans.push_back(emptyPlan(r, 4));
  plans[0].lanes[0].steps.push_back(makeSend(2, input(0), 1000));
  plans[1].lanes[0].steps.push_back(makeSend(3, input(0), 1000));
  plans[2].lanes[0].steps.push_back(makeRecv(0, output(0), 1000));
  plans[3].lanes[0].steps.push_back(makeRecv(1, output(0), 1000));
  Result<double> t = simulatePlans(plans, m);
  ASSERT_TRUE(t.ok()) << t.status().message();
  // Both sends end at 1.5; the wire carries one (10 us) and then the other (10 us); the second
  // arrives after hop and latency at 1.5 + 20 + 1 + 2 and is received in 1.5.
  EXPECT_DOUBLE_EQ(t.value(), 1.5 + 20 + 1 + 2 + 1.5);
}

TEST(PlanCost, IndependentHalvesDoNotDeadlockARingOfExchanges) {
  // Every rank sends to the next and receives from the previous in SendRecv steps: the ring of
  // dependencies resolves only because the halves progress separately.
  const int n = 3;
  std::vector<Plan> plans;
  for (int r = 0; r < n; ++r) {
    plans.push_back(emptyPlan(r, n));
    for (int i = 0; i < 5; ++i) {
      plans[r].lanes[0].steps.push_back(
          makeSendRecv((r + 1) % n, input(0), 400, (r + n - 1) % n, output(0), 400));
    }
  }
  Result<double> t = simulatePlans(plans, machine(n));
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_GT(t.value(), 0);
}

TEST(PlanCost, SendsGoEarlyUnlessTheyReadWhatAWaitingStepWrites) {
  // Each rank receives, then sends, as the executor runs it: a Send reading nothing the waiting
  // Recv writes goes at once, so both finish (in step order they would wait forever).
  std::vector<Plan> plans = {emptyPlan(0, 2), emptyPlan(1, 2)};
  for (int r = 0; r < 2; ++r) {
    plans[r].lanes[0].steps = {makeRecv(1 - r, output(0), 1000), makeSend(1 - r, input(0), 1000)};
  }
  Result<double> t = simulatePlans(plans, machine(2));
  ASSERT_TRUE(t.ok()) << t.status().message();
  // send (0.5 + 1), hop 1, receive (0.5 + 1)
  EXPECT_DOUBLE_EQ(t.value(), 1.5 + 1.0 + 1.5);
  // Forwarding what arrives may not go early: now the two wait on each other.
  for (int r = 0; r < 2; ++r) plans[r].lanes[0].steps[1] = makeSend(1 - r, output(0), 1000);
  Result<double> forwarded = simulatePlans(plans, machine(2));
  ASSERT_FALSE(forwarded.ok());
  EXPECT_NE(forwarded.status().message().find("deadlock"), std::string::npos)
      << forwarded.status().message();
}

TEST(PlanCost, DeadlockIsAnErrorThatSaysWhere) {
  std::vector<Plan> plans = {emptyPlan(0, 2), emptyPlan(1, 2)};
  plans[0].lanes[0].steps.push_back(makeRecv(1, output(0), 4));
  plans[1].lanes[0].steps.push_back(makeRecv(0, output(0), 4));
  Result<double> t = simulatePlans(plans, machine(2));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("deadlock"), std::string::npos);
  EXPECT_NE(t.status().message().find("rank 1 lane 0 step 0 (recv)"), std::string::npos)
      << t.status().message();
}

TEST(PlanCost, RealPlansFinishAndTheSameInputsGiveTheSameBits) {
  for (Algorithm algo : algorithmsFor(Collective::kAllReduce)) {
    for (int n : {2, 3, 5}) {
      PlanRequest req;
      req.coll = Collective::kAllReduce;
      req.algo = algo;
      req.nranks = n;
      req.count = 100000;
      req.chunkBytes = 16384;
      req.nchannels = 2;
      std::vector<Plan> plans;
      for (int r = 0; r < n; ++r) {
        req.rank = r;
        Result<Plan> p = buildPlan(req);
        ASSERT_TRUE(p.ok()) << p.status().message();
        plans.push_back(std::move(p).value());
      }
      Result<double> a = simulatePlans(plans, machine(n));
      Result<double> b = simulatePlans(plans, machine(n));
      ASSERT_TRUE(a.ok()) << algorithmName(algo) << " n=" << n << ": " << a.status().message();
      ASSERT_TRUE(b.ok());
      EXPECT_EQ(a.value(), b.value());
      // No faster than one rank's own CPU work.
      double cpu = 0;
      for (const Lane& lane : plans[0].lanes) {
        for (const Step& s : lane.steps) cpu += stepCpuUs(s, machine(n));
      }
      EXPECT_GE(a.value(), cpu * 0.999) << algorithmName(algo) << " n=" << n;
    }
  }
}

TEST(PlanCost, MismatchedMachineIsAnError) {
  SimMachine m = machine(2);
  m.hostOf = {0, 1};  // host 1 not described
  EXPECT_FALSE(simulatePlans(stream(1, 4), m).ok());
  EXPECT_FALSE(simulatePlans(stream(1, 4), machine(3)).ok());
  SimMachine unbound = machine(2, 1);
  unbound.coreOf = {0};  // one rank's core missing
  EXPECT_FALSE(simulatePlans(stream(1, 4), unbound).ok());
}

}  // namespace
}  // namespace braid
