// The FIFO every transport exposes to the executors: nslots slots of slotBytes in memory that both
// sides reach, a head counter the sender advances when it posts a slot and a tail counter the
// receiver advances when it frees one. Counters only grow (64-bit, never wrap in practice); slot
// k lives at index k % nslots. Release/acquire ordering on the counters publishes the slot data.
//
// Each waiting party owns a Waker: when it is about to sleep it raises `sleeping`; whoever changes
// a counter it may wait on checks that flag afterwards and, if raised, bumps `seq` and wakes the
// futex on it. The store-then-check on one side and raise-then-recheck on the other (both
// sequentially consistent) mean no wake-up is lost, and a running peer costs only one load per post.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

namespace braid {

constexpr size_t kCacheLine = 64;

/// Describes the call a slot belongs to; the receiver compares it with its own call, so ranks that
/// disagree on the collective, count, type, op, root or algorithm fail with both calls named.
struct CallDescriptor {
  uint8_t coll = 0;
  uint8_t dtype = 0;
  uint8_t op = 0;
  uint8_t algo = 0;
  int32_t root = -1;
  uint64_t count = 0;
  uint32_t seq = 0;  ///< per-communicator collective sequence, or per-peer p2p sequence
  uint32_t reserved = 0;

  bool operator==(const CallDescriptor&) const = default;
};

/// Written by the sender next to each slot.
struct SlotHeader {
  uint32_t bytes;
  uint32_t reserved;
  CallDescriptor call;
};

/// A doorbell of a party that may sleep (one per rank, in its shared-memory segment).
struct alignas(kCacheLine) Waker {
  std::atomic<uint32_t> seq{0};
  std::atomic<uint32_t> sleeping{0};
};

/// Wakes the owner of `waker` if it is asleep. Call after publishing the change it waits for.
void wakeIfSleeping(Waker* waker);
/// Sleeps on `waker` until it is woken, `seq` differs from `seenSeq`, or timeoutNs passes.
void sleepOnWaker(Waker* waker, uint32_t seenSeq, int64_t timeoutNs);

/// The shared part of one FIFO: counters on their own cache lines.
struct FifoControl {
  alignas(kCacheLine) std::atomic<uint64_t> head{0};
  alignas(kCacheLine) std::atomic<uint64_t> tail{0};
};

/// Where one FIFO lives. Plain pointers: the same view works for memory mapped from another
/// process, pinned host memory or (later) device memory.
struct FifoView {
  FifoControl* control = nullptr;
  SlotHeader* headers = nullptr;  ///< nslots headers
  char* data = nullptr;           ///< nslots * slotBytes
  uint32_t nslots = 0;
  uint32_t slotBytes = 0;
};

/// The sending end of a FIFO, owned by one thread at a time.
class SendConnector {
 public:
  SendConnector() = default;
  SendConnector(FifoView fifo, Waker* receiverWaker)
      : fifo_(fifo), receiverWaker_(receiverWaker),
        posted_(fifo.control->head.load(std::memory_order_relaxed)) {}

  bool valid() const { return fifo_.control != nullptr; }
  uint32_t slotBytes() const { return fifo_.slotBytes; }

  /// The next free slot, or nullptr while all slots are in flight.
  char* trySlot() {
    if (posted_ >= freeLimit_) {
      freeLimit_ = fifo_.control->tail.load(std::memory_order_acquire) + fifo_.nslots;
      if (posted_ >= freeLimit_) return nullptr;
    }
    return fifo_.data + (posted_ % fifo_.nslots) * fifo_.slotBytes;
  }
  /// Publishes the slot trySlot() returned.
  void post(uint32_t bytes, const CallDescriptor& call) {
    SlotHeader& h = fifo_.headers[posted_ % fifo_.nslots];
    h.bytes = bytes;
    h.call = call;
    ++posted_;
    fifo_.control->head.store(posted_, std::memory_order_seq_cst);
    wakeIfSleeping(receiverWaker_);
  }

 private:
  FifoView fifo_;
  Waker* receiverWaker_ = nullptr;
  uint64_t posted_ = 0;
  uint64_t freeLimit_ = 0;
};

/// The receiving end of a FIFO, owned by one thread at a time.
class RecvConnector {
 public:
  RecvConnector() = default;
  RecvConnector(FifoView fifo, Waker* senderWaker)
      : fifo_(fifo), senderWaker_(senderWaker),
        consumed_(fifo.control->tail.load(std::memory_order_relaxed)) {}

  bool valid() const { return fifo_.control != nullptr; }

  /// The header of the oldest unread slot, or nullptr while none has arrived.
  const SlotHeader* tryPeek() {
    if (consumed_ >= available_) {
      available_ = fifo_.control->head.load(std::memory_order_acquire);
      if (consumed_ >= available_) return nullptr;
    }
    return &fifo_.headers[consumed_ % fifo_.nslots];
  }
  const char* slotData() const { return fifo_.data + (consumed_ % fifo_.nslots) * fifo_.slotBytes; }
  /// Frees the slot tryPeek() returned.
  void release() {
    ++consumed_;
    fifo_.control->tail.store(consumed_, std::memory_order_seq_cst);
    wakeIfSleeping(senderWaker_);
  }

 private:
  FifoView fifo_;
  Waker* senderWaker_ = nullptr;
  uint64_t consumed_ = 0;
  uint64_t available_ = 0;
};

}  // namespace braid
