// The host executor: runs one rank's Plan on the calling thread with the CPU kernels.
//
// A PlanRun never blocks. progress() advances every lane as far as the FIFOs allow and reports
// whether anything moved; the progress engine (progress.h) decides how to wait between calls.
// A lane runs its steps in order, except that while one waits the sends of the steps after it go
// early where they read nothing a step still to come writes (a Send, an exchange's send half):
// a rank then hands a peer several chunks per turn on a shared core instead of one
// (docs/performance-notes.md#early-sends). The cost model simulates the same (plan_cost).
// Every received slot is checked against this rank's own call (size and CallDescriptor), so ranks
// that disagree fail with a message naming both calls instead of corrupting data or hanging.
// Because the communicator appends a call check lane to every plan that exchanges data (empty
// slots to the ring successor and from the ring predecessor, or to and from a send's or receive's
// peer, on a channel no algorithm uses: addCallCheckLane), this holds whatever route the
// algorithm's data takes: a rank whose call differs from its predecessor's always receives a slot
// that says so, and its failure notice reaches the others. The executor posts and takes those
// slots (kStepCallCheck) where it skips other transfers of 0 bytes; a collective's go through
// the communicator's ledger, which sends several calls' descriptors in one (call_check.h).
// Small calls whose first data slots already reach the ring successor at once skip the lane
// (dataChecksTheCall); a rank whose call differs from such a peer's may then wait on a slot
// that never comes, so a waiting run also looks at the slots its peers did post (findMismatch).
#pragma once

#include <functional>
#include <optional>
#include <type_traits>
#include <vector>

#include "algorithms/plan.h"
#include "base/status.h"
#include "executor/call.h"
#include "executor/call_check.h"
#include "executor/connectors.h"
#include "fifo/fifo.h"
#include "kernels/cpu/reduce.h"

namespace braid {

/// "allreduce(count=1000, float, sum) #3 [ring]" and the like, for reports: the call as rank
/// `rank` made it (a transfer reads as a send on its sender and a recv on its receiver).
std::string describeCall(const CallDescriptor& call, int rank);

/// One rank's run of one Plan: its lanes, their positions, and what they lent or hold.
class PlanRun {
 public:
  /// `mayStream`: large outputs may be written with non-temporal stores (see streamOutput_).
  /// `checks`: the communicator's call check ledger, which takes the predecessor's check slots
  /// (call_check.h); without one, a call waits for its own check slot.
  PlanRun(const Plan& plan, PlanBuffers buffers, const kernels::Reducer& reducer,
          const CallDescriptor& call, ConnectorTable* connectors, bool mayStream = true,
          CallCheckLedger* checks = nullptr);
  PlanRun(const PlanRun&) = delete;  // lanes_ may point into the object itself
  PlanRun& operator=(const PlanRun&) = delete;

  /// Advances what can advance now. Returns whether anything moved.
  Result<bool> progress();
  /// Every step ran, and peers have read what this rank lent them (its input must not change
  /// before, nor the call return).
  bool done() const { return lanesLeft_ == 0 && lentReturned(); }
  const CallDescriptor& call() const { return call_; }
  /// describeCall of this rank's call.
  std::string describe() const { return describeCall(call_, plan_.rank); }
  /// Where the run stands, for timeout reports ("lane 0 step 3/12 (recvReduceSend from 2)").
  std::string position() const;
  /// Appends the peers that the current step of each unfinished lane exchanges with.
  void waitingOn(std::vector<int>& peers) const;
  /// After a failure, before the caller's buffers may change or go: takes back whatever this run
  /// lent and its readers have not released, waiting out reads in progress (a peer for which
  /// peerAlive(peer) turns false is not waited for). Their reads then fail.
  void withdrawLent(const std::function<bool(int)>& peerAlive);
  /// Whether a lane last found itself blocked on a peer whose Waker says it waits on `cpu`.
  bool blockedOnCpu(int cpu) const;
  /// Peeks (takes nothing) at the oldest slot from each of `peers` on every channel this rank
  /// has a FIFO from it, creating the call check's (the last channel): one posted for this
  /// collective's sequence number by a different call is a mismatch, reported like one taken.
  Status findMismatch(const std::vector<int>& peers);

