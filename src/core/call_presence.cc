#include "core/call_presence.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace braid {
namespace {

std::mutex gSlotsMutex;
std::vector<PresenceSlot*>& slots() {
  static auto* all = new std::vector<PresenceSlot*>();
  return *all;
}

int membarrier(int cmd) { return static_cast<int>(syscall(__NR_membarrier, cmd, 0, 0)); }

/// Whether this process may issue private expedited barriers (registered once).
bool barrierAvailable() {
  static const bool available = membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
  return available;
}

/// Owns a thread's slot and takes it out of the list when the thread ends.
struct SlotOwner {
  PresenceSlot slot{nullptr};
  bool registered = false;
  ~SlotOwner() {
    if (!registered) return;
    tPresenceSlot = nullptr;
    std::lock_guard<std::mutex> lock(gSlotsMutex);
    std::erase(slots(), &slot);
  }
};

thread_local SlotOwner tOwner;

}  // namespace

thread_local PresenceSlot* tPresenceSlot = nullptr;

PresenceSlot* presenceSlotForThisThread() {
  if (tPresenceSlot != nullptr) return tPresenceSlot;
  if (!barrierAvailable()) return nullptr;
  {
    std::lock_guard<std::mutex> lock(gSlotsMutex);
    slots().push_back(&tOwner.slot);
  }
  tOwner.registered = true;
  tPresenceSlot = &tOwner.slot;
  return tPresenceSlot;
}

void waitUntilNoneInside(const void* comm) {
  if (!barrierAvailable()) return;  // no thread has a slot
  (void)membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(gSlotsMutex);
      if (std::none_of(slots().begin(), slots().end(), [comm](const PresenceSlot* s) {
            return s->load(std::memory_order_acquire) == comm;
          })) {
        return;
      }
    }
    std::this_thread::yield();
  }
}

}  // namespace braid
