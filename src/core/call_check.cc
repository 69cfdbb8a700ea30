#include "core/call_check.h"

#include <string>

#include "algorithms/plan.h"
#include "core/executor.h"

namespace braid {

void CallCheckLedger::expect(const CallDescriptor& call) {
  // Taken already: a drain at the start of this call compared it with the history.
  if (tookAny_ && !before(lastTaken_, call.seq)) return;
  pending_.push_back(call);
  npending_.store(static_cast<uint32_t>(pending_.size()), std::memory_order_relaxed);
}

Status CallCheckLedger::drain(bool useHistory) {
  Status status;
  while (from_ != nullptr) {
    const SlotHeader* header = from_->tryPeek();
    if (header == nullptr) break;
    const CallDescriptor& theirs = header->call;
    if (theirs.coll == static_cast<uint8_t>(Collective::kSend)) break;
    // Checks due before this slot's call never come: the predecessor's calls had none (a call
    // that differs from ours is caught by the slots that do come).
    while (!pending_.empty() && before(pending_.front().seq, theirs.seq)) pending_.pop_front();
    const bool due = !pending_.empty() && pending_.front().seq == theirs.seq;
    const CallDescriptor* ours = nullptr;
    if (due) {
      ours = &pending_.front();
    } else if (!useHistory || !before(theirs.seq, recordedEnd_)) {
      break;  // a call this rank has not made yet, or one only its own thread may judge
    } else if (history_[theirs.seq % kHistory].seq == theirs.seq) {
      ours = &history_[theirs.seq % kHistory];
    }
    if (ours != nullptr && *ours != theirs) {
      status = invalidUsage("rank " + std::to_string(peer_) + " called " + describeCall(theirs) +
                            " where rank " + std::to_string(rank_) + " called " +
                            describeCall(*ours));
      break;
    }
    if (due) pending_.pop_front();
    tookAny_ = true;
    lastTaken_ = theirs.seq;
    from_->release();
  }
  npending_.store(static_cast<uint32_t>(pending_.size()), std::memory_order_relaxed);
  return status;
}

Result<const SlotHeader*> CallCheckLedger::peekPointToPoint() {
  for (;;) {
    const SlotHeader* header = from_->tryPeek();
    if (header == nullptr || header->call.coll == static_cast<uint8_t>(Collective::kSend)) {
      return header;
    }
    // Collectives' checks, some of which may have landed after the last drain.
    const CallDescriptor head = header->call;
    RETURN_IF_ERROR(drain(/*useHistory=*/true));
    const SlotHeader* next = from_->tryPeek();
    if (next != nullptr && next->call == head) return next;  // not one this rank can take
  }
}

}  // namespace braid