 private:
  enum class StepResult { kBlocked, kPartial, kDone };
  static constexpr size_t kLookAheadSteps = 4;
  /// Steps past the current one whose sends a lane may post early (each FIFO's slots and window
  /// bound it further).
  static constexpr uint32_t kMaxSendAheadSteps = 16;
  struct LaneState {
    size_t next = 0;
    bool sendDone = false;  ///< halves of an independent step already finished
    bool recvDone = false;
    bool expected = false;     ///< a check step told the ledger its slot is due
    bool queued = false;       ///< a check step gave the ledger its descriptor to send
    bool sentAhead = false;    ///< sendAhead posted this step's sends (a Send step is then done)
    uint32_t passedAhead = 0;  ///< steps after `next` that sendAhead has walked past
    const Waker* blockedOn = nullptr;  ///< the peer the current step last waited for
  };

  /// Where the `bytes` that `step` sends (lentSource) can be lent to the receiver of `send`
  /// rather than copied into its FIFO, or nothing: a collective's (a lone send must not wait
  /// for its receiver) step marked kStepLendable, sending more than a FIFO line holds, to a
  /// receiver that can read where they lie.
  std::optional<LentSpan> lendable(const SendConnector& send, const Step& step, uint32_t bytes);
  /// Lends them (after send->lineFree()) and remembers to wait for their return.
  void lend(SendConnector* send, int peer, uint32_t bytes, const LentSpan& span);
  /// Whether every peer this run lent to has released what it lent.
  bool lentReturned() const;

  Result<StepResult> tryDependent(const Step& step, int channel, LaneState& state);
  Result<StepResult> tryIndependent(const Step& step, int channel, LaneState& state);
  /// Posts the sends of the steps after a blocked one while they read nothing a step still to
  /// come writes, so that a rank hands its peers several chunks before it waits.
  Result<bool> sendAhead(const Lane& lane, LaneState& state);
  Status checkSlot(const SlotHeader& header, int peer, uint32_t expectedBytes) const;
  /// The payload of the slot `recv` holds from `peer`; an error for a lent one it cannot read or
  /// that `peer` took back (withdrawLent). A lent one is being read until recv.release().
  Result<const char*> received(RecvConnector& recv, int peer) const;
  /// The receiving half of a check step from the ledger's predecessor: drains its check FIFO;
  /// a collective's is done once the ledger is within its lag, a receive's once its slot is taken.
  Result<bool> takeCheckViaLedger(const Step& step, int channel, LaneState& state);
  /// The sending half of a check step to the ledger's successor: queues a collective's
  /// descriptor (sending the queue once it is full); sends a point-to-point check after whatever
  /// is queued. Returns whether the half is done.
  bool sendCheckViaLedger(SendConnector* send, LaneState& state);
  const char* in(BufferRef ref) const;
  char* out(BufferRef ref) const;

  const Plan& plan_;
  PlanBuffers buffers_;
  kernels::Reducer reducer_;
  CallDescriptor call_;
  ConnectorTable* connectors_;
  CallCheckLedger* checks_;
  bool startDrained_ = false;
  // Lane states in place for plans of up to kInlineLanes lanes (no allocation per small call),
  // constructed only as many as the plan has.
  static constexpr size_t kInlineLanes = 8;
  union InlineLanes {
    InlineLanes() {}
    LaneState states[kInlineLanes];
  };
  static_assert(std::is_trivially_destructible_v<LaneState>);
  InlineLanes inlineLanes_;
  std::vector<LaneState> moreLanes_;
  LaneState* lanes_;
  /// Write Output with non-temporal stores: allowed by the caller and larger than the cache.
  bool streamOutput_ = false;
  /// Whether this run may lend at all (mayLend in executor.cc).
  bool lends_ = false;
  /// Where Input and Output lie in shared buffers: looked up when a send could first use it.
  struct SharedSpan {
    enum class State : uint8_t { kUnknown, kNo, kYes } state = State::kUnknown;
    LentSpan span;
  };
  SharedSpan inputShared_, outputShared_;
  struct LentTo {
    int peer;
    SendConnector* send;
  };
  std::vector<LentTo> lentTo_;  ///< the FIFOs this run lent on
  size_t lanesLeft_ = 0;
};

}  // namespace braid
