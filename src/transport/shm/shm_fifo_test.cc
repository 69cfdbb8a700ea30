// The FIFO connectors over memory laid out as the shm transport lays it out, in every publication
// mode: through the head counter (SlotHeader array), through per-slot SlotLines with inline
// payloads, and through more SlotLines than data slots with a payload area per line (what the shm
// transport uses).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fifo/fifo.h"

namespace braid {
namespace {

constexpr uint32_t kNslots = 4;
constexpr uint32_t kNlines = 16;
constexpr uint32_t kSlotBytes = 2 * kSmallBytes;
constexpr size_t kMetaBytes = 8192;
constexpr size_t kSmallArea = size_t{kNlines} * kSmallBytes;
// Line FIFOs: a data area of kNslots * kSlotBytes payload bytes.
constexpr size_t kRingBytes = size_t{kNslots} * kSlotBytes;
constexpr size_t kTotalBytes = kMetaBytes + kSmallArea + kRingBytes;

enum class Mode { kHeadCounter, kSlotLines, kDeepLines };

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

class FifoTest : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    memory_.reset(std::aligned_alloc(4096, kTotalBytes));
    std::memset(memory_.get(), 0, kTotalBytes);
    char* base = static_cast<char*>(memory_.get());
    view_.control = new (base) FifoControl();
    if (GetParam() == Mode::kHeadCounter) {
      view_.headers = reinterpret_cast<SlotHeader*>(base + sizeof(FifoControl));
    } else {
      view_.lines = reinterpret_cast<SlotLine*>(base + sizeof(FifoControl));
      view_.dataBytes = kRingBytes;
    }
    if (GetParam() == Mode::kDeepLines) {
      view_.nlines = kNlines;
      view_.small = base + kMetaBytes;
    }
    view_.data = base + kMetaBytes + kSmallArea;
    view_.nslots = kNslots;
    view_.slotBytes = kSlotBytes;
  }

  static CallDescriptor callNumber(uint32_t seq) {
    CallDescriptor call;
    call.coll = 3;
    call.count = 1000 + seq;
    call.seq = seq;
    return call;
  }

  static uint8_t pattern(uint64_t slot, uint32_t i) { return static_cast<uint8_t>(slot * 7 + i); }

  std::unique_ptr<void, FreeDeleter> memory_;
  FifoView view_;
  Waker senderWaker_, receiverWaker_;
};

TEST_P(FifoTest, SlotsArriveInOrderWithHeaderAndPayloadAcrossWrapAround) {
  SendConnector send(view_, &receiverWaker_);
  RecvConnector recv(view_, &senderWaker_);
  EXPECT_EQ(recv.tryPeek(), nullptr);
  // Sizes around the inline limit and beyond, more slots than the FIFO holds.
  const std::vector<uint32_t> sizes = {0,
                                       1,
                                       8,
                                       kInlineBytes - 1,
                                       kInlineBytes,
                                       kInlineBytes + 1,
                                       64,
                                       1000,
                                       kSmallBytes,
                                       kSmallBytes + 1,
                                       kSlotBytes,
                                       4,
                                       24,
                                       200,
                                       kSlotBytes,
                                       6000,
                                       5,
                                       kSlotBytes};
  for (uint64_t k = 0; k < sizes.size(); ++k) {
    const uint32_t bytes = sizes[k];
    char* slot = send.trySlot(bytes);
    ASSERT_NE(slot, nullptr) << "slot " << k;
    for (uint32_t i = 0; i < bytes; ++i) slot[i] = static_cast<char>(pattern(k, i));
    send.post(bytes, callNumber(static_cast<uint32_t>(k)));

    const SlotHeader* h = recv.tryPeek();
    ASSERT_NE(h, nullptr) << "slot " << k;
    EXPECT_EQ(h->bytes, bytes);
    EXPECT_EQ(h->call, callNumber(static_cast<uint32_t>(k)));
    const char* data = recv.slotData();
    for (uint32_t i = 0; i < bytes; ++i) {
      ASSERT_EQ(static_cast<uint8_t>(data[i]), pattern(k, i)) << "slot " << k << " byte " << i;
    }
    recv.release();
    EXPECT_EQ(recv.tryPeek(), nullptr) << "slot " << k;
  }
  EXPECT_EQ(view_.control->head.load(), sizes.size());
  EXPECT_EQ(view_.control->tail.load(), sizes.size());
}

