#include "executor/call_check.h"

#include <cstring>
#include <string>

#include "algorithms/plan.h"
#include "executor/executor.h"

namespace braid {

void CallCheckLedger::expect(const CallDescriptor& call) {
  // Taken already: a drain at the start of this call compared it with the history.
  if (tookAny_ && !before(lastTaken_, call.seq)) return;
  pending_.push_back(call);
  npending_.store(static_cast<uint32_t>(pending_.size()), std::memory_order_relaxed);
}

Status CallCheckLedger::drain(bool useHistory) {
  Status status;
  bool stopped = false;
  while (from_ != nullptr && !stopped) {
    const SlotHeader* header = from_->tryPeek();
    if (header == nullptr) break;
    if (header->call.coll == static_cast<uint8_t>(Collective::kSend)) break;
    // The descriptors the slot carries, oldest first: its payload's, then its header's.
    const size_t held = header->bytes / sizeof(CallDescriptor);
    if (header->bytes % sizeof(CallDescriptor) != 0 || held >= kMaxBatch) {
      return internalError("rank " + std::to_string(peer_) + " sent a call check of " +
                           std::to_string(header->bytes) + " bytes, not up to " +
                           std::to_string(kMaxBatch - 1) + " call descriptors");
    }
    const char* payload = held > 0 ? from_->slotData() : nullptr;
    for (; takenInSlot_ <= held; ++takenInSlot_) {
      CallDescriptor theirs = header->call;
      if (takenInSlot_ < held) {
        std::memcpy(&theirs, payload + takenInSlot_ * sizeof(CallDescriptor), sizeof(theirs));
      }
      // Checks due before this call never come: the predecessor's calls had none (a call that
      // differs from ours is caught by the slots that do come).
      while (!pending_.empty() && before(pending_.front().seq, theirs.seq)) pending_.pop_front();
      const bool due = !pending_.empty() && pending_.front().seq == theirs.seq;
      const CallDescriptor* ours = nullptr;
      if (due) {
        ours = &pending_.front();
      } else if (!useHistory || !before(theirs.seq, recordedEnd_)) {
        stopped = true;  // a call this rank has not made yet, or one only its own thread may judge
        break;
      } else if (history_[theirs.seq % kHistory].seq == theirs.seq) {
        ours = &history_[theirs.seq % kHistory];
      }
      if (ours != nullptr && *ours != theirs) {
        status = invalidUsage("rank " + std::to_string(peer_) + " called " +
                              describeCall(theirs, peer_) + " where rank " + std::to_string(rank_) +
                              " called " + describeCall(*ours, rank_));
        stopped = true;
        break;
      }
      if (due) pending_.pop_front();
      tookAny_ = true;
      lastTaken_ = theirs.seq;
    }
    if (stopped) break;
    takenInSlot_ = 0;
    from_->release();
  }
  npending_.store(static_cast<uint32_t>(pending_.size()), std::memory_order_relaxed);
  return status;
}

bool CallCheckLedger::queue(const CallDescriptor& call) {
  queued_.push_back(call);
  nqueued_.store(static_cast<uint32_t>(queued_.size()), std::memory_order_relaxed);
  return queued_.size() >= batch_;
}

bool CallCheckLedger::sendQueued() {
  if (queued_.empty()) return true;
  const uint32_t bytes = static_cast<uint32_t>((queued_.size() - 1) * sizeof(CallDescriptor));
  char* slot = to_->trySlot(bytes);
  if (slot == nullptr) return false;
  if (bytes > 0) std::memcpy(slot, queued_.data(), bytes);
  to_->post(bytes, queued_.back());
  queued_.clear();
  nqueued_.store(0, std::memory_order_relaxed);
  return true;
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
