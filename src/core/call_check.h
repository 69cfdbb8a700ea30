// The receiving half of the call check, kept per communicator.
//
// Every collective whose data alone would not reveal a mismatch posts an empty slot with its
// descriptor to its ring successor on a channel of its own (addCallCheckLane); the successor
// compares it with its own call of the same sequence number. Waiting for that slot before a call
// returns ties every rank to its predecessor's arrival: a broadcast root or a reduce leaf, whose
// part needs nobody, then pays a hand-off per call (4 ranks on 2 cores, 64 B broadcast: 2.4 us
// against 0.34 without the check). So the slot is taken whenever it has arrived - during the
// call, at the start of a later one, while a call waits, or from braidCommGetAsyncError - and a
// call waits for it only while more than maxLag calls are still unchecked (BRAID_CALL_CHECK=2:
// none, every call waits for its own). A mismatch found late fails the rank that finds it, naming
// both calls; its failure notice reaches the others.
//
// One thread runs a communicator's calls, but braidCommGetAsyncError may come from another: every
// use of the predecessor's check FIFO happens under the ledger's lock, and the other thread only
// tries it.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>  // std::unique_lock over TryLock
#include <thread>

#include "core/status.h"
#include "transport/fifo.h"

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

class CallCheckLedger {
 public:
  /// The default lag: far fewer calls than a FIFO holds, so the predecessor never waits on us.
  static constexpr uint32_t kDefaultMaxLag = 32;

  CallCheckLedger() = default;
  CallCheckLedger(const CallCheckLedger&) = delete;
  CallCheckLedger& operator=(const CallCheckLedger&) = delete;

  /// This rank's number (for messages), its ring predecessor's (whose check slots it takes)
  /// and how many calls may return unchecked.
  void configure(int rank, int predecessor, uint32_t maxLag) {
    rank_ = rank;
    peer_ = predecessor;
    maxLag_ = maxLag;
  }
  int predecessor() const { return peer_; }

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

 private:
  static constexpr uint32_t kHistory = 64;
  static bool before(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) < 0; }

  int rank_ = 0;
  uint32_t maxLag_ = kDefaultMaxLag;
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