TEST_P(FifoTest, SenderStopsWhenEverySlotIsInFlight) {
  SendConnector send(view_, &receiverWaker_);
  RecvConnector recv(view_, &senderWaker_);
  const uint32_t depth = GetParam() == Mode::kDeepLines ? kNlines : kNslots;
  for (uint32_t k = 0; k < depth; ++k) {
    char* slot = send.trySlot(8);
    ASSERT_NE(slot, nullptr);
    std::memcpy(slot, &k, sizeof(k));
    send.post(sizeof(k), callNumber(k));
  }
  EXPECT_EQ(send.trySlot(8), nullptr);
  // The receiver sees all of them, oldest first, before freeing any.
  ASSERT_NE(recv.tryPeek(), nullptr);
  uint32_t first = 99;
  std::memcpy(&first, recv.slotData(), sizeof(first));
  EXPECT_EQ(first, 0u);
  recv.release();
  char* again = send.trySlot(8);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(send.trySlot(8), again) << "asking twice must not skip a slot";
}

// Only lines with payload areas of their own tell small messages and large ones apart.
class DeepLinesFifoTest : public FifoTest {};

TEST_P(DeepLinesFifoTest, LargeMessagesStopAtTheDataSlotsSmallOnesGoOn) {
  SendConnector send(view_, &receiverWaker_);
  RecvConnector recv(view_, &senderWaker_);
  for (uint32_t k = 0; k < kNslots; ++k) {
    char* slot = send.trySlot(kSlotBytes);
    ASSERT_NE(slot, nullptr);
    std::memset(slot, static_cast<int>(k), kSlotBytes);
    send.post(kSlotBytes, callNumber(k));
  }
  EXPECT_EQ(send.trySlot(kSlotBytes), nullptr) << "every data slot is in flight";
  char* small = send.trySlot(kSmallBytes);
  ASSERT_NE(small, nullptr) << "a message that fits a line's own area needs no data slot";
  std::memset(small, 0x5a, kSmallBytes);
  send.post(kSmallBytes, callNumber(kNslots));
  // Freeing the oldest large message frees its data slot.
  for (uint32_t k = 0; k <= kNslots; ++k) {
    const SlotHeader* h = recv.tryPeek();
    ASSERT_NE(h, nullptr);
    EXPECT_EQ(h->call, callNumber(k));
    const char expected = k < kNslots ? static_cast<char>(k) : static_cast<char>(0x5a);
    EXPECT_EQ(recv.slotData()[0], expected);
    EXPECT_EQ(recv.slotData()[h->bytes - 1], expected);
    recv.release();
    if (k == 0) {
      EXPECT_NE(send.trySlot(kSlotBytes), nullptr) << "the oldest data slot is free again";
    }
  }
  EXPECT_EQ(view_.control->dataTail.load(), kRingBytes) << "data-area bytes freed";
}

TEST_P(DeepLinesFifoTest, PayloadsPackByBytesAndStartOverAtTheEnd) {
  SendConnector send(view_, &receiverWaker_);
  RecvConnector recv(view_, &senderWaker_);
  constexpr uint32_t kBytes = 5000;  // takes 5056 bytes (whole cache lines)
  constexpr uint32_t kFit = kRingBytes / 5056;
  static_assert(kFit * 5056 + 5056 > kRingBytes, "one more must not fit");
  uint64_t sent = 0, received = 0;
  auto post = [&] {
    char* slot = send.trySlot(kBytes);
    if (slot == nullptr) return false;
    const char* end = view_.data + kRingBytes;
    EXPECT_TRUE(slot >= view_.data && slot + kBytes <= end) << "message " << sent;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(slot) % kCacheLine, 0u) << "message " << sent;
    for (uint32_t i = 0; i < kBytes; ++i) slot[i] = static_cast<char>(pattern(sent, i));
    send.post(kBytes, callNumber(static_cast<uint32_t>(sent)));
    ++sent;
    return true;
  };
  auto receive = [&] {
    const SlotHeader* h = recv.tryPeek();
    ASSERT_NE(h, nullptr);
    EXPECT_EQ(h->call, callNumber(static_cast<uint32_t>(received)));
    const char* data = recv.slotData();
    uint32_t bad = 0;
    for (uint32_t i = 0; i < kBytes; ++i)
      bad += static_cast<uint8_t>(data[i]) != pattern(received, i);
    EXPECT_EQ(bad, 0u) << "message " << received;
    recv.release();
    ++received;
  };
  // The ring holds as many as its bytes allow, more than it has slots of kSlotBytes.
  for (uint32_t k = 0; k < kFit; ++k) ASSERT_TRUE(post()) << "message " << k;
  EXPECT_GT(kFit, kNslots);
  EXPECT_FALSE(post()) << "the ring's bytes are all in flight";
  // Freeing the first makes room at the beginning, where the next starts over; keep going round
  // several times with the ring full.
  for (int k = 0; k < 40; ++k) {
    receive();
    ASSERT_TRUE(post()) << "message " << sent;
    EXPECT_FALSE(post()) << "message " << sent;
  }
  while (received < sent) receive();
  EXPECT_EQ(view_.control->dataTail.load(), view_.control->dataHead.load());
}

