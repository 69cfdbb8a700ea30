// The executor protocol's memory operations on the host (executor_protocol.h describes the set),
// for the host threads that stand in for the device executor (host_lane_runner.h). Counters and
// flags are acquire loads and release stores, which is what the device's volatile accesses and
// system-scope fences give; headers and control fields are plain accesses, so that TSan checks
// that the counters order them. The fences are then compiler barriers only.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace braid::gpu {

struct HostMemoryOps {
  template <class T>
  static T load(const T* p) {
    return std::atomic_ref<T>(*const_cast<T*>(p)).load(std::memory_order_acquire);
  }
  template <class T>
  static void store(T* p, T v) {
    std::atomic_ref<T>(*p).store(v, std::memory_order_release);
  }
  static uint64_t readWord(const uint64_t* p) { return *p; }
  static void writeWord(uint64_t* p, uint64_t v) { *p = v; }
  template <class T>
  static void writeField(T* p, T v) {
    *p = v;
  }
  static void fenceAcquire() { std::atomic_signal_fence(std::memory_order_seq_cst); }
  static void fenceRelease() { std::atomic_signal_fence(std::memory_order_seq_cst); }
  static void fenceReleaseGpu() { std::atomic_signal_fence(std::memory_order_seq_cst); }
  /// A low-latency line (ll_protocol.h): the device writes data and flag in one 16-byte store;
  /// here the flag's release store publishes the data and its acquire load sees it.
  template <class Line>
  static void storeLine(Line* l, uint64_t data, uint64_t flag) {
    std::atomic_ref<uint64_t>(l->data).store(data, std::memory_order_relaxed);
    std::atomic_ref<uint64_t>(l->flag).store(flag, std::memory_order_release);
  }
  template <class Line>
  static void loadLine(const Line* l, uint64_t& data, uint64_t& flag) {
    Line* line = const_cast<Line*>(l);
    flag = std::atomic_ref<uint64_t>(line->flag).load(std::memory_order_acquire);
    data = std::atomic_ref<uint64_t>(line->data).load(std::memory_order_relaxed);
  }
  static uint32_t compareExchange(uint32_t* p, uint32_t expected, uint32_t desired) {
    std::atomic_ref<uint32_t>(*p).compare_exchange_strong(expected, desired,
                                                          std::memory_order_acq_rel);
    return expected;
  }
  static uint64_t nowNs() {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
  }
  /// Host threads share few cores with the proxies they wait on: a long wait sleeps a little.
  static void backoff() { std::this_thread::sleep_for(std::chrono::microseconds(20)); }
};

}  // namespace braid::gpu
