// The call check ledger over one in-memory FIFO from the ring predecessor: slots are taken when
// they have come, compared with this rank's call of the same number, and a call is held back only
// beyond the lag.
#include "executor/call_check.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "algorithms/plan.h"

namespace braid {
namespace {

constexpr uint32_t kSlots = 64;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

class CallCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const size_t headerBytes = sizeof(SlotHeader) * kSlots;
    // aligned_alloc wants a multiple of the alignment.
    const size_t total = (4096 + headerBytes + kSlots * 64 + 4095) / 4096 * 4096;
    memory_.reset(std::aligned_alloc(4096, total));
    std::memset(memory_.get(), 0, total);
    char* base = static_cast<char*>(memory_.get());
    FifoView view;
    view.control = new (base) FifoControl();
    view.headers = reinterpret_cast<SlotHeader*>(base + 4096);
    view.data = base + 4096 + headerBytes;
    view.nslots = kSlots;
    view.slotBytes = 64;
    send_ = SendConnector(view, &receiverWaker_);
    recv_ = RecvConnector(view, &senderWaker_);
    ledger_.configure(/*rank=*/1, /*predecessor=*/0, /*successor=*/0, /*maxLag=*/2, /*batch=*/1);
    ledger_.attach(&recv_);
  }

  static CallDescriptor broadcast(uint32_t seq, uint64_t count = 100) {
    CallDescriptor call;
    call.coll = static_cast<uint8_t>(Collective::kBroadcast);
    call.root = 0;
    call.count = count;
    call.seq = seq;
    return call;
  }

  // The predecessor's check slot for `call`.
  void post(const CallDescriptor& call) {
    ASSERT_NE(send_.trySlot(0), nullptr);
    send_.post(0, call);
  }

  // The predecessor's slot carrying `held` (oldest first) before `newest`.
  void postBatch(const std::vector<CallDescriptor>& held, const CallDescriptor& newest) {
    const uint32_t bytes = static_cast<uint32_t>(held.size() * sizeof(CallDescriptor));
    char* slot = send_.trySlot(bytes);
    ASSERT_NE(slot, nullptr);
    std::memcpy(slot, held.data(), bytes);
    send_.post(bytes, newest);
  }

  // This rank makes `call` with a check of its own (as a check step does).
  void makeChecked(const CallDescriptor& call) {
    ledger_.record(call);
    std::lock_guard<TryLock> lock(ledger_.mutex());
    ledger_.expect(call);
  }

  Status drain(bool useHistory = true) {
    std::lock_guard<TryLock> lock(ledger_.mutex());
    return ledger_.drain(useHistory);
  }

  std::unique_ptr<void, FreeDeleter> memory_;
  Waker senderWaker_, receiverWaker_;
  SendConnector send_;
  RecvConnector recv_;
  CallCheckLedger ledger_;
};

TEST_F(CallCheckTest, CallsRunAheadOfTheirChecksUpToTheLag) {
  makeChecked(broadcast(0));
  ASSERT_TRUE(drain().ok());
  EXPECT_TRUE(ledger_.hasPending());
  EXPECT_TRUE(ledger_.withinLag());
  makeChecked(broadcast(1));
  makeChecked(broadcast(2));
  ASSERT_TRUE(drain().ok());
  EXPECT_FALSE(ledger_.withinLag()) << "three unchecked calls with a lag of two";
  post(broadcast(0));
  ASSERT_TRUE(drain().ok());
  EXPECT_TRUE(ledger_.withinLag());
  post(broadcast(1));
  post(broadcast(2));
  ASSERT_TRUE(drain().ok());
  EXPECT_FALSE(ledger_.hasPending());
  EXPECT_EQ(recv_.tryPeek(), nullptr) << "every slot taken";
}

TEST_F(CallCheckTest, ALateSlotOfADifferentCallNamesBoth) {
  makeChecked(broadcast(0));
  makeChecked(broadcast(1));
  post(broadcast(0));
  post(broadcast(1, /*count=*/999));
  const Status status = drain();
  ASSERT_EQ(status.code(), braidInvalidUsage);
  EXPECT_NE(status.message().find("rank 0 called broadcast(count=999"), std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("where rank 1 called broadcast(count=100"), std::string::npos)
      << status.message();
}

TEST_F(CallCheckTest, SlotsOfCallsWithoutACheckHereAreComparedWithTheHistory) {
  // Call 0 needed no check on this rank, but its predecessor sent one of another call.
  ledger_.record(broadcast(0));
  post(broadcast(0, /*count=*/5));
  EXPECT_EQ(drain(/*useHistory=*/false).code(), braidSuccess) << "only the caller's thread judges";
  EXPECT_EQ(drain(/*useHistory=*/true).code(), braidInvalidUsage);
}

TEST_F(CallCheckTest, APredecessorAheadWaitsForThisRanksCall) {
  post(broadcast(0));
  ASSERT_TRUE(drain().ok());
  EXPECT_NE(recv_.tryPeek(), nullptr) << "call 0 not made here yet: its slot stays";
  makeChecked(broadcast(0));
  ASSERT_TRUE(drain().ok());
  EXPECT_FALSE(ledger_.hasPending());
}

