// The call check, kept per communicator.
//
// Every collective whose data alone would not reveal a mismatch checks itself against its ring
// successor's call on a channel of its own (addCallCheckLane): its descriptor goes to the
// successor, which compares it with its own call of the same sequence number, and its
// predecessor's comes to it.
//
// Receiving. Waiting for the predecessor's descriptor before a call returns ties every rank to
// its predecessor's arrival: a broadcast root or a reduce leaf, whose part needs nobody, then
// pays a hand-off per call (docs/performance-notes.md#the-call-check). So a slot is taken
// whenever it has arrived - during the call, at the start of a later one, while a call waits, or
// from braidCommGetAsyncError - and a call waits for it only while more than maxLag calls are
// still unchecked (BRAID_CALL_CHECK=2: none, every call waits for its own). A mismatch found late
// fails the rank that finds it, naming both calls; its failure notice reaches the others.
//
// Sending. An empty slot per call still costs both ranks a cache line each way, as much as the
// data of a small rooted call. So a rank that runs on without waiting holds its descriptors back
// and sends up to `batch` of them in one slot, the newest in its header and the others in its
// payload. The queue goes out once it is full, as soon as the rank waits for anything (no slower
// than holding it, and its successor hears sooner), before a point-to-point check to the
// successor (the FIFO keeps calls in order), and from braidCommGetAsyncError; so a deviant that
// runs ahead is still reported to a peer that waits on it, and to every rank that asks for its
// asynchronous error.
//
// One thread runs a communicator's calls, but braidCommGetAsyncError may come from another: every
// use of the check FIFOs to the successor and from the predecessor happens under the ledger's
// lock, and the other thread only tries it.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>  // std::unique_lock over TryLock
#include <thread>
#include <vector>

#include "base/status.h"
#include "fifo/fifo.h"

namespace braid {

/// A lock the call path only tries (a held one means: look again at the next sweep). Cheaper
/// than a mutex, whose unlock is a second atomic read-modify-write.
class TryLock {
 public:
  bool try_lock() { return !held_.exchange(true, std::memory_order_acquire); }
  void lock() {
    while (!try_lock()) std::this_thread::yield();
  }
  void unlock() { held_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> held_{false};
};

/// A communicator's call check (see above): descriptors held back for the successor, and the
/// predecessor's calls not yet checked.
class CallCheckLedger {
 public:
  /// The default lag: as many calls as a shared-memory FIFO holds, so a rank runs as far ahead
  /// of its predecessor as its data lets it (docs/performance-notes.md#the-call-check), while the
  /// predecessor's check slots, 8 calls each, fill an eighth of their FIFO.
  static constexpr uint32_t kDefaultMaxLag = 64;
  /// The default batch: well under the lag, so a successor never waits on descriptors held back
  /// (the predecessor has sent all but batch - 1 of its calls' when it starts the next).
  static constexpr uint32_t kDefaultBatch = 8;
  static_assert(kDefaultBatch <= kDefaultMaxLag);

  CallCheckLedger() = default;
  CallCheckLedger(const CallCheckLedger&) = delete;
  CallCheckLedger& operator=(const CallCheckLedger&) = delete;

  /// This rank's number (for messages), its ring predecessor's (whose check slots it takes) and
  /// successor's (to which it sends its own), how many calls may return unchecked and how many
  /// descriptors one slot carries to the successor (1: a slot per call, none held back).
  void configure(int rank, int predecessor, int successor, uint32_t maxLag, uint32_t batch) {
    rank_ = rank;
    peer_ = predecessor;
    successor_ = successor;
    maxLag_ = maxLag;
    batch_ = std::clamp<uint32_t>(batch, 1, kMaxBatch);
  }
  int predecessor() const { return peer_; }
  int successor() const { return successor_; }