TEST_P(DeepLinesFifoTest, AWindowHoldsBackASenderBeforeTheRingIsFull) {
  SendConnector send(view_, &receiverWaker_);
  RecvConnector recv(view_, &senderWaker_);
  constexpr uint64_t kWindow = 3 * kSlotBytes;
  for (uint32_t k = 0; k < 3; ++k) {
    ASSERT_NE(send.trySlot(kSlotBytes, kWindow), nullptr);
    send.post(kSlotBytes, callNumber(k));
  }
  EXPECT_EQ(send.trySlot(kSlotBytes, kWindow), nullptr) << "the window is full";
  EXPECT_NE(send.trySlot(kSmallBytes, kWindow), nullptr) << "line payloads take no window";
  EXPECT_NE(send.trySlot(kSlotBytes), nullptr) << "the ring itself has room";
  ASSERT_NE(recv.tryPeek(), nullptr);
  recv.release();
  EXPECT_NE(send.trySlot(kSlotBytes, kWindow), nullptr) << "one freed, one more";
}

TEST_P(FifoTest, SmallPayloadWrittenIntoTheSlotStillArrives) {
  // A sender that did not know the size when it asked for the slot writes into the slot proper;
  // post() moves a small payload to where the receiver looks for it.
  SendConnector send(view_, &receiverWaker_);
  RecvConnector recv(view_, &senderWaker_);
  char* slot = send.trySlot();
  ASSERT_NE(slot, nullptr);
  std::memcpy(slot, "braid", 5);
  send.post(5, callNumber(1));
  ASSERT_NE(recv.tryPeek(), nullptr);
  EXPECT_EQ(std::string(recv.slotData(), 5), "braid");
}

TEST_P(FifoTest, PostWakesASleepingReceiver) {
  SendConnector send(view_, &receiverWaker_);
  const uint32_t before = receiverWaker_.seq.load();
  send.post(0, callNumber(0));
  EXPECT_EQ(receiverWaker_.seq.load(), before) << "nobody sleeps: no wake-up";
  receiverWaker_.sleeping.store(1);
  ASSERT_NE(send.trySlot(0), nullptr);
  send.post(0, callNumber(1));
  EXPECT_EQ(receiverWaker_.seq.load(), before + 1);
}

TEST_P(FifoTest, StreamBetweenThreadsKeepsEveryByte) {
  constexpr uint64_t kSlots = 20000;
  SendConnector send(view_, &receiverWaker_);
  RecvConnector recv(view_, &senderWaker_);
  // Mostly small messages, every fifth one large enough to need a data slot.
  auto sizeOf = [](uint64_t k) {
    return static_cast<uint32_t>(k % 5 == 0 ? 5000 + k % 3000 : (k * 37) % 300);
  };
  std::thread sender([&] {
    for (uint64_t k = 0; k < kSlots; ++k) {
      const uint32_t bytes = sizeOf(k);
      char* slot;
      while ((slot = send.trySlot(bytes)) == nullptr) std::this_thread::yield();
      for (uint32_t i = 0; i < bytes; ++i) slot[i] = static_cast<char>(pattern(k, i));
      send.post(bytes, callNumber(static_cast<uint32_t>(k)));
    }
  });
  uint64_t bad = 0;
  for (uint64_t k = 0; k < kSlots; ++k) {
    const SlotHeader* h;
    while ((h = recv.tryPeek()) == nullptr) std::this_thread::yield();
    if (h->bytes != sizeOf(k) || !(h->call == callNumber(static_cast<uint32_t>(k)))) ++bad;
    const char* data = recv.slotData();
    for (uint32_t i = 0; i < h->bytes; ++i) bad += static_cast<uint8_t>(data[i]) != pattern(k, i);
    recv.release();
  }
  sender.join();
  EXPECT_EQ(bad, 0u);
}

