// Which communicator each thread is inside, so that destroy can wait for calls in progress on
// other threads without every call paying two atomic read-modify-writes for it.
//
// A call stores the communicator in its thread's slot and then reads the communicator's `live`
// flag, with no fence between: plain moves on x86. Destroy clears `live` and then issues a
// process-wide barrier (membarrier, private expedited), which makes every other thread's earlier
// slot store visible before destroy looks at the slots; a thread that stores after the barrier
// reads `live` after it too, and backs off. Where membarrier is unavailable, threads get no slot
// and their calls count themselves in braidComm::activeCalls instead.
#pragma once

#include <atomic>

namespace braid {

/// A thread's published "inside a call on this communicator" (nullptr: none).
using PresenceSlot = std::atomic<const void*>;

/// The calling thread's slot, or nullptr until presenceSlotForThisThread() made it.
extern thread_local PresenceSlot* tPresenceSlot;

/// Makes the calling thread's slot (registering it for waitUntilNoneInside); nullptr where the
/// process barrier is unavailable. Slow: call where a lock is taken anyway.
PresenceSlot* presenceSlotForThisThread();

/// Call after clearing `live` (sequentially consistent): returns once no thread is inside a call
/// on `comm` that saw it live.
void waitUntilNoneInside(const void* comm);

}  // namespace braid
