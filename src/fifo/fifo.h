// The FIFO every transport exposes to the executors: nslots slots of slotBytes in memory that both
// sides reach, a head counter the sender advances when it posts a slot and a tail counter the
// receiver advances when it frees one. Counters only grow (64-bit, never wrap in practice); slot
// k lives at index k % nslots. Release/acquire ordering on the counters publishes the slot data.
//
// Where both ends are the connectors below (the shm transport), a FIFO may instead keep each
// slot's header in a cache line of its own (SlotLine) that also carries a sequence number, written
// last, and payloads of up to kInlineBytes. The receiver polls only that line: a small message
// then crosses cores as one cache-line transfer instead of three (head, header, data), which is
// most of the cost of a latency-bound hop. head and tail are still maintained. Such a FIFO may
// have more lines than data slots, and beside each line a payload area of kSmallBytes: messages
// that fit there never take a data slot, so small calls pipeline nlines deep (a broadcast root
// runs that many calls ahead of slow receivers). Larger payloads are packed one after another into
// the data area, each taking its size rounded up to a cache line, and start over at its beginning
// once the next would end past the sender's window (at most dataBytes; the header's `reserved`
// says where a payload starts). dataHead and dataTail count the bytes of a ring of dataBytes,
// laps being dataBytes long whatever the window, so the sender never overtakes the receiver. The
// bytes in flight, not the messages, then bound what a FIFO holds whatever the chunk size: depth
// in bytes is what a large transfer's speed depends on (about 1 MiB in flight per core with a
// 1 MiB L2; see executor_benchmark), and a call that moves less than its window keeps reusing
// the same cache-hot bytes. A window of at least three of the caller's largest payloads always
// has room for two of them, even just after starting over (with one, a ring can deadlock).
//
// A sender may also lend a payload (PayloadPlace::kLent, where both ends allow it): the line
// then says where the payload lies in the sender's memory, the receiver reads it there through
// its LentReader, and the sender keeps it unchanged until the slot is released (lentReturned).
// A sender that gives up on a call (an error) must not return while the receiver may still read
// what it lent: it withdraws the loan (tryWithdrawLent), which waits out a read in progress
// (slotData() to release(), one kernel's worth) and makes every later read fail instead.
//
// Each waiting party owns a Waker: when it is about to sleep it raises `sleeping`; whoever changes
// a counter it may wait on checks that flag afterwards and, if raised, bumps `seq` and wakes the
// futex on it. The store-then-check on one side and raise-then-recheck on the other (each side a
// store, a full fence, a load) mean no wake-up is lost. Skipping the post's fence (sleepers
// fencing for every poster with membarrier(2) instead) was tried: the cost moved to the call's
// next atomic read-modify-write, and neither FIFO micro-benchmarks nor braid-perf moved.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#if defined(__SANITIZE_THREAD__)
#define BRAID_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BRAID_TSAN 1
#endif
#endif
#ifdef BRAID_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace braid {

constexpr size_t kCacheLine = 64;

/// Describes the call a slot belongs to; the receiver compares it with its own call, so ranks that
/// disagree on the collective, count, type, op, root or algorithm fail with both calls named.
struct CallDescriptor {
  uint8_t coll = 0;
  uint8_t dtype = 0;
  uint8_t op = 0;
  uint8_t algo = 0;
  int32_t root = -1;  ///< broadcast and reduce: the root; send and receive: the receiving rank
  uint64_t count = 0;
  uint32_t seq = 0;  ///< per-communicator collective sequence, or per-peer p2p sequence
  int32_t from = 0;  ///< send and receive: the sending rank (0 for collectives)

  bool operator==(const CallDescriptor&) const = default;
};

/// Written by the sender next to each slot.
struct SlotHeader {
  uint32_t bytes;
  uint32_t reserved;  ///< FIFOs with lines: where a kData payload starts in the data area
  CallDescriptor call;
};