// A lent payload takes a line and no data: the receiver reads it where the sender keeps it, and
// the sender learns it may change it again only once the receiver has released the slot.
TEST_P(DeepLinesFifoTest, LentPayloadsAreReadInPlaceAndReturnedOnRelease) {
  std::vector<char> lender(3 * kSlotBytes);
  for (size_t i = 0; i < lender.size(); ++i) lender[i] = static_cast<char>(pattern(9, i));
  SendConnector send(view_, &receiverWaker_);
  send.setLending(Lending::kSameProcess);
  struct SameProcess final : LentReader {
    const char* address(const LentSpan& span, uint64_t) override {
      return span.buffer == 0 ? reinterpret_cast<const char*>(span.offset) : nullptr;
    }
  } reader;
  RecvConnector recv(view_, &senderWaker_, &reader);
  EXPECT_EQ(send.lending(), Lending::kSameProcess);
  EXPECT_TRUE(send.lentReturned());

  // More than the data ring holds, lent in one go: lines are all they take.
  const uint32_t bytes = static_cast<uint32_t>(lender.size());
  for (uint32_t k = 0; k < 3; ++k) {
    ASSERT_TRUE(send.lineFree());
    LentSpan span;
    span.offset = reinterpret_cast<uintptr_t>(lender.data()) + k;
    send.lend(bytes - k, callNumber(k), span);
  }
  EXPECT_EQ(view_.control->dataHead.load(), 0u);
  EXPECT_FALSE(send.lentReturned());
  for (uint32_t k = 0; k < 3; ++k) {
    const SlotHeader* h = recv.tryPeek();
    ASSERT_NE(h, nullptr);
    EXPECT_EQ(h->bytes, bytes - k);
    EXPECT_EQ(h->call, callNumber(k));
    EXPECT_EQ(recv.slotData(), lender.data() + k);
    EXPECT_FALSE(send.lentReturned());
    recv.release();
  }
  EXPECT_TRUE(send.lentReturned());
  EXPECT_EQ(view_.control->dataTail.load(), 0u);

  // Copied payloads still follow, and the ring is untouched by what went before.
  char* slot = send.trySlot(kSlotBytes);
  ASSERT_NE(slot, nullptr);
  std::memset(slot, 5, kSlotBytes);
  send.post(kSlotBytes, callNumber(3));
  ASSERT_NE(recv.tryPeek(), nullptr);
  EXPECT_EQ(recv.slotData()[kSlotBytes - 1], 5);
  recv.release();
}

// A sender that gives up on its call takes back what it lent: not while the receiver reads it,
// and the receiver reads none of it afterwards.
TEST_P(DeepLinesFifoTest, AWithdrawnLoanWaitsForTheReadInProgressAndNoneAfter) {
  std::vector<char> lender(2 * kSlotBytes, 7);
  SendConnector send(view_, &receiverWaker_);
  struct SameProcess final : LentReader {
    const char* address(const LentSpan& span, uint64_t) override {
      return reinterpret_cast<const char*>(span.offset);
    }
  } reader;
  RecvConnector recv(view_, &senderWaker_, &reader);
  for (uint32_t k = 0; k < 2; ++k) {
    LentSpan span;
    span.offset = reinterpret_cast<uintptr_t>(lender.data()) + k * kSlotBytes;
    ASSERT_TRUE(send.lineFree());
    send.lend(kSlotBytes, callNumber(k), span);
  }
  ASSERT_NE(recv.tryPeek(), nullptr);
  EXPECT_EQ(recv.slotData(), lender.data());
  EXPECT_FALSE(send.tryWithdrawLent()) << "the receiver is reading it";
  recv.release();
  EXPECT_TRUE(send.tryWithdrawLent());
  EXPECT_FALSE(send.lentReturned());
  ASSERT_NE(recv.tryPeek(), nullptr);
  EXPECT_EQ(recv.slotData(), nullptr);
  EXPECT_TRUE(recv.lentWithdrawn());
  EXPECT_TRUE(send.tryWithdrawLent()) << "withdrawn for good";
}

TEST_P(DeepLinesFifoTest, ALentPayloadWithoutAReaderHasNoAddress) {
  SendConnector send(view_, &receiverWaker_);
  RecvConnector recv(view_, &senderWaker_);  // this receiver takes no loans
  char data[64] = {};
  LentSpan span;
  span.offset = reinterpret_cast<uintptr_t>(data);
  ASSERT_TRUE(send.lineFree());
  send.lend(sizeof(data), callNumber(0), span);
  ASSERT_NE(recv.tryPeek(), nullptr);
  EXPECT_EQ(recv.slotData(), nullptr);
}

TEST_P(DeepLinesFifoTest, LendingNeedsAFifoWithLines) {
  FifoView headersOnly = view_;
  headersOnly.lines = nullptr;
  SendConnector send(headersOnly, &receiverWaker_);
  send.setLending(Lending::kSharedBuffers);
  EXPECT_EQ(send.lending(), Lending::kNone);
}

INSTANTIATE_TEST_SUITE_P(Publication, DeepLinesFifoTest, ::testing::Values(Mode::kDeepLines));
INSTANTIATE_TEST_SUITE_P(Publication, FifoTest,
                         ::testing::Values(Mode::kHeadCounter, Mode::kSlotLines, Mode::kDeepLines),
                         [](const ::testing::TestParamInfo<Mode>& info) {
                           switch (info.param) {
                             case Mode::kHeadCounter: return "HeadCounter";
                             case Mode::kSlotLines: return "SlotLines";
                             case Mode::kDeepLines: return "DeepLines";
                           }
                           return "unknown";
                         });

}  // namespace
}  // namespace braid
