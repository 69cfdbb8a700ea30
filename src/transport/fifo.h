// The FIFO every transport exposes to the executors: nslots slots of slotBytes in memory that both
// sides reach, a head counter the sender advances when it posts a slot and a tail counter the
// receiver advances when it frees one. Counters only grow (64-bit, never wrap in practice); slot
// k lives at index k % nslots. Release/acquire ordering on the counters publishes the slot data.
//
// Where both ends are the connectors below (the shm transport), a FIFO may instead keep each
// slot's header in a cache line of its own (SlotLine) that also carries a sequence number, written
// last, and payloads of up to kInlineBytes. The receiver polls only that line: a small message
// then crosses cores as one cache-line transfer instead of three (head, header, data), which is
// most of the cost of a latency-bound hop. head and tail are still maintained.
//
// Each waiting party owns a Waker: when it is about to sleep it raises `sleeping`; whoever changes
// a counter it may wait on checks that flag afterwards and, if raised, bumps `seq` and wakes the
// futex on it. The store-then-check on one side and raise-then-recheck on the other (each side a
// store, a sequentially consistent fence, a load) mean no wake-up is lost, and a running peer
// costs only one fence and one load per post.
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

/// A slot's header with its publication sequence and a small inline payload, on one cache line.
struct alignas(kCacheLine) SlotLine {
  SlotHeader header;
  uint32_t seq;  ///< (slot number + 1) mod 2^32 once the slot is posted; written last
  uint32_t reserved;
  char inlineData[24];
};
static_assert(sizeof(SlotLine) == kCacheLine);
/// Payloads up to this size travel inside the SlotLine rather than in the slot.
constexpr uint32_t kInlineBytes = sizeof(SlotLine::inlineData);

/// A doorbell of a party that may sleep (one per rank, in its shared-memory segment).
struct alignas(kCacheLine) Waker {
  std::atomic<uint32_t> seq{0};
  std::atomic<uint32_t> sleeping{0};
  /// An eventfd that wakeIfSleeping also writes, for an owner that sleeps in epoll rather than on
  /// the futex (a network proxy thread). Process-local Wakers only; -1 in shared memory.
  int32_t eventFd = -1;
  /// Ranks of the owner's communicator that share its host (0: unknown), set by the transport
  /// that made the Waker. With more of them than CPUs, a waiting rank that spins holds the core a
  /// peer needs, so the progress engine yields at once instead (progress.cc).
  uint32_t hostRanks = 0;
  /// The CPU the owner ran on when it last began to wait (-1: unknown). A rank waiting on a peer
  /// that sits on its own CPU yields rather than spins: the peer cannot run until it does.
  std::atomic<int32_t> cpu{-1};
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
  SlotHeader* headers = nullptr;  ///< nslots headers (FIFOs published through head)
  char* data = nullptr;           ///< nslots * slotBytes
  uint32_t nslots = 0;
  uint32_t slotBytes = 0;
  /// nslots SlotLines instead of `headers`: slots are published through SlotLine::seq. Only for
  /// FIFOs whose both ends are SendConnector / RecvConnector.
  SlotLine* lines = nullptr;
};

/// The sending end of a FIFO, owned by one thread at a time.
class SendConnector {
 public:
  /// trySlot()'s argument when the size is not known yet: never an inline payload.
  static constexpr uint32_t kAnyBytes = ~0u;

  SendConnector() = default;
  SendConnector(FifoView fifo, Waker* receiverWaker)
      : fifo_(fifo), receiverWaker_(receiverWaker),
        posted_(fifo.control->head.load(std::memory_order_relaxed)) {}

  bool valid() const { return fifo_.control != nullptr; }
  uint32_t slotBytes() const { return fifo_.slotBytes; }
  /// The Waker of the party that frees this FIFO's slots (the receiver, or a proxy).
  const Waker* peerWaker() const { return receiverWaker_; }

