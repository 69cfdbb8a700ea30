// HandOff: items that any thread gives and one thread takes all at once (a proxy thread taking
// in the connections other threads opened). Its taker checks for work in a busy loop, so a take
// with nothing given costs one atomic load, not a lock.
#pragma once

#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

namespace braid {

/// A many-giver, one-taker hand-off of items of type T.
template <typename T>
class HandOff {
 public:
  /// Adds `item`; the taker's next take() returns it.
  void give(T item) {
    std::lock_guard<std::mutex> lock(mutex_);
    items_.push_back(std::move(item));
    pending_.store(true, std::memory_order_release);
  }

  /// Every item given since the last take, in the order given (empty when none).
  std::vector<T> take() {
    std::vector<T> taken;
    if (!pending_.load(std::memory_order_acquire)) return taken;
    std::lock_guard<std::mutex> lock(mutex_);
    taken.swap(items_);
    pending_.store(false, std::memory_order_relaxed);
    return taken;
  }

 private:
  std::mutex mutex_;
  std::vector<T> items_;  ///< under mutex_
  std::atomic<bool> pending_{false};
};

}  // namespace braid