/// A slot's header with its publication sequence and a small inline payload, on one cache line.
struct alignas(kCacheLine) SlotLine {
  SlotHeader header;
  uint32_t seq;    ///< (slot number + 1) mod 2^32 once the slot is posted; written last
  uint32_t place;  ///< a PayloadPlace: where the payload is
  char inlineData[24];
};
static_assert(sizeof(SlotLine) == kCacheLine);
/// Payloads up to this size travel inside the SlotLine rather than in the slot.
constexpr uint32_t kInlineBytes = sizeof(SlotLine::inlineData);
/// Payloads up to this size travel in the line's own payload area when the FIFO has them.
constexpr uint32_t kSmallBytes = 4096;

/// Where a SlotLine's payload is (SlotLine::place).
enum class PayloadPlace : uint32_t { kInline = 0, kSmall = 1, kData = 2, kLent = 3 };

/// A payload the sender lends instead of copying (the line's inline data): the receiver reads it
/// where it lies, in the sender's memory, and the sender leaves it unchanged until the slot is
/// released. One copy per byte instead of two.
struct LentSpan {
  uint64_t buffer = 0;  ///< the sender's shared buffer (shared_buffers.h); 0: `offset` is an
                        ///< address in the receiver's own process
  uint64_t offset = 0;  ///< where the payload starts in that buffer
  int32_t fd = -1;      ///< the sender's descriptor of the buffer
  uint32_t reserved = 0;
};
static_assert(sizeof(LentSpan) == sizeof(SlotLine::inlineData));

/// Whom a SendConnector may lend payloads to instead of copying them.
enum class Lending : uint8_t {
  kNone,           ///< copy everything
  kSameProcess,    ///< the receiver shares this address space: any memory
  kSharedBuffers,  ///< the receiver can map this process's shared buffers (braidMemAlloc)
};

/// FifoControl::lentState: whether the receiver is reading a lent payload, or may no longer.
enum LentState : uint32_t { kLentIdle = 0, kLentReading = 1, kLentWithdrawn = 2 };

/// ThreadSanitizer cannot see that a lent payload is handed over: the line that says so lies in
/// shared memory that each rank maps at an address of its own, so the release and the acquire
/// on it look like operations on two objects. Lender and reader (threads of one process) also
/// synchronize on this one object, which TSan sees: coarser than the real hand-over, so it may
/// hide a race between lending threads but never reports a false one. Elsewhere it costs nothing.
#ifdef BRAID_TSAN
inline char* lentHandoverKey() {
  static char key;
  return &key;
}
#endif
/// Before a lent payload is published, or a read one released.
inline void lentHandedOver() {
#ifdef BRAID_TSAN
  __tsan_release(lentHandoverKey());
#endif
}
/// After a lent payload is seen, or its release.
inline void lentTaken() {
#ifdef BRAID_TSAN
  __tsan_acquire(lentHandoverKey());
#endif
}

/// Turns the spans a peer lends into addresses this process can read.
class LentReader {
 public:
  virtual ~LentReader() = default;
  /// Where `bytes` of `span` can be read, or nullptr when they cannot (the reason logged).
  virtual const char* address(const LentSpan& span, uint64_t bytes) = 0;
};

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
  /// CPUs those ranks may run on between them (0: unknown; the process's own are assumed).
  uint32_t hostCpus = 0;
  /// The CPU the owner ran on when it last began to wait (-1: unknown). A rank waiting on a peer
  /// that sits on its own CPU yields rather than spins: the peer cannot run until it does.
  std::atomic<int32_t> cpu{-1};
};

/// Wakes the owner of `waker` if it is asleep. Call after publishing the change it waits for.
void wakeIfSleeping(Waker* waker);
/// Raises `sleeping` on the caller's own Waker, then fences. The caller must look for work once
/// more before it sleeps: any post that look misses sees the flag and wakes it.
void announceSleep(Waker* waker);
/// Sleeps on `waker` until it is woken, `seq` differs from `seenSeq`, or timeoutNs passes.
void sleepOnWaker(Waker* waker, uint32_t seenSeq, int64_t timeoutNs);

/// The shared part of one FIFO: the sender's counters and the receiver's on cache lines of their
/// own. dataHead/dataTail count the data area's bytes of a FIFO with SlotLines (see above).
struct FifoControl {
  alignas(kCacheLine) std::atomic<uint64_t> head{0};
  std::atomic<uint64_t> dataHead{0};
  alignas(kCacheLine) std::atomic<uint64_t> tail{0};
  std::atomic<uint64_t> dataTail{0};
  /// A LentState: the receiver marks the reads of lent payloads, the sender withdraws its loans.
  std::atomic<uint32_t> lentState{kLentIdle};
};

