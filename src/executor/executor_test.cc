// The host executor on plans written by hand: two ranks of this process whose PlanRuns take turns
// on the test's thread, over FIFOs in process memory.
#include "executor/executor.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "executor/local_world.h"

namespace braid {
namespace {

constexpr uint32_t kBytes = 1024;  // one step's payload: 256 floats
constexpr uint32_t kElems = kBytes / 4;

/// Two ranks, each with its plan (one lane) and its buffers.
class TwoRanks {
 public:
  TwoRanks() {
    for (int r = 0; r < 2; ++r) {
      transports_[r] = std::make_unique<LocalTransport>(&world_, r);
      std::vector<Transport*> transports(2, transports_[r].get());
      transports[r] = nullptr;
      connectors_[r] = ConnectorTable(r, 1, std::move(transports));
      plans_[r].rank = r;
      plans_[r].nranks = 2;
      plans_[r].lanes.resize(1);
      input_[r].assign(4 * kElems, 0);
      output_[r].assign(4 * kElems, -1);
      for (uint32_t i = 0; i < input_[r].size(); ++i) input_[r][i] = float(100 * (r + 1) + i);
    }
  }

  std::vector<Step>& steps(int rank) { return plans_[rank].lanes[0].steps; }
  const std::vector<float>& output(int rank) const { return output_[rank]; }
  float inputAt(int rank, uint32_t i) const { return input_[rank][i]; }

  /// Lets the ranks take turns until both finish; false when neither moves any more.
  bool run() {
    std::unique_ptr<PlanRun> runs[2];
    for (int r = 0; r < 2; ++r) {
      plans_[r].inputBytes = input_[r].size() * sizeof(float);
      plans_[r].outputBytes = output_[r].size() * sizeof(float);
      PlanBuffers buffers{reinterpret_cast<const char*>(input_[r].data()),
                          reinterpret_cast<char*>(output_[r].data()), nullptr};
      runs[r] = std::make_unique<PlanRun>(plans_[r], buffers, reducer_, call_, &connectors_[r]);
    }
    while (!runs[0]->done() || !runs[1]->done()) {
      bool moved = false;
      for (auto& run : runs) {
        Result<bool> r = run->progress();
        EXPECT_TRUE(r.ok()) << r.status().message();
        if (!r.ok()) return false;
        moved |= r.value();
      }
      if (!moved) return false;
    }
    return true;
  }

 private:
  LocalWorld world_{2, 0, 4096, 4};
  std::unique_ptr<LocalTransport> transports_[2];
  ConnectorTable connectors_[2];
  Plan plans_[2];
  std::vector<float> input_[2];
  std::vector<float> output_[2];
  kernels::Reducer reducer_;
  CallDescriptor call_;
};

BufferRef in(uint32_t chunk) { return input(uint64_t{chunk} * kBytes); }
BufferRef out(uint32_t chunk) { return output(uint64_t{chunk} * kBytes); }

TEST(Executor, ATransferReadsAsASendOnItsSenderAndARecvOnItsReceiver) {
  CallDescriptor transfer;  // rank 2 sends 5 floats to rank 3: both ends describe it so
  transfer.coll = static_cast<uint8_t>(Collective::kSend);
  transfer.dtype = static_cast<uint8_t>(braidFloat32);
  transfer.algo = static_cast<uint8_t>(Algorithm::kPairwise);
  transfer.root = 3;
  transfer.from = 2;
  transfer.count = 5;
  transfer.seq = 7;
  EXPECT_EQ(describeCall(transfer, 2), "send(count=5, float, peer=3) #7 [pairwise]");
  EXPECT_EQ(describeCall(transfer, 3), "recv(count=5, float, peer=2) #7 [pairwise]");
  CallDescriptor reduce;
  reduce.coll = static_cast<uint8_t>(Collective::kReduce);
  reduce.dtype = static_cast<uint8_t>(braidFloat32);
  reduce.op = static_cast<uint8_t>(braidSum);
  reduce.root = 3;
  reduce.count = 5;
  // A root is no receiver: every rank describes a rooted collective alike.
  EXPECT_EQ(describeCall(reduce, 3), describeCall(reduce, 2));
  EXPECT_EQ(describeCall(reduce, 3), "reduce(count=5, float, sum, root=3) #0 [ring]");
}

TEST(Executor, SendsOfLaterStepsGoWhileAReceiveWaits) {
  // Each rank first receives, then sends: in strict step order both would wait forever. The
  // sends read nothing the receives write, so they go while the receives wait.
  TwoRanks w;
  for (int r = 0; r < 2; ++r) {
    w.steps(r).push_back(makeRecv(1 - r, out(0), kBytes));
    w.steps(r).push_back(makeSend(1 - r, in(0), kBytes));
    w.steps(r).push_back(makeSend(1 - r, in(1), kBytes));
    w.steps(r).push_back(makeRecv(1 - r, out(1), kBytes));
  }
  ASSERT_TRUE(w.run());
  for (int r = 0; r < 2; ++r) {
    for (uint32_t i = 0; i < 2 * kElems; ++i) {
      ASSERT_EQ(w.output(r)[i], w.inputAt(1 - r, i)) << "rank " << r << " element " << i;
    }
  }
}

TEST(Executor, ASendThatReadsWhatAWaitingStepWritesWaitsForIt) {
  // Rank 0 forwards what it receives: its Send reads the chunk its Recv writes, so it may not go
  // early with the stale contents. Rank 1 gets its own chunk back.
  TwoRanks w;
  w.steps(0).push_back(makeRecv(1, out(0), kBytes));
  w.steps(0).push_back(makeSend(1, out(0), kBytes));
  w.steps(1).push_back(makeSend(0, in(0), kBytes));
  w.steps(1).push_back(makeRecv(0, out(0), kBytes));
  ASSERT_TRUE(w.run());
  for (uint32_t i = 0; i < kElems; ++i) {
    ASSERT_EQ(w.output(1)[i], w.inputAt(1, i)) << "element " << i;
  }
}

TEST(Executor, ExchangeHalvesRunAheadOfTheirReceives) {
  // Rank 0 exchanges chunk after chunk; rank 1 receives all of them before it sends any. Rank 0's
  // send halves go ahead of its receive halves as far as the FIFO holds (4 slots).
  TwoRanks w;
  for (uint32_t c = 0; c < 3; ++c) {
    w.steps(0).push_back(makeSendRecv(1, in(c), kBytes, 1, out(c), kBytes));
    w.steps(1).push_back(makeRecv(0, out(c), kBytes));
  }
  for (uint32_t c = 0; c < 3; ++c) w.steps(1).push_back(makeSend(0, in(c), kBytes));
  ASSERT_TRUE(w.run());
  for (int r = 0; r < 2; ++r) {
    for (uint32_t i = 0; i < 3 * kElems; ++i) {
      ASSERT_EQ(w.output(r)[i], w.inputAt(1 - r, i)) << "rank " << r << " element " << i;
    }
  }
}

}  // namespace
}  // namespace braid
