// The FIFO connectors over memory laid out as the shm transport lays it out, in both publication
// modes: through the head counter (SlotHeader array) and through per-slot SlotLines with inline
// payloads (what the shm transport uses).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "transport/fifo.h"

namespace braid {
namespace {

constexpr uint32_t kNslots = 4;
constexpr uint32_t kSlotBytes = 4096;
constexpr size_t kMetaBytes = 8192;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

class FifoTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    memory_.reset(std::aligned_alloc(4096, kMetaBytes + kNslots * kSlotBytes));
    std::memset(memory_.get(), 0, kMetaBytes + kNslots * kSlotBytes);
    char* base = static_cast<char*>(memory_.get());
    view_.control = new (base) FifoControl();
    if (GetParam()) {
      view_.lines = reinterpret_cast<SlotLine*>(base + sizeof(FifoControl));
    } else {
      view_.headers = reinterpret_cast<SlotHeader*>(base + sizeof(FifoControl));
    }
    view_.data = base + kMetaBytes;
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
  const std::vector<uint32_t> sizes = {0, 1, 8, kInlineBytes - 1, kInlineBytes, kInlineBytes + 1,
                                       64, 1000, kSlotBytes, 4, 24, 200};
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
  for (uint32_t k = 0; k < kNslots; ++k) {
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
  auto sizeOf = [](uint64_t k) { return static_cast<uint32_t>((k * 37) % 300); };
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

INSTANTIATE_TEST_SUITE_P(Publication, FifoTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "SlotLines" : "HeadCounter";
                         });

}  // namespace
}  // namespace braid