  /// Where to write the next slot's `bytes` (at most slotBytes), or nullptr while all slots are
  /// in flight.
  char* trySlot(uint32_t bytes = kAnyBytes) {
    if (posted_ >= freeLimit_) {
      freeLimit_ = fifo_.control->tail.load(std::memory_order_acquire) + fifo_.nslots;
      if (posted_ >= freeLimit_) return nullptr;
    }
    const uint64_t index = posted_ % fifo_.nslots;
    inlineSlot_ = fifo_.lines != nullptr && bytes <= kInlineBytes;
    return inlineSlot_ ? fifo_.lines[index].inlineData : fifo_.data + index * fifo_.slotBytes;
  }
  /// Publishes the slot trySlot() returned.
  void post(uint32_t bytes, const CallDescriptor& call) {
    const uint64_t index = posted_ % fifo_.nslots;
    ++posted_;
    if (fifo_.lines != nullptr) {
      SlotLine& line = fifo_.lines[index];
      if (bytes <= kInlineBytes && !inlineSlot_) {
        std::memcpy(line.inlineData, fifo_.data + index * fifo_.slotBytes, bytes);
      }
      line.header.bytes = bytes;
      line.header.call = call;
      std::atomic_ref<uint32_t>(line.seq).store(static_cast<uint32_t>(posted_),
                                                std::memory_order_release);
    } else {
      SlotHeader& h = fifo_.headers[index];
      h.bytes = bytes;
      h.call = call;
    }
    fifo_.control->head.store(posted_, std::memory_order_release);
    wakeIfSleeping(receiverWaker_);
  }

 private:
  FifoView fifo_;
  Waker* receiverWaker_ = nullptr;
  uint64_t posted_ = 0;
  uint64_t freeLimit_ = 0;
  bool inlineSlot_ = false;
};

/// The receiving end of a FIFO, owned by one thread at a time.
class RecvConnector {
 public:
  RecvConnector() = default;
  RecvConnector(FifoView fifo, Waker* senderWaker)
      : fifo_(fifo), senderWaker_(senderWaker),
        consumed_(fifo.control->tail.load(std::memory_order_relaxed)) {}

  bool valid() const { return fifo_.control != nullptr; }
  /// The Waker of the party that posts into this FIFO (the sender, or a proxy).
  const Waker* peerWaker() const { return senderWaker_; }

  /// The header of the oldest unread slot, or nullptr while none has arrived.
  const SlotHeader* tryPeek() {
    const uint64_t index = consumed_ % fifo_.nslots;
    if (fifo_.lines != nullptr) {
      SlotLine& line = fifo_.lines[index];
      if (consumed_ >= available_) {
        if (std::atomic_ref<uint32_t>(line.seq).load(std::memory_order_acquire) !=
            static_cast<uint32_t>(consumed_ + 1)) {
          return nullptr;
        }
        available_ = consumed_ + 1;
      }
      return &line.header;
    }
    if (consumed_ >= available_) {
      available_ = fifo_.control->head.load(std::memory_order_acquire);
      if (consumed_ >= available_) return nullptr;
    }
    return &fifo_.headers[index];
  }
  /// The payload of the slot tryPeek() returned.
  const char* slotData() const {
    const uint64_t index = consumed_ % fifo_.nslots;
    if (fifo_.lines != nullptr && fifo_.lines[index].header.bytes <= kInlineBytes) {
      return fifo_.lines[index].inlineData;
    }
    return fifo_.data + index * fifo_.slotBytes;
  }
  /// Frees the slot tryPeek() returned.
  void release() {
    ++consumed_;
    fifo_.control->tail.store(consumed_, std::memory_order_release);
    wakeIfSleeping(senderWaker_);
  }

 private:
  FifoView fifo_;
  Waker* senderWaker_ = nullptr;
  uint64_t consumed_ = 0;
  uint64_t available_ = 0;
};

}  // namespace braid