TEST_F(CallCheckTest, ASlotTakenBeforeItsCheckStepIsNotAwaitedAgain) {
  ledger_.record(broadcast(0));
  post(broadcast(0));
  ASSERT_TRUE(drain().ok());  // at the start of the call, before its check step
  {
    std::lock_guard<TryLock> lock(ledger_.mutex());
    ledger_.expect(broadcast(0));
  }
  EXPECT_FALSE(ledger_.hasPending());
}

TEST_F(CallCheckTest, ChecksThatNeverComeAreDroppedByALaterOne) {
  // The predecessor's call 0 had no check of its own; its call 1 did.
  makeChecked(broadcast(0));
  makeChecked(broadcast(1));
  post(broadcast(1));
  ASSERT_TRUE(drain().ok());
  EXPECT_FALSE(ledger_.hasPending());
}

TEST_F(CallCheckTest, StopsAtAPointToPointCheck) {
  makeChecked(broadcast(0));
  CallDescriptor send;
  send.coll = static_cast<uint8_t>(Collective::kSend);
  send.root = 1;
  post(send);
  post(broadcast(0));
  ASSERT_TRUE(drain().ok());
  const SlotHeader* head = recv_.tryPeek();
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->call.coll, static_cast<uint8_t>(Collective::kSend)) << "left for its receive";
  EXPECT_TRUE(ledger_.hasPending());
}

TEST_F(CallCheckTest, ASlotCarriesTheDescriptorsHeldBackBeforeItsOwn) {
  for (uint32_t seq = 0; seq < 3; ++seq) makeChecked(broadcast(seq));
  postBatch({broadcast(0), broadcast(1)}, broadcast(2));
  ASSERT_TRUE(drain().ok());
  EXPECT_FALSE(ledger_.hasPending()) << "all three calls checked by one slot";
  EXPECT_EQ(recv_.tryPeek(), nullptr);
}

TEST_F(CallCheckTest, ADifferentCallHeldBackInAPayloadNamesBoth) {
  for (uint32_t seq = 0; seq < 3; ++seq) makeChecked(broadcast(seq));
  postBatch({broadcast(0), broadcast(1, /*count=*/999)}, broadcast(2));
  const Status status = drain();
  ASSERT_EQ(status.code(), braidInvalidUsage);
  EXPECT_NE(status.message().find("rank 0 called broadcast(count=999"), std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("#1"), std::string::npos) << status.message();
}

TEST_F(CallCheckTest, ABatchAheadOfThisRankIsTakenAsItsCallsComeThenReleased) {
  makeChecked(broadcast(0));
  postBatch({broadcast(0), broadcast(1)}, broadcast(2));
  ASSERT_TRUE(drain().ok());
  EXPECT_FALSE(ledger_.hasPending());
  EXPECT_NE(recv_.tryPeek(), nullptr) << "calls 1 and 2 not made here yet: the slot stays";
  makeChecked(broadcast(1));
  ASSERT_TRUE(drain().ok());
  EXPECT_NE(recv_.tryPeek(), nullptr);
  makeChecked(broadcast(2, /*count=*/7));
  EXPECT_EQ(drain().code(), braidInvalidUsage) << "call 2 is still compared after a partial take";
}

TEST_F(CallCheckTest, MalformedCheckPayloadIsAnError) {
  makeChecked(broadcast(0));
  char* slot = send_.trySlot(5);
  ASSERT_NE(slot, nullptr);
  send_.post(5, broadcast(0));
  const Status status = drain();
  EXPECT_EQ(status.code(), braidInternalError);
  EXPECT_NE(status.message().find("not up to"), std::string::npos) << status.message();
}

TEST_F(CallCheckTest, ThePredecessorsLedgerSendsItsQueueOnceFull) {
  CallCheckLedger predecessor;
  predecessor.configure(/*rank=*/0, /*predecessor=*/1, /*successor=*/1, /*maxLag=*/2,
                        /*batch=*/3);
  std::lock_guard<TryLock> lock(predecessor.mutex());
  predecessor.attachSuccessor(&send_);
  EXPECT_FALSE(predecessor.queue(broadcast(0)));
  EXPECT_FALSE(predecessor.queue(broadcast(1)));
  EXPECT_TRUE(predecessor.hasQueued());
  EXPECT_EQ(recv_.tryPeek(), nullptr) << "nothing sent while the queue fills";
  EXPECT_TRUE(predecessor.queue(broadcast(2))) << "full";
  ASSERT_TRUE(predecessor.sendQueued());
  EXPECT_FALSE(predecessor.hasQueued());
  const SlotHeader* head = recv_.tryPeek();
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->bytes, 2 * sizeof(CallDescriptor));
  for (uint32_t seq = 0; seq < 3; ++seq) makeChecked(broadcast(seq));
  ASSERT_TRUE(drain().ok());
  EXPECT_FALSE(ledger_.hasPending());
  EXPECT_EQ(recv_.tryPeek(), nullptr);
}

}  // namespace
}  // namespace braid
