#include "fifo/fifo.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>

namespace braid {
namespace {

long futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  // Not FUTEX_PRIVATE: the word may live in memory shared with other processes.
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

}  // namespace

void wakeIfSleeping(Waker* waker) {
  if (waker == nullptr) return;
  // Pairs with the fence in announceSleep().
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (waker->sleeping.load(std::memory_order_relaxed) != 0) {
    waker->seq.fetch_add(1, std::memory_order_seq_cst);
    futex(&waker->seq, FUTEX_WAKE, INT_MAX, nullptr);
    if (waker->eventFd >= 0) {
      const uint64_t one = 1;
      (void)!::write(waker->eventFd, &one, sizeof(one));
    }
  }
}

void announceSleep(Waker* waker) {
  waker->sleeping.store(1, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void sleepOnWaker(Waker* waker, uint32_t seenSeq, int64_t timeoutNs) {
  timespec timeout{static_cast<time_t>(timeoutNs / 1000000000),
                   static_cast<long>(timeoutNs % 1000000000)};
  futex(&waker->seq, FUTEX_WAIT, seenSeq, &timeout);
}

}  // namespace braid