/// Where one FIFO lives. Plain pointers: the same view works for memory mapped from another
/// process, pinned host memory or (later) device memory.
struct FifoView {
  FifoControl* control = nullptr;
  SlotHeader* headers = nullptr;  ///< nslots headers (FIFOs published through head)
  char* data = nullptr;           ///< nslots * slotBytes
  uint32_t nslots = 0;
  uint32_t slotBytes = 0;
  /// SlotLines instead of `headers`: slots are published through SlotLine::seq. Only for
  /// FIFOs whose both ends are SendConnector / RecvConnector.
  SlotLine* lines = nullptr;
  /// How many `lines` (0: nslots); with lines, the FIFO holds this many messages in flight.
  uint32_t nlines = 0;
  /// nlines payload areas of kSmallBytes, one per line, or nullptr (lines only).
  char* small = nullptr;
  /// Lines only: the data area's bytes (under 4 GiB), at least 3 * slotBytes (0: nslots *
  /// slotBytes).
  uint64_t dataBytes = 0;

  uint32_t depth() const { return lines != nullptr && nlines != 0 ? nlines : nslots; }
  uint64_t dataRingBytes() const {
    return dataBytes != 0 ? dataBytes : uint64_t{nslots} * slotBytes;
  }
};

/// What a payload of `bytes` takes of a data ring: whole cache lines, so payloads stay aligned.
inline uint64_t ringFootprint(uint64_t bytes) {
  return (bytes + kCacheLine - 1) / kCacheLine * kCacheLine;
}

/// The sending end of a FIFO, owned by one thread at a time.
class SendConnector {
 public:
  /// trySlot()'s argument when the size is not known yet: a data slot, never a line's own area.
  static constexpr uint32_t kAnyBytes = ~0u;

  SendConnector() = default;
  SendConnector(FifoView fifo, Waker* receiverWaker)
      : fifo_(fifo),
        receiverWaker_(receiverWaker),
        posted_(fifo.control->head.load(std::memory_order_relaxed)),
        dataPosted_(fifo.control->dataHead.load(std::memory_order_relaxed)) {}

  bool valid() const { return fifo_.control != nullptr; }
  uint32_t slotBytes() const { return fifo_.slotBytes; }
  /// Whom this FIFO's receiver lets lend it payloads (a FIFO with lines only).
  Lending lending() const { return fifo_.lines != nullptr ? lending_ : Lending::kNone; }
  void setLending(Lending lending) { lending_ = lending; }
  /// The Waker of the party that frees this FIFO's slots (the receiver, or a proxy).
  const Waker* peerWaker() const { return receiverWaker_; }