  /// Notes one of this rank's collectives as it is prepared (the calling thread, no lock): slots
  /// of calls that had no check of their own here are still compared with it.
  void record(const CallDescriptor& call) {
    history_[call.seq % kHistory] = call;
    recordedEnd_ = call.seq + 1;
  }

  /// Whether checks are outstanding (any thread, no lock).
  bool hasPending() const { return npending_.load(std::memory_order_relaxed) != 0; }

  /// The lock every use of the predecessor's check FIFO holds.
  TryLock& mutex() { return mutex_; }

  /// drain() under the lock, attaching `from` first if nothing is attached yet - unless another
  /// thread holds the lock: it is draining, and this caller's next look will see what it left.
  Status tryDrain(bool useHistory, RecvConnector* from = nullptr) {
    std::unique_lock<TryLock> lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock()) return okStatus();
    if (from_ == nullptr) from_ = from;
    return drain(useHistory);
  }

  // The rest under mutex().

  /// The predecessor's check FIFO, once a call has made it.
  void attach(RecvConnector* from) { from_ = from; }

  /// This call's check slot is due from the predecessor (unless a drain took it already).
  void expect(const CallDescriptor& call);

  /// Takes the predecessor's collective check slots that have arrived, comparing each with this
  /// rank's call of the same sequence number. Stops at a point-to-point check's slot (its receive
  /// takes it) and at a call this rank has not made yet. `useHistory`: calls that expected no
  /// slot are compared too (only the calling thread may read the history).
  Status drain(bool useHistory);

  /// The predecessor's next point-to-point check slot, once the collectives' slots ahead of it
  /// are taken (drain); nullptr while none has come. A collective's slot this rank cannot take
  /// yet (a call it has not made) is returned instead: the receive's check reports the mismatch.
  Result<const SlotHeader*> peekPointToPoint();

  /// Whether few enough checks are outstanding for a call to return.
  bool withinLag() const { return pending_.size() <= maxLag_; }

  // The sending half, under mutex() too.

  /// The successor's check FIFO, once a call has sent on it.
  void attachSuccessor(SendConnector* to) { to_ = to; }
  /// Queues this rank's `call` for the successor (once per call: the check step offers it
  /// once); returns whether the queue is due to go out now (full).
  bool queue(const CallDescriptor& call);
  /// Sends the queued descriptors as one slot; false while the FIFO has no room for it.
  bool sendQueued();
  /// Whether descriptors are held back (any thread, no lock).
  bool hasQueued() const { return nqueued_.load(std::memory_order_relaxed) != 0; }
  /// sendQueued() under the lock, unless another thread holds it or nothing is attached yet;
  /// returns whether a slot went out.
  bool trySendQueued() {
    std::unique_lock<TryLock> lock(mutex_, std::try_to_lock);
    return lock.owns_lock() && to_ != nullptr && !queued_.empty() && sendQueued();
  }

 private:
  static constexpr uint32_t kHistory = 64;
  static constexpr uint32_t kMaxBatch = 32;
  static bool before(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) < 0; }

  int rank_ = 0;
  uint32_t maxLag_ = kDefaultMaxLag;
  uint32_t batch_ = 1;
  int successor_ = -1;
  SendConnector* to_ = nullptr;
  std::vector<CallDescriptor> queued_;  ///< held back for the successor, in call order
  std::atomic<uint32_t> nqueued_{0};
  size_t takenInSlot_ = 0;  ///< descriptors of the predecessor's current slot already taken
  TryLock mutex_;
  RecvConnector* from_ = nullptr;
  int peer_ = -1;
  std::deque<CallDescriptor> pending_;  ///< calls whose slot is due, oldest first
  std::atomic<uint32_t> npending_{0};
  bool tookAny_ = false;
  uint32_t lastTaken_ = 0;  ///< sequence number of the newest slot taken
  std::array<CallDescriptor, kHistory> history_{};
  uint32_t recordedEnd_ = 0;  ///< one past the newest call recorded
};

}  // namespace braid
