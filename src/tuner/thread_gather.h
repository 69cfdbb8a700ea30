// The bootstrap's all-gather for ranks that are threads of one process (tests and benchmarks of
// the tuner's shared grid): any number of rounds, each rank's time on its own thread per round.
#pragma once

#include <time.h>

#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include "tuner/tuner.h"

namespace braid {

class ThreadGather {
 public:
  explicit ThreadGather(int nranks) : nranks_(nranks), cpuSeconds_(size_t(nranks)) {}

  /// Rank `rank`'s share of the grid, gathering with the other threads.
  GridShare share(int rank) {
    GridShare s;
    s.rank = rank;
    s.nranks = nranks_;
    s.allGather = [this, rank](uint8_t* data, size_t bytesPerRank) {
      cpuSeconds_[size_t(rank)].push_back(threadCpuSeconds());
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return departing_ == 0; });  // the last round is read by all
      if (arrived_ == 0) all_.assign(bytesPerRank * size_t(nranks_), 0);
      std::memcpy(all_.data() + bytesPerRank * size_t(rank), data + bytesPerRank * size_t(rank),
                  bytesPerRank);
      const uint64_t round = round_;
      if (++arrived_ == nranks_) {
        arrived_ = 0;
        departing_ = nranks_;
        ++round_;
        cv_.notify_all();
      } else {
        cv_.wait(lock, [&] { return round_ != round; });
      }
      std::memcpy(data, all_.data(), all_.size());
      if (--departing_ == 0) cv_.notify_all();
      return okStatus();
    };
    return s;
  }

  /// Each rank's thread CPU seconds at each of its all-gathers, from the thread's start.
  const std::vector<std::vector<double>>& cpuSeconds() const { return cpuSeconds_; }

  static double threadCpuSeconds() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
  }

 private:
  int nranks_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<uint8_t> all_;
  int arrived_ = 0;
  int departing_ = 0;
  uint64_t round_ = 0;
  std::vector<std::vector<double>> cpuSeconds_;
};

}  // namespace braid