  /// Where to write the next slot's `bytes` (at most slotBytes), or nullptr while all slots are
  /// in flight - or, in a FIFO with lines, while the data area's first `window` bytes have no room
  /// (0: all of it; at least three of the caller's largest payloads, see above).
  char* trySlot(uint32_t bytes = kAnyBytes, uint64_t window = 0) {
    if (posted_ >= freeLimit_) {
      freeLimit_ = fifo_.control->tail.load(std::memory_order_acquire) + fifo_.depth();
      if (posted_ >= freeLimit_) return nullptr;
    }
    if (fifo_.lines == nullptr) {
      place_ = PayloadPlace::kData;
      return fifo_.data + (posted_ % fifo_.nslots) * fifo_.slotBytes;
    }
    const uint64_t line = posted_ % fifo_.depth();
    if (bytes <= kInlineBytes) {
      place_ = PayloadPlace::kInline;
      return fifo_.lines[line].inlineData;
    }
    if (fifo_.small != nullptr && bytes <= kSmallBytes) {
      place_ = PayloadPlace::kSmall;
      return fifo_.small + line * kSmallBytes;
    }
    const uint64_t ring = fifo_.dataRingBytes();
    const uint64_t end = window != 0 && window < ring ? window : ring;
    const uint64_t need = ringFootprint(std::min(bytes, fifo_.slotBytes));
    uint64_t start = dataPosted_;
    const uint64_t offset = start % ring;
    if (offset + need > end) start += ring - offset;  // start over: the next lap's beginning
    if (start + need > dataFreeLimit_) {
      dataFreeLimit_ = fifo_.control->dataTail.load(std::memory_order_acquire) + ring;
      if (start + need > dataFreeLimit_) return nullptr;
    }
    place_ = PayloadPlace::kData;
    dataStart_ = start;
    return fifo_.data + start % ring;
  }
  /// Publishes the slot trySlot() returned.
  void post(uint32_t bytes, const CallDescriptor& call) {
    const uint64_t index = posted_ % fifo_.depth();
    ++posted_;
    if (fifo_.lines != nullptr) {
      SlotLine& line = fifo_.lines[index];
      PayloadPlace place = place_;
      if (place == PayloadPlace::kData) {
        if (bytes <= kInlineBytes) {
          // Asked for without a size: a small payload moves to where the receiver looks first.
          std::memcpy(line.inlineData, fifo_.data + dataStart_ % fifo_.dataRingBytes(), bytes);
          place = PayloadPlace::kInline;
        } else {
          line.header.reserved = static_cast<uint32_t>(dataStart_ % fifo_.dataRingBytes());
          dataPosted_ = dataStart_ + ringFootprint(bytes);
          fifo_.control->dataHead.store(dataPosted_, std::memory_order_relaxed);
        }
      }
      line.header.bytes = bytes;
      line.header.call = call;
      line.place = static_cast<uint32_t>(place);
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
  /// Whether a line is free for lend() (all lines in flight: not yet).
  bool lineFree() {
    if (posted_ < freeLimit_) return true;
    freeLimit_ = fifo_.control->tail.load(std::memory_order_acquire) + fifo_.depth();
    return posted_ < freeLimit_;
  }
  /// Posts `bytes` that stay at `span` until the receiver releases the slot. Only after
  /// lineFree(), and where lending() allows it.
  void lend(uint32_t bytes, const CallDescriptor& call, const LentSpan& span) {
    SlotLine& line = fifo_.lines[posted_ % fifo_.depth()];
    ++posted_;
    lentUntil_ = posted_;
    std::memcpy(line.inlineData, &span, sizeof(span));
    line.header.bytes = bytes;
    line.header.call = call;
    line.place = static_cast<uint32_t>(PayloadPlace::kLent);
    lentHandedOver();
    std::atomic_ref<uint32_t>(line.seq).store(static_cast<uint32_t>(posted_),
                                              std::memory_order_release);
    fifo_.control->head.store(posted_, std::memory_order_release);
    wakeIfSleeping(receiverWaker_);
  }
  /// Whether the receiver has released every slot this end lent.
  bool lentReturned() const {
    const bool returned = fifo_.control->tail.load(std::memory_order_acquire) >= lentUntil_;
    if (returned) lentTaken();
    return returned;
  }
  /// Takes back what this end lent and the receiver has not released: true once the receiver
  /// will never read it (the memory may then be reused), false while it is reading it now. For
  /// good: this FIFO's receiver reads no loan after that (its call fails instead).
  bool tryWithdrawLent() {
    uint32_t state = kLentIdle;
    if (fifo_.control->lentState.compare_exchange_strong(state, kLentWithdrawn,
                                                         std::memory_order_acq_rel)) {
      state = kLentWithdrawn;
    }
    if (state != kLentWithdrawn) return false;
    lentTaken();
    return true;
  }

 private:
  FifoView fifo_;
  Waker* receiverWaker_ = nullptr;
  Lending lending_ = Lending::kNone;
  uint64_t lentUntil_ = 0;  ///< slots posted when this end last lent
  uint64_t posted_ = 0;
  uint64_t freeLimit_ = 0;
  uint64_t dataPosted_ = 0;  ///< data-area bytes taken (FIFOs with lines)
  uint64_t dataFreeLimit_ = 0;
  uint64_t dataStart_ = 0;  ///< where trySlot() placed the payload it returned
  PayloadPlace place_ = PayloadPlace::kData;
};

/// The receiving end of a FIFO, owned by one thread at a time.
class RecvConnector {
 public:
  RecvConnector() = default;
  /// `lent`: resolves the payloads the sender lends (none lent without it).
  RecvConnector(FifoView fifo, Waker* senderWaker, LentReader* lent = nullptr)
      : fifo_(fifo),
        senderWaker_(senderWaker),
        lent_(lent),
        consumed_(fifo.control->tail.load(std::memory_order_relaxed)),
        dataConsumed_(fifo.control->dataTail.load(std::memory_order_relaxed)) {}

  bool valid() const { return fifo_.control != nullptr; }
  /// The Waker of the party that posts into this FIFO (the sender, or a proxy).
  const Waker* peerWaker() const { return senderWaker_; }

  /// The header of the oldest unread slot, or nullptr while none has arrived.
  const SlotHeader* tryPeek() {
    const uint64_t index = consumed_ % fifo_.depth();
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
  /// The payload of the slot tryPeek() returned; nullptr for a lent one this process cannot read
  /// or the sender withdrew. A lent payload stays readable until release() or doneReading().
  const char* slotData() {
    if (fifo_.lines == nullptr) return fifo_.data + (consumed_ % fifo_.nslots) * fifo_.slotBytes;
    const uint64_t index = consumed_ % fifo_.depth();
    switch (static_cast<PayloadPlace>(fifo_.lines[index].place)) {
      case PayloadPlace::kInline: return fifo_.lines[index].inlineData;
      case PayloadPlace::kSmall: return fifo_.small + index * kSmallBytes;
      case PayloadPlace::kData: break;
      case PayloadPlace::kLent: return lentData(fifo_.lines[index]);
    }
    return fifo_.data + fifo_.lines[index].header.reserved;
  }
  /// Ends a read of a lent payload that slotData() began, without freeing its slot (release()
  /// does both): from here on the sender may withdraw it.
  void doneReading() {
    if (!reading_) return;
    reading_ = false;
    lentHandedOver();
    fifo_.control->lentState.store(kLentIdle, std::memory_order_release);
  }
  /// Whether the sender withdrew its loans (tryWithdrawLent): it gave up on its call.
  bool lentWithdrawn() const {
    return fifo_.control->lentState.load(std::memory_order_acquire) == kLentWithdrawn;
  }
  /// Frees the slot tryPeek() returned.
  void release() {
    doneReading();
    const SlotLine* line =
        fifo_.lines != nullptr ? &fifo_.lines[consumed_ % fifo_.depth()] : nullptr;
    if (line != nullptr && line->place == static_cast<uint32_t>(PayloadPlace::kData)) {
      // The payload follows the previous one, or the sender started the next lap.
      const uint64_t ring = fifo_.dataRingBytes();
      const uint64_t offset = dataConsumed_ % ring;
      if (line->header.reserved != offset) dataConsumed_ += ring - offset;
      dataConsumed_ += ringFootprint(line->header.bytes);
      fifo_.control->dataTail.store(dataConsumed_, std::memory_order_release);
    }
    ++consumed_;
    fifo_.control->tail.store(consumed_, std::memory_order_release);
    wakeIfSleeping(senderWaker_);
  }

 private:
  const char* lentData(const SlotLine& line) {
    if (lent_ == nullptr) return nullptr;
    if (!reading_) {
      // Marked before the address is even worked out: a sender that withdraws waits for this.
      uint32_t idle = kLentIdle;
      if (!fifo_.control->lentState.compare_exchange_strong(idle, kLentReading,
                                                            std::memory_order_acq_rel)) {
        return nullptr;  // withdrawn
      }
      reading_ = true;
      lentTaken();
    }
    LentSpan span;
    std::memcpy(&span, line.inlineData, sizeof(span));
    const char* data = lent_->address(span, line.header.bytes);
    if (data == nullptr) doneReading();
    return data;
  }

  FifoView fifo_;
  Waker* senderWaker_ = nullptr;
  LentReader* lent_ = nullptr;
  uint64_t consumed_ = 0;
  uint64_t available_ = 0;
  uint64_t dataConsumed_ = 0;  ///< data-area bytes freed (FIFOs with lines)
  bool reading_ = false;       ///< slotData() marked a lent payload as being read
};

}  // namespace braid
